// Standing approvals: `znctl approval allow TICKET --for 10m` approves the
// held request and, for that bounded time, lets every request of the same
// session, scheme, method and host whose path the grant covers pass an "ask"
// rule without being held. A grant covers the held request's exact
// normalised path, or a PathPattern the operator gave (--path "/repos/**").
//
// Every grant expires: its duration is at least a second and at most the
// configured maximum (24 h by default). Expiry is noticed lazily (a lookup
// or a listing that meets an expired grant removes it) and by sweep(), which
// zerod calls every second from its periodic thread, so an expired grant is
// reported within about a second even when nothing looks at it. revoke()
// ends a grant at once: a request decided after it returns is held again. A
// deleted session's grants go with it.
//
// In memory only: a restart of zerod drops every grant, on purpose (a
// standing approval is never brought back from disk; the operator grants
// again).
//
// Concurrency: covers() runs on the proxy's I/O loops. The lock is held only
// to scan the live grants (a handful) and never across I/O or a callback;
// `notify` runs after it is released, in the calling thread, and must only
// hand off (post an audit event, queue a notice), never block.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/policy/path_pattern.h"

namespace zn::broker {

// What a grant is for: one request's shape.
struct GrantScope {
  std::string session, scheme, method, host;
  std::string path;  // the exact normalised path, or a PathPattern's text when `pattern`
  bool pattern = false;
};

struct Grant {
  uint64_t id = 0;  // random, never 0 (names the grant in `znctl approval revoke`)
  GrantScope scope;
  uint64_t ticket = 0;  // the held request it was granted from
  uint32_t uid = 0;     // who granted it (SO_PEERCRED of the control client)
  std::chrono::system_clock::time_point created, expires;
};

enum class GrantEvent { kCreated, kRevoked, kExpired, kSessionDeleted };

class GrantBook {
 public:
  using Clock = std::chrono::steady_clock;
  using Notify = std::function<void(const Grant&, GrantEvent)>;
  static constexpr std::chrono::seconds kDefaultMaxDuration{24 * 3600};

  explicit GrantBook(std::chrono::seconds max_duration = kDefaultMaxDuration, Notify notify = {});

  // A new grant for `duration`. Throws std::invalid_argument, with a message
  // for the operator, on a duration of 0 or over the maximum, or a pattern
  // that is not a PathPattern. Control plane.
  Grant create(const GrantScope& scope, std::chrono::seconds duration, uint32_t uid, uint64_t ticket = 0,
               Clock::time_point now = Clock::now());
  // The live grant covering this request, if any. Never blocks; any thread
  // (the proxy's I/O loops).
  std::optional<Grant> covers(const std::string& session, const std::string& scheme,
                              const std::string& method, const std::string& host, const std::string& path,
                              Clock::time_point now = Clock::now());
  // Ends a live grant at once; nullopt if there is none by that id.
  std::optional<Grant> revoke(uint64_t id, Clock::time_point now = Clock::now());
  // The live grants, oldest first.
  std::vector<Grant> live(Clock::time_point now = Clock::now());
  // Removes (and reports) every expired grant; returns how many.
  size_t sweep(Clock::time_point now = Clock::now());
  // A deleted session's grants go with it.
  void forget_session(const std::string& session);
  std::chrono::seconds max_duration() const { return max_; }

 private:
  struct Entry {
    Grant grant;
    std::optional<PathPattern> pattern;
    Clock::time_point expires;
  };
  // Moves every expired entry's grant into `ended`. Under mu_.
  void take_expired(Clock::time_point now, std::vector<Grant>& ended);
  void report(const std::vector<Grant>& ended, GrantEvent event) const;

  const std::chrono::seconds max_;
  const Notify notify_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
};

// "30s", "10m", "2h" (a positive integer and one unit); nullopt otherwise.
std::optional<std::chrono::seconds> parse_grant_duration(const std::string& text);

}  // namespace zn::broker
