// The per-session upstream resolution cache: remembered for the TTL (capped),
// per session, failures never remembered, concurrent misses sharing one
// resolution, bounded per session.
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
  std::vector<net::IpAddress> get(const std::string& session, const std::string& host) {
    return cache.get(session, host, resolve());
  }
};

TEST(UpstreamResolutionCache, RemembersWithinTheCappedTtlThenResolvesAgain) {
  Fixture f(UpstreamCacheConfig{30s, 256});
  EXPECT_EQ(f.get("s1", "api.example").size(), 1u);
  EXPECT_EQ(f.get("s1", "api.example").size(), 1u);
  EXPECT_EQ(f.calls, 1);  // the control: the second call was served from memory
  f.now += 29s;
  f.get("s1", "api.example");
  EXPECT_EQ(f.calls, 1);
  f.now += 1s;  // 30 s: the cap, though the TTL said 60
  f.get("s1", "api.example");
  EXPECT_EQ(f.calls, 2);
  EXPECT_EQ(f.cache.resolutions(), 2u);
}

TEST(UpstreamResolutionCache, ShortTtlIsHonoured) {
  Fixture f;
  f.answer.ttl = 2;
  f.get("s1", "a.example");
  f.now += 1s;
  f.get("s1", "a.example");
  EXPECT_EQ(f.calls, 1);
  f.now += 1s;
  f.get("s1", "a.example");
  EXPECT_EQ(f.calls, 2);
}

TEST(UpstreamResolutionCache, SessionsDoNotShareEntries) {
  Fixture f;
  f.get("s1", "api.example");
  f.get("s2", "api.example");  // a hit here would tell s2 by timing that s1 asked
  EXPECT_EQ(f.calls, 2);
  f.get("s1", "api.example");
  f.get("s2", "api.example");
  EXPECT_EQ(f.calls, 2);
}

TEST(UpstreamResolutionCache, FailuresEmptyAnswersAndZeroTtlAreNotRemembered) {
  Fixture f;
  f.answer = {{}, 60};  // empty
  EXPECT_TRUE(f.get("s1", "gone.example").empty());
  f.get("s1", "gone.example");
  EXPECT_EQ(f.calls, 2);
  f.answer = {{*net::IpAddress::parse("2001:db8::1")}, 0};  // TTL 0 (or a family failed)
  f.get("s1", "zero.example");
  f.get("s1", "zero.example");
  EXPECT_EQ(f.calls, 4);
  int throws = 0;
  auto failing = [&](const std::string&) -> TimedAddresses {
    throws++;
    throw std::runtime_error("resolver down");
  };
  EXPECT_TRUE(f.cache.get("s1", "x.example", failing).empty());
  EXPECT_TRUE(f.cache.get("s1", "x.example", failing).empty());
  EXPECT_EQ(throws, 2);
}

TEST(UpstreamResolutionCache, ForgetDropsTheSessionsEntries) {
  Fixture f;
  f.get("s1", "api.example");
  f.get("s2", "api.example");
  f.cache.forget("s1");
  f.get("s1", "api.example");
  f.get("s2", "api.example");
  EXPECT_EQ(f.calls, 3);  // s1 asked again, s2 still remembered
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
      if (f.cache.get("s1", "api.example", slow).size() == 1) got++;
    });
  while (entered == 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);  // let the others reach the shared entry
  release = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(got, 8);
  EXPECT_EQ(f.calls, 1);
  EXPECT_EQ(entered, 1);
}

TEST(UpstreamResolutionCache, AGuestCyclingNamesOnlyEmptiesItsOwnEntries) {
  Fixture f(UpstreamCacheConfig{30s, 4});
  f.get("s2", "steady.example");
  for (int i = 0; i < 20; i++) f.get("s1", "n" + std::to_string(i) + ".example");
  EXPECT_EQ(f.calls, 21);
  f.get("s2", "steady.example");
  EXPECT_EQ(f.calls, 21);  // s2's entry survived s1's churn
  // s1 holds at most 4 names: the oldest are gone.
  f.get("s1", "n0.example");
  EXPECT_EQ(f.calls, 22);
}

TEST(UpstreamResolutionCache, AResolutionFinishingAfterForgetLeavesTheNewSessionsEntryAlone) {
  Fixture f;
  std::atomic<bool> release_old{false}, old_in{false}, release_new{false}, new_in{false};
  std::atomic<int> new_calls{0};
  std::thread old_session([&] {
    f.cache.get("s1", "api.example", [&](const std::string&) {
      old_in = true;
      while (!release_old) std::this_thread::sleep_for(1ms);
      return TimedAddresses{};  // the old session's resolution failed
    });
  });
  while (!old_in) std::this_thread::sleep_for(1ms);
  f.cache.forget("s1");  // deleted and re-created under the same id
  auto new_resolve = [&](const std::string&) {
    new_calls++;
    new_in = true;
    while (!release_new) std::this_thread::sleep_for(1ms);
    return f.answer;
  };
  std::thread new_session([&] { EXPECT_EQ(f.cache.get("s1", "api.example", new_resolve).size(), 1u); });
  while (!new_in) std::this_thread::sleep_for(1ms);
  release_old = true;  // finishes while the new session's resolution is in flight
  old_session.join();
  // A third caller joins the new session's resolution: the old one's failure
  // did not remove the entry it does not own.
  std::thread joiner([&] { EXPECT_EQ(f.cache.get("s1", "api.example", new_resolve).size(), 1u); });
  std::this_thread::sleep_for(20ms);
  release_new = true;
  new_session.join();
  joiner.join();
  EXPECT_EQ(new_calls, 1);
}

}  // namespace
}  // namespace zn::broker
