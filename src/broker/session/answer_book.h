// What governed DNS told one session, for the proxy's pinning
// (SessionProxyPolicy::resolve_upstream connects only to addresses the
// session was told for that name, within their TTL). Owned by the session
// (session_state.h): it goes when the session goes, and an answer that
// arrives for a session already deleted lands in that session's book, never
// in a session created later under the same id.
//
// Bounded where it is declared: a guest allowed a wildcard can ask for any
// number of random names under it, and each answer is remembered here. Past
// the bound the expired answers go first, then the least recently used one
// (an eviction, counted by the caller). A name that is gone is refused to a
// new connection, as one never asked for is (fail closed), until the guest
// resolves it again. A session's flood evicts only its own names.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
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
  using TimePoint = std::chrono::steady_clock::time_point;
  static constexpr size_t kDefaultMaxNames = 4096;

  explicit DnsAnswerBook(size_t max_names = kDefaultMaxNames);

  // Adds what the session was told for `name` (merged with what it was told
  // before: A and AAAA come as two answers), valid for `ttl` seconds from
  // `now`; the name becomes the most recently used. Returns the unexpired
  // answers pushed out to make room (0 or 1). Any thread.
  size_t record(const std::string& name, const std::vector<net::IpAddress>& addresses, uint32_t ttl,
                TimePoint now);
  // The unexpired addresses told for `name` (empty: none, or expired, or
  // evicted); a hit makes the name the most recently used.
  std::vector<net::IpAddress> lookup(const std::string& name, TimePoint now);

  // Names remembered now (expired ones not yet dropped included).
  size_t size() const;
  size_t max_names() const { return max_names_; }

 private:
  struct Entry {
    std::vector<net::IpAddress> addresses;
    std::chrono::steady_clock::time_point expires;
    std::list<std::string>::iterator position;                                           // in recency_
    std::multimap<std::chrono::steady_clock::time_point, std::string>::iterator expiry;  // in by_expiry_
  };
  void erase_locked(std::unordered_map<std::string, Entry>::iterator e);
  // Makes room for one more name; the live answers evicted.
  size_t make_room_locked(TimePoint now);

  const size_t max_names_;
  mutable std::mutex mu_;
  std::list<std::string> recency_;  // front: most recently used
  std::multimap<TimePoint, std::string> by_expiry_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace zn::broker
