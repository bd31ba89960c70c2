#include "broker/policy/rate_limiter.h"

#include <gtest/gtest.h>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

TEST(RateLimiter, WithoutARateEverythingPasses) {
  RateLimiter r;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(r.take("s", std::nullopt));
}

TEST(RateLimiter, BurstThenRefillAtTheRate) {
  RateLimiter r;
  const RateLimit rate{3, 2};
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(r.take("s", rate, t0));
  EXPECT_TRUE(r.take("s", rate, t0));
  EXPECT_TRUE(r.take("s", rate, t0));
  EXPECT_FALSE(r.take("s", rate, t0));
  EXPECT_FALSE(r.take("s", rate, t0 + 400ms));  // 0.8 of a token
  EXPECT_TRUE(r.take("s", rate, t0 + 500ms));   // 1.0
  EXPECT_FALSE(r.take("s", rate, t0 + 500ms));
  // A long pause refills to the burst, never beyond.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.take("s", rate, t0 + 60s));
  EXPECT_FALSE(r.take("s", rate, t0 + 60s));
}

TEST(RateLimiter, SessionsHaveTheirOwnBuckets) {
  RateLimiter r;
  const RateLimit rate{1, 1};
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(r.take("a", rate, t0));
  EXPECT_FALSE(r.take("a", rate, t0));
  EXPECT_TRUE(r.take("b", rate, t0));
}

TEST(RateLimiter, AChangedRateStartsAFreshBucket) {
  RateLimiter r;
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(r.take("a", RateLimit{1, 1}, t0));
  EXPECT_FALSE(r.take("a", RateLimit{1, 1}, t0));
  EXPECT_TRUE(r.take("a", RateLimit{2, 1}, t0));
  r.forget("a");
  EXPECT_TRUE(r.take("a", RateLimit{1, 1}, t0));
}

TEST(RateLimiter, TimeGoingBackwardsNeverAddsTokens) {
  RateLimiter r;
  const RateLimit rate{1, 1};
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_TRUE(r.take("a", rate, t0));
  EXPECT_FALSE(r.take("a", rate, t0 - 10s));
}

}  // namespace
}  // namespace zn::broker
