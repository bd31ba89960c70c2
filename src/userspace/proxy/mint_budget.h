// How many leaf certificates each session may have minted: a token bucket
// per session. Minting costs an ECDSA signature (50-200 us) on a shared
// worker, and a guest that cycles random SNIs (allowed or not: denied names
// are terminated too, to show the guest a 403) would otherwise make every
// other guest's new connections wait. Cached leaves cost nothing and take no
// token. Thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "common/token_buckets.h"

namespace zn::proxy {

struct MintBudgetConfig {
  double per_second = 20;      // sustained mints per session
  double burst = 64;           // a fresh session's first names
  size_t max_tracked = 16384;  // sessions remembered; idle full buckets are dropped first
};

class MintBudget {
 public:
  using Clock = TokenBuckets::Clock;
  explicit MintBudget(MintBudgetConfig config = {})
      : buckets_({config.per_second, config.burst, config.max_tracked}) {}

  // Takes one mint for the session; false when its bucket is empty.
  bool take(const std::string& session, Clock::time_point now = Clock::now()) {
    return buckets_.take(session, now);
  }

 private:
  TokenBuckets buckets_;
};

}  // namespace zn::proxy
