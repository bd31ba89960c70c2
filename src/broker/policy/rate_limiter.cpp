#include "broker/policy/rate_limiter.h"

#include <algorithm>

namespace zn::broker {

bool RateBucket::take(const std::optional<RateLimit>& rate, Clock::time_point now) {
  if (!rate) return true;
  std::lock_guard lock(mu_);
  if (!started_ || rate_.burst != rate->burst || rate_.per_second != rate->per_second) {
    started_ = true;
    rate_ = *rate;
    tokens_ = rate->burst;
    refilled_ = now;
  }
  const double elapsed = std::chrono::duration<double>(now - refilled_).count();
  if (elapsed > 0) {
    tokens_ = std::min<double>(rate_.burst, tokens_ + elapsed * rate_.per_second);
    refilled_ = now;
  }
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

}  // namespace zn::broker
