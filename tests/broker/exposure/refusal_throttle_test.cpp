#include "broker/exposure/refusal_throttle.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace zn::broker {
namespace {

using namespace std::chrono_literals;

class RefusalThrottleTest : public ::testing::Test {
 protected:
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1000h;
  RefusalThrottle throttle{RefusalThrottle::Limits{3, 1, 4}, [this] { return now; }};
};

TEST_F(RefusalThrottleTest, AClientsRefusalsAreBoundedAndCountedPastTheBurst) {
  const std::string guesser = "192.0.2.1";
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(throttle.throttled("s", 8080, guesser)) << i;
    throttle.charge(guesser);
  }
  // Past the burst: throttled, each attempt counted for one summary, told
  // when its next refusal is due (one a second here).
  for (int i = 0; i < 50; ++i) EXPECT_EQ(throttle.throttled("s", 8080, guesser), 1s);
  // The positive control: another client is not throttled by the first.
  EXPECT_FALSE(throttle.throttled("s", 8080, "192.0.2.2"));
  const auto summaries = throttle.take_summaries();
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0].client, guesser);
  EXPECT_EQ(summaries[0].port, 8080);
  EXPECT_EQ(summaries[0].count, 50u);
  EXPECT_TRUE(throttle.take_summaries().empty());  // handed out once
  // One more a second.
  now += 1s;
  EXPECT_FALSE(throttle.throttled("s", 8080, guesser));
  throttle.charge(guesser);
  EXPECT_TRUE(throttle.throttled("s", 8080, guesser));
  now += 10s;  // refilled up to the burst, no more
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(throttle.throttled("s", 8080, guesser)) << i;
    throttle.charge(guesser);
  }
  EXPECT_TRUE(throttle.throttled("s", 8080, guesser));
}

TEST_F(RefusalThrottleTest, AThrottledClientIsToldWhenToComeBack) {
  RefusalThrottle slow{RefusalThrottle::Limits{2, 1.0 / 60, 4}, [this] { return now; }};
  const std::string c = "192.0.2.9";
  slow.charge(c);
  EXPECT_FALSE(slow.throttled("s", 80, c));  // one refusal left: not throttled
  slow.charge(c);
  EXPECT_EQ(slow.throttled("s", 80, c), 60s);
  now += 30s;
  EXPECT_EQ(slow.throttled("s", 80, c), 30s);
  now += 29s + 500ms;
  EXPECT_EQ(slow.throttled("s", 80, c), 1s);  // rounded up, never 0
  now += 500ms;
  EXPECT_FALSE(slow.throttled("s", 80, c));
  // A rate of zero never refills: the longest wait worth saying.
  RefusalThrottle never{RefusalThrottle::Limits{1, 0, 4}, [this] { return now; }};
  never.charge(c);
  EXPECT_EQ(never.throttled("s", 80, c), 24h);
}

TEST_F(RefusalThrottleTest, TheTablesAreBounded) {
  // More clients than the table holds: the one refused longest ago goes.
  for (int i = 0; i < 10; ++i) {
    const std::string c = "192.0.2." + std::to_string(i);
    for (int j = 0; j < 3; ++j) throttle.charge(c);
    now += 1ms;
  }
  EXPECT_EQ(throttle.clients(), 4u);
  EXPECT_EQ(throttle.evictions(), 6u);
  // The ones refused most recently stayed (still throttled); the rest went.
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(throttle.throttled("s", 1, "192.0.2." + std::to_string(i)).has_value(), i >= 6) << i;
  // A refusal makes a client the most recent: the next eviction spares it.
  throttle.charge("192.0.2.6");
  throttle.charge("198.51.100.99");
  EXPECT_TRUE(throttle.throttled("s", 1, "192.0.2.6"));
  EXPECT_FALSE(throttle.throttled("s", 1, "192.0.2.7"));  // refused longest ago: evicted
  // The summaries too: past the bound, one "*" per (session, port).
  RefusalThrottle small{RefusalThrottle::Limits{1, 0.001, 2}, [this] { return now; }};
  for (int i = 0; i < 5; ++i) {
    const std::string c = "198.51.100." + std::to_string(i);
    small.charge(c);
    EXPECT_TRUE(small.throttled("s", 80, c));
  }
  const auto summaries = small.take_summaries();
  ASSERT_EQ(summaries.size(), 3u);
  uint64_t total = 0;
  for (const auto& s : summaries) total += s.count;
  EXPECT_EQ(total, 5u);  // every attempt counted, in a bounded table
  EXPECT_EQ(std::count_if(summaries.begin(), summaries.end(), [](const auto& s) { return s.client == "*"; }),
            1);
}

sockaddr_storage address(const char* text) {
  sockaddr_storage ss{};
  if (std::string_view(text).find(':') == std::string_view::npos) {
    auto& sin = reinterpret_cast<sockaddr_in&>(ss);
    sin.sin_family = AF_INET;
    inet_pton(AF_INET, text, &sin.sin_addr);
  } else {
    auto& sin6 = reinterpret_cast<sockaddr_in6&>(ss);
    sin6.sin6_family = AF_INET6;
    inet_pton(AF_INET6, text, &sin6.sin6_addr);
  }
  return ss;
}

// One host's IPv6 addresses are one client: rotating through a /64 buys
// no new budget; an IPv4-mapped address is its IPv4 one.
TEST(ClientKey, IPv6ByItsSlash64AndMappedIPv4AsIPv4) {
  EXPECT_EQ(client_key(address("192.0.2.7")), "192.0.2.7");
  EXPECT_EQ(client_key(address("::ffff:192.0.2.7")), "192.0.2.7");
  EXPECT_EQ(client_key(address("2001:db8:1:2::1")), "2001:db8:1:2::/64");
  EXPECT_EQ(client_key(address("2001:db8:1:2:ffff:1:2:3")), "2001:db8:1:2::/64");
  EXPECT_NE(client_key(address("2001:db8:1:3::1")), client_key(address("2001:db8:1:2::1")));
}

}  // namespace
}  // namespace zn::broker
