// Per-session token buckets for the policy's `rate` (burst, per_second):
// each intercepted request and each spliced connection takes a token; an
// empty bucket means 429 (or a reset for passthrough).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "broker/policy/policy.h"

namespace zn::broker {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // True if the session may proceed. A session without a rate always may.
  // A changed rate (policy update) restarts the bucket full at the new burst.
  bool take(const std::string& session, const std::optional<RateLimit>& rate,
            Clock::time_point now = Clock::now());
  void forget(const std::string& session);

 private:
  struct Bucket {
    RateLimit rate;
    double tokens = 0;
    Clock::time_point refilled;
  };
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace zn::broker
