// One session's token bucket for its policy's `rate` (burst, per_second):
// each intercepted request and each spliced connection takes a token; an
// empty bucket means 429 (or a reset for passthrough). Owned by the session
// (session/session_state.h), so it goes with it.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>

#include "broker/policy/policy.h"

namespace zn::broker {

class RateBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // True if the session may proceed. A session without a rate always may.
  // A changed rate (policy update) restarts the bucket full at the new burst.
  // Thread-safe.
  bool take(const std::optional<RateLimit>& rate, Clock::time_point now = Clock::now());

 private:
  std::mutex mu_;
  bool started_ = false;
  RateLimit rate_;
  double tokens_ = 0;
  Clock::time_point refilled_;
};

}  // namespace zn::broker
