// One session's upstream resolution cache: remembered for the TTL (capped),
// failures never remembered, concurrent misses sharing one resolution,
// bounded where it is declared. (That sessions never share one, and that a
// resolution finishing after its session's delete never reaches a session
// re-created under its id, is ownership: proxy_policy_test.)
#include "broker/session/upstream_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

struct Fixture {
  std::chrono::steady_clock::time_point now{};
  std::atomic<int> calls{0};
  TimedAddresses answer{{*net::IpAddress::parse("198.18.0.12")}, 60};
  UpstreamResolutionCache cache;
  explicit Fixture(UpstreamCacheConfig config = {}) : cache(config, [this] { return now; }) {}
  UpstreamResolutionCache::Resolve resolve() {
    return [this](const std::string&) {
      calls++;
      return answer;
    };
  }
  std::vector<net::IpAddress> get(const std::string& host) { return cache.get(host, resolve()); }
};

TEST(UpstreamResolutionCache, RemembersWithinTheCappedTtlThenResolvesAgain) {
  Fixture f(UpstreamCacheConfig{30s, 256});
  EXPECT_EQ(f.get("api.example").size(), 1u);
  EXPECT_EQ(f.get("api.example").size(), 1u);
  EXPECT_EQ(f.calls, 1);  // the control: the second call was served from memory
  f.now += 29s;
  f.get("api.example");
  EXPECT_EQ(f.calls, 1);
  f.now += 1s;  // 30 s: the cap, though the TTL said 60
  f.get("api.example");
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.cache.resolutions(), 2u);
}

TEST(UpstreamResolutionCache, ShortTtlIsHonoured) {
  Fixture f;
  f.answer.ttl = 2;
  f.get("a.example");
  f.now += 1s;
  f.get("a.example");
  EXPECT_EQ(f.calls, 1);
  f.now += 1s;
  f.get("a.example");
  EXPECT_EQ(f.calls, 2);
}

TEST(UpstreamResolutionCache, FailuresEmptyAnswersAndZeroTtlAreNotRemembered) {
  Fixture f;
  f.answer = {{}, 60};  // empty
  EXPECT_TRUE(f.get("gone.example").empty());
  f.get("gone.example");
  EXPECT_EQ(f.calls, 2);
  f.answer = {{*net::IpAddress::parse("2001:db8::1")}, 0};  // TTL 0 (or a family failed)
  f.get("zero.example");
  f.get("zero.example");
  EXPECT_EQ(f.calls, 4);
  int throws = 0;
  auto failing = [&](const std::string&) -> TimedAddresses {
    throws++;
    throw std::runtime_error("resolver down");
  };
  EXPECT_TRUE(f.cache.get("x.example", failing).empty());
  EXPECT_TRUE(f.cache.get("x.example", failing).empty());
  EXPECT_EQ(throws, 2);
}

TEST(UpstreamResolutionCache, ConcurrentMissesShareOneResolution) {
  Fixture f;
  std::atomic<bool> release{false};
  std::atomic<int> entered{0};
  auto slow = [&](const std::string&) {
    entered++;
    while (!release) std::this_thread::sleep_for(1ms);
    f.calls++;
    return f.answer;
  };
  std::vector<std::thread> threads;
  std::atomic<int> got{0};
  for (int i = 0; i < 8; i++)
    threads.emplace_back([&] {
      if (f.cache.get("api.example", slow).size() == 1) got++;
    });
  while (entered == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);  // let the others reach the shared entry
  release = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, 8);
  EXPECT_EQ(f.calls, 1);
  EXPECT_EQ(entered, 1);
}

TEST(UpstreamResolutionCache, AGuestCyclingNamesStaysAtTheBound) {
  Fixture f(UpstreamCacheConfig{30s, 4});
  for (int i = 0; i < 20; i++) {
    f.get("n" + std::to_string(i) + ".example");
    ASSERT_LE(f.cache.size(), 4u);
  }
  EXPECT_EQ(f.calls, 20);
  // The last name is still remembered (the control), the oldest is gone.
  f.get("n19.example");
  EXPECT_EQ(f.calls, 20);
  f.get("n0.example");
  EXPECT_EQ(f.calls, 21);
}

}  // namespace
}  // namespace zn::broker
