// What governed DNS told each session, for the proxy's pinning
// (SessionProxyPolicy::resolve_upstream connects only to addresses the
// session was told for that name, within their TTL).
//
// Bounded per session: a guest allowed a wildcard can ask for any number of
// random names under it, and each answer is remembered here. Past the bound
// the session's expired answers go first, then its least recently used one
// (an eviction, counted). A name that is gone is refused to a new
// connection, as one never asked for is (fail closed), until the guest
// resolves it again. One session's flood evicts only its own names.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "userspace/net/address.h"

namespace zn::broker {

class DnsAnswerBook {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  static constexpr size_t kDefaultMaxNamesPerSession = 4096;

  explicit DnsAnswerBook(size_t max_names_per_session = kDefaultMaxNamesPerSession, Clock clock = {});

  // Adds what the session was told for `name` (merged with what it was told
  // before: A and AAAA come as two answers), valid for `ttl` seconds from
  // now; the name becomes the session's most recently used. Any thread.
  void record(const std::string& session, const std::string& name,
              const std::vector<net::IpAddress>& addresses, uint32_t ttl);
  // The unexpired addresses told to the session for `name` (empty: none, or
  // expired, or evicted); a hit makes the name the most recently used.
  std::vector<net::IpAddress> lookup(const std::string& session, const std::string& name);
  // A deleted session's answers go with it.
  void forget(const std::string& session);

  // Unexpired answers pushed out by newer ones, since the start.
  uint64_t evictions() const { return evictions_.load(std::memory_order_relaxed); }
  // Names remembered for a session now (expired ones not yet dropped included).
  size_t size(const std::string& session) const;

 private:
  struct Entry {
    std::vector<net::IpAddress> addresses;
    std::chrono::steady_clock::time_point expires;
    std::list<std::string>::iterator position;  // in Names::recency
    std::multimap<std::chrono::steady_clock::time_point, std::string>::iterator
        expiry;  // in Names::by_expiry
  };
  struct Names {
    std::list<std::string> recency;  // front: most recently used
    std::multimap<std::chrono::steady_clock::time_point, std::string> by_expiry;
    std::unordered_map<std::string, Entry> entries;
  };
  void erase_locked(Names& names, std::unordered_map<std::string, Entry>::iterator e);
  // Makes room for one more name in `names`.
  void make_room_locked(Names& names, std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point now() const;

  const size_t max_names_;
  const Clock clock_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Names> sessions_;
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace zn::broker
