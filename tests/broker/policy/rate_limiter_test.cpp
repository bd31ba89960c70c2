#include "broker/policy/rate_limiter.h"

#include <gtest/gtest.h>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

TEST(RateBucket, WithoutARateEverythingPasses) {
  RateBucket r;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(r.take(std::nullopt));
}

TEST(RateBucket, BurstThenRefillAtTheRate) {
  RateBucket r;
  const RateLimit rate{3, 2};
  const auto t0 = RateBucket::Clock::now();
  EXPECT_TRUE(r.take(rate, t0));
  EXPECT_TRUE(r.take(rate, t0));
  EXPECT_TRUE(r.take(rate, t0));
  EXPECT_FALSE(r.take(rate, t0));
  EXPECT_FALSE(r.take(rate, t0 + 400ms));  // 0.8 of a token
  EXPECT_TRUE(r.take(rate, t0 + 500ms));   // 1.0
  EXPECT_FALSE(r.take(rate, t0 + 500ms));
  // A long pause refills to the burst, never beyond.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.take(rate, t0 + 60s));
  EXPECT_FALSE(r.take(rate, t0 + 60s));
}

TEST(RateBucket, AChangedRateStartsAFreshBucket) {
  RateBucket r;
  const auto t0 = RateBucket::Clock::now();
  EXPECT_TRUE(r.take(RateLimit{1, 1}, t0));
  EXPECT_FALSE(r.take(RateLimit{1, 1}, t0));
  EXPECT_TRUE(r.take(RateLimit{2, 1}, t0));
  EXPECT_TRUE(r.take(RateLimit{2, 1}, t0));
  EXPECT_FALSE(r.take(RateLimit{2, 1}, t0));
  // Back to the first rate: a change again, full again.
  EXPECT_TRUE(r.take(RateLimit{1, 1}, t0));
}

TEST(RateBucket, TimeGoingBackwardsNeverAddsTokens) {
  RateBucket r;
  const RateLimit rate{1, 1};
  const auto t0 = RateBucket::Clock::now();
  EXPECT_TRUE(r.take(rate, t0));
  EXPECT_FALSE(r.take(rate, t0 - 10s));
}

}  // namespace
}  // namespace zn::broker
