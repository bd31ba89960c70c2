// What a session gathers while it lives, owned by the session itself
// (issue 32): what governed DNS told it, the broker's resolutions for its
// upstreams and its rate bucket. Every snapshot of one session (an update
// publishes a new one) shares the one state; a delete withdraws the session
// and its state goes with the last snapshot still held by work in flight.
// So nothing has to be forgotten by id, and an answer or a resolution that
// finishes after its session was deleted lands in the dead session's state,
// never in a session created later under the same id.
//
// Every part is bounded where it is declared (SessionLimits) and
// thread-safe on its own.
#pragma once

#include <cstddef>

#include "broker/policy/rate_limiter.h"
#include "broker/session/answer_book.h"
#include "broker/session/upstream_cache.h"

namespace zn::broker {

// The bounds of one session's state (zerod's config).
struct SessionLimits {
  size_t dns_answers = DnsAnswerBook::kDefaultMaxNames;  // dns_answers_per_session
  UpstreamCacheConfig upstream;
};

class SessionState {
 public:
  explicit SessionState(const SessionLimits& limits = {})
      : answers(limits.dns_answers), upstream(limits.upstream) {}
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;

  DnsAnswerBook answers;             // for the proxy's pinning
  UpstreamResolutionCache upstream;  // the broker's own resolutions
  RateBucket rate;                   // the policy's `rate`
};

}  // namespace zn::broker
