// How many leaf certificates each session may have minted: a token bucket
// per session. Minting costs an ECDSA signature (50-200 us) on a shared
// worker, and a guest that cycles random SNIs (allowed or not: denied names
// are terminated too, to show the guest a 403) would otherwise make every
// other guest's new connections wait. Cached leaves cost nothing and take no
// token. Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace zn::proxy {

struct MintBudgetConfig {
  double per_second = 20;      // sustained mints per session
  double burst = 64;           // a fresh session's first names
  size_t max_tracked = 16384;  // sessions remembered; idle full buckets are dropped first
};

class MintBudget {
 public:
  using Clock = std::chrono::steady_clock;
  explicit MintBudget(MintBudgetConfig config = {}) : config_(config) {}

  // Takes one mint for the session; false when its bucket is empty.
  bool take(const std::string& session, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
  };
  void prune_locked(Clock::time_point now);

  MintBudgetConfig config_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace zn::proxy
