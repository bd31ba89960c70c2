#include "common/token_buckets.h"

#include <algorithm>

namespace zn {

bool TokenBuckets::take(const std::string& key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= config_.max_tracked) prune_locked(now);
    it = buckets_.emplace(key, Bucket{config_.burst, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed = std::chrono::duration<double>(now - b.last).count();
  if (elapsed > 0) {
    b.tokens = std::min(config_.burst, b.tokens + elapsed * config_.per_second);
    b.last = now;
  }
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

size_t TokenBuckets::tracked() const {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

// A bucket that has refilled is the same as no bucket: forget those. If
// every key is mid-burst, the map may exceed max_tracked (bounded by the
// number of keys, which zerod bounds: sessions).
void TokenBuckets::prune_locked(Clock::time_point now) {
  const auto refill = std::chrono::duration<double>(config_.burst / config_.per_second);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (now - it->second.last >= refill)
      it = buckets_.erase(it);
    else
      ++it;
  }
}

}  // namespace zn
