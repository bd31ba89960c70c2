// A token bucket per key (a session): `per_second` tokens refill up to
// `burst`, a take spends one. The state kept is bounded: at `max_tracked`
// keys, buckets that have refilled (the same as none) are forgotten first.
// Used for the leaf minting budget and the governed DNS's query rate, each
// per session. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zn {

struct TokenBucketConfig {
  double per_second = 20;
  double burst = 64;
  size_t max_tracked = 16384;
};

class TokenBuckets {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TokenBuckets(TokenBucketConfig config) : config_(config) {}

  // Takes one token of `key`'s bucket; false when it is empty.
  bool take(const std::string& key, Clock::time_point now = Clock::now());
  // Keys with a bucket now.
  size_t tracked() const;

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  void prune_locked(Clock::time_point now);

  TokenBucketConfig config_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace zn
