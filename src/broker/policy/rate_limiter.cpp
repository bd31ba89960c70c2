#include "broker/policy/rate_limiter.h"

#include <algorithm>

namespace zn::broker {

bool RateLimiter::take(const std::string& session, const std::optional<RateLimit>& rate,
                       Clock::time_point now) {
  if (!rate) return true;
  std::lock_guard lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(session);
  Bucket& b = it->second;
  if (fresh || b.rate.burst != rate->burst || b.rate.per_second != rate->per_second) {
    b.rate = *rate;
    b.tokens = rate->burst;
    b.refilled = now;
  }
  const double elapsed = std::chrono::duration<double>(now - b.refilled).count();
  if (elapsed > 0) {
    b.tokens = std::min<double>(b.rate.burst, b.tokens + elapsed * b.rate.per_second);
    b.refilled = now;
  }
  if (b.tokens < 1.0) return false;
  b.tokens -= 1.0;
  return true;
}

void RateLimiter::forget(const std::string& session) {
  std::lock_guard lock(mu_);
  buckets_.erase(session);
}

}  // namespace zn::broker
