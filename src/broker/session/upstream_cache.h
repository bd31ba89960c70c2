// The broker's own resolution of a name for one session's upstream
// connections, remembered for the answer's TTL (capped), so that each new
// upstream connection does not cost two DNS queries on the proxy's pool.
//
// One per session, owned by the session (session_state.h): a session never
// learns by timing what another resolved, and a resolution finishing after
// its session was deleted fills only that session's cache, which goes with
// it (never one re-created under the same id).
// What the cache answers is still intersected with what the session was told
// (SessionProxyPolicy::resolve_upstream), so a stale told address stays
// refused. Failures and empty answers are not remembered. Concurrent misses
// of one session and name share one resolution.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "userspace/net/address.h"

namespace zn::broker {

struct TimedAddresses {
  std::vector<net::IpAddress> addresses;
  uint32_t ttl = 0;  // seconds; 0 = not to be remembered
};

struct UpstreamCacheConfig {
  // Upper bound on how long an answer is reused, whatever its TTL: how
  // late the proxy may notice that a name moved.
  std::chrono::seconds max_ttl{30};
  // Names remembered per session; past it the session's expired entries go,
  // and if none expired, all its finished entries (a guest cycling names
  // only empties its own cache).
  size_t max_names_per_session = 256;
};

class UpstreamResolutionCache {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using Resolve = std::function<TimedAddresses(const std::string& host)>;

  explicit UpstreamResolutionCache(UpstreamCacheConfig config = {}, Clock clock = {});

  // The addresses of `host`: remembered, or resolved by `resolve` (which
  // may block: the caller is off any I/O loop). Any thread; blocks only
  // while this or a concurrent call resolves the same name.
  std::vector<net::IpAddress> get(const std::string& host, const Resolve& resolve);

  // Resolutions performed (misses), for tests and metrics.
  uint64_t resolutions() const;
  // Names remembered now (in flight included).
  size_t size() const;

 private:
  struct Entry {
    std::shared_future<TimedAddresses> answer;
    std::chrono::steady_clock::time_point expires;  // max() while in flight
  };
  void make_room_locked(std::chrono::steady_clock::time_point now);

  UpstreamCacheConfig config_;
  Clock clock_;
  mutable std::mutex mu_;  // held to find or swap an entry, never across a resolution
  std::map<std::string, Entry> names_;
  uint64_t resolutions_ = 0;
};

}  // namespace zn::broker
