// Every verdict of the TAP programs, through BPF_PROG_TEST_RUN: the TC action,
// the named reason's counter for the session, and (for drops) the ring-buffer
// event carrying session, reason and 5-tuple.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/pkt_cls.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "support/verdict_fixtures.h"
#include "userspace/datapath/drop_events.h"
#include "userspace/datapath/verdict_names.h"

namespace zn::test {
namespace {

class VerdictFixtureTest : public ::testing::TestWithParam<VerdictFixture> {
 protected:
  static void SetUpTestSuite() { datapath_ = new FixtureDatapath(); }
  static void TearDownTestSuite() {
    delete datapath_;
    datapath_ = nullptr;
  }
  static FixtureDatapath* datapath_;
};
FixtureDatapath* VerdictFixtureTest::datapath_ = nullptr;

TEST_P(VerdictFixtureTest, VerdictReasonCounterAndEvent) {
  const VerdictFixture& f = GetParam();
  auto& maps = datapath_->maps();
  std::vector<zn_drop_event> events;
  dp::DropEventReader reader(datapath_->datapath().events_fd(),
                             [&](const zn_drop_event& e) { events.push_back(e); });
  reader.drain();
  events.clear();

  const auto before = maps.counters(FixtureGuest::kSessionIdx);
  const int action = datapath_->run(f);
  const auto after = maps.counters(FixtureGuest::kSessionIdx);
  reader.drain();

  const bool drop = dp::is_drop(f.expected_verdict);
  EXPECT_EQ(action, drop ? TC_ACT_SHOT : TC_ACT_OK) << f.why;
  for (unsigned v = 0; v < ZN_VERDICT_COUNT; ++v) {
    EXPECT_EQ(after[v] - before[v], v == f.expected_verdict ? 1u : 0u)
        << f.why << ": counter " << dp::verdict_name(v) << ", expected "
        << dp::verdict_name(f.expected_verdict);
  }
  if (drop) {
    ASSERT_EQ(events.size(), 1u) << f.why;
    const zn_drop_event& e = events[0];
    EXPECT_EQ(e.session_idx, FixtureGuest::kSessionIdx);
    EXPECT_EQ(e.reason, f.expected_verdict) << dp::verdict_name(e.reason);
    EXPECT_EQ(e.direction, f.direction == Direction::kIngress ? 0 : 1);
    EXPECT_EQ(e.ifindex, 1u);
    if (f.name == "egress_unmarked") {
      EXPECT_EQ(ntohs(e.sport), 443);  // egress events carry ports too
      EXPECT_EQ(ntohs(e.dport), 40000);
    }
  } else {
    EXPECT_TRUE(events.empty()) << f.why;
  }
}

std::string fixture_name(const ::testing::TestParamInfo<VerdictFixture>& info) { return info.param.name; }

// Frames with an incomplete IP header are refused by the kernel's test-run
// (EINVAL); the TAP namespace test sends those through a real TAP.
std::vector<VerdictFixture> test_run_fixtures() {
  std::vector<VerdictFixture> out;
  for (auto& f : verdict_fixtures())
    if (!f.real_tap_only) out.push_back(f);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllVerdicts, VerdictFixtureTest, ::testing::ValuesIn(test_run_fixtures()),
                         fixture_name);

TEST(VerdictFixtureCoverage, EveryReachableVerdictHasAFixture) {
  std::vector<bool> seen(ZN_VERDICT_COUNT, false);
  for (const auto& f : verdict_fixtures()) seen[f.expected_verdict] = true;
  // Reached only with real traffic (namespace tests) or unreachable on a TAP:
  // the kernel refuses frames shorter than an Ethernet header on both paths.
  // drop:dns_rate needs a session's bucket emptied first (TapDatapathTest).
  const std::vector<unsigned> elsewhere = {ZN_PASS_DNS,        ZN_PASS_STEER,         ZN_PASS_L4,
                                           ZN_DROP_NO_SESSION, ZN_DROP_TRUNCATED_ETH, ZN_DROP_NO_LISTENER,
                                           ZN_DROP_DNS_RATE};
  for (unsigned v : elsewhere) seen[v] = true;
  for (unsigned v = 0; v < ZN_VERDICT_COUNT; ++v)
    EXPECT_TRUE(seen[v]) << "no fixture for " << dp::verdict_name(v);
}

TEST(VerdictPaths, NoSessionOnInterfaceDrops) {
  FixtureDatapath d;
  d.maps().delete_session(1);
  const auto before = d.maps().counters(0);
  auto fixtures = verdict_fixtures();
  EXPECT_EQ(d.run(fixtures.front()), TC_ACT_SHOT);
  EXPECT_EQ(d.maps().counters(0)[ZN_DROP_NO_SESSION] - before[ZN_DROP_NO_SESSION], 1u);
}

TEST(VerdictPaths, SteeringWithoutListenerDropsAsNoListener) {
  FixtureDatapath d;
  dp::Listeners nowhere;
  nowhere.proxy_port = 1;  // nothing listens on port 1 of loopback
  nowhere.dns_port = 1;
  d.maps().set_listeners(nowhere);
  for (const auto& f : verdict_fixtures()) {
    if (f.expected_verdict != ZN_DROP_ASSIGN_FAILED) continue;
    const auto before = d.maps().counters(FixtureGuest::kSessionIdx);
    EXPECT_EQ(d.run(f), TC_ACT_SHOT) << f.name;
    const auto after = d.maps().counters(FixtureGuest::kSessionIdx);
    EXPECT_EQ(after[ZN_DROP_NO_LISTENER] - before[ZN_DROP_NO_LISTENER], 1u) << f.name;
  }
}

TEST(DropEvents, TokenBucketLimitsEventsButCountsEveryDrop) {
  FixtureDatapath d;
  dp::SessionEntry s = FixtureGuest().session();
  s.event_rate = 1;
  s.event_burst = 5;
  d.maps().put_session(1, s);
  std::vector<zn_drop_event> events;
  dp::DropEventReader reader(d.datapath().events_fd(), [&](const zn_drop_event& e) { events.push_back(e); });
  VerdictFixture tcp22;
  for (const auto& f : verdict_fixtures())
    if (f.name == "tcp22") tcp22 = f;
  const auto before = d.maps().counters(FixtureGuest::kSessionIdx);
  EXPECT_EQ(d.run(tcp22, 1000), TC_ACT_SHOT);
  reader.drain();
  const auto after = d.maps().counters(FixtureGuest::kSessionIdx);
  EXPECT_EQ(after[ZN_DROP_TCP_PORT] - before[ZN_DROP_TCP_PORT], 1000u);
  // Burst of 5, plus at most one refill if the run took over a second.
  EXPECT_GE(events.size(), 5u);
  EXPECT_LE(events.size(), 7u);
  EXPECT_EQ(after[ZN_STAT_EVENTS_SUPPRESSED] - before[ZN_STAT_EVENTS_SUPPRESSED], 1000u - events.size());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(ntohs(events[0].dport), 22);
  EXPECT_EQ(ntohs(events[0].sport), 40000);
  EXPECT_EQ(events[0].family, 4);
  EXPECT_EQ(events[0].proto, IPPROTO_TCP);
  in_addr dst{};
  std::memcpy(&dst, events[0].daddr, 4);
  EXPECT_STREQ(inet_ntoa(dst), "198.18.0.10");
}

TEST(DatapathMaps, DeleteSessionRemovesItsL4RulesAndCounters) {
  FixtureDatapath d;
  VerdictFixture tcp22;
  for (const auto& f : verdict_fixtures())
    if (f.name == "tcp22") tcp22 = f;
  d.run(tcp22);
  EXPECT_GT(d.maps().counters(FixtureGuest::kSessionIdx)[ZN_DROP_TCP_PORT], 0u);
  d.maps().delete_session(1);
  EXPECT_FALSE(d.maps().get_session(1).has_value());
  EXPECT_EQ(d.maps().delete_l4_rules(FixtureGuest::kSessionIdx), 0u);
  EXPECT_EQ(d.maps().counters(FixtureGuest::kSessionIdx)[ZN_DROP_TCP_PORT], 0u);
}

const VerdictFixture& fixture(const std::string& name) {
  static const std::vector<VerdictFixture> all = verdict_fixtures();
  for (const auto& f : all)
    if (f.name == name) return f;
  throw std::out_of_range(name);
}

TEST(DatapathMaps, L4RuleCountFollowsTheTrie) {
  FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = FixtureGuest::kSessionIdx;
  EXPECT_EQ(maps.l4_rule_count(idx), 2u);
  dp::L4Rule db;
  db.family = 4;
  db.addr = {198, 18, 0, 20};
  db.prefix_len = 32;
  db.port = 5432;
  maps.put_l4_rule(idx, db);  // the same rule again: no new entry
  EXPECT_EQ(maps.l4_rule_count(idx), 2u);
  EXPECT_EQ(d.verdict_of(fixture("tcp5432_l4_allowed")), unsigned{ZN_DROP_ASSIGN_FAILED});
  maps.delete_l4_rule(idx, db);
  maps.delete_l4_rule(idx, db);  // already gone: no double decrement
  EXPECT_EQ(maps.l4_rule_count(idx), 1u);
  EXPECT_EQ(d.verdict_of(fixture("tcp5432_l4_allowed")), unsigned{ZN_DROP_TCP_PORT});
  EXPECT_EQ(d.verdict_of(fixture("tcp_any_port_prefix")), unsigned{ZN_DROP_ASSIGN_FAILED});
  EXPECT_EQ(maps.delete_l4_rules(idx), 1u);
  EXPECT_EQ(maps.l4_rule_count(idx), 0u);
  EXPECT_EQ(d.verdict_of(fixture("tcp_any_port_prefix")), unsigned{ZN_DROP_TCP_PORT});
}

// TCP from the fixture guest to dst:port.
VerdictFixture tcp_to(const char* dst, uint16_t port) {
  const FixtureGuest g;
  VerdictFixture f;
  f.name = std::string(dst) + ":" + std::to_string(port);
  f.direction = Direction::kIngress;
  if (std::strchr(dst, ':'))
    f.frame =
        eth(g.guest_mac, g.host_mac, 0x86dd, ipv6(g.guest_ip6, ip6(dst), IPPROTO_TCP, tcp(40000, port)));
  else
    f.frame =
        eth(g.guest_mac, g.host_mac, 0x0800, ipv4(g.guest_ip4, ip4(dst), IPPROTO_TCP, tcp(40000, port)));
  return f;
}

// Allowed = steered to the proxy, which BPF_PROG_TEST_RUN cannot finish
// (drop:assign_failed); denied = drop:tcp_port.
constexpr unsigned kAllowed = ZN_DROP_ASSIGN_FAILED;
constexpr unsigned kDenied = ZN_DROP_TCP_PORT;

// One trie lookup decides: the longest prefix's entry must carry the ports of
// every prefix covering it, or a /32 would hide a /16's any-port rule.
TEST(DatapathL4, OverlappingPrefixesAllowTheUnionOfTheirPorts) {
  FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = FixtureGuest::kSessionIdx;
  const std::vector<dp::L4Rule> rules = {
      // An any-port /16 over a /24 on 5432 and a /32 on 22.
      l4_rule("10.20.0.0", 16, 0, 1), l4_rule("10.20.30.0", 24, 5432, 2), l4_rule("10.20.30.40", 32, 22, 3),
      // Ports only: each level adds one.
      l4_rule("10.30.0.0", 16, 5432, 4), l4_rule("10.30.1.0", 24, 22, 5), l4_rule("10.30.1.7", 32, 8080, 6),
      // IPv6: a port /48, an any-port /64 in it, a port /128 in that.
      l4_rule("2001:db8:30::", 48, 5432, 7), l4_rule("2001:db8:30:1::", 64, 0, 8),
      l4_rule("2001:db8:30:1::7", 128, 22, 9), l4_rule("2001:db8:40::9", 128, 22, 10),
      l4_rule("2001:db8:40::9", 128, 5432, 11)};
  maps.replace_l4_rules(idx, maps.l4_rules(idx), rules);
  EXPECT_EQ(maps.l4_rule_count(idx), 10u);  // distinct prefixes

  const std::vector<std::tuple<const char*, uint16_t, unsigned>> cases = {
      {"10.20.30.40", 22, kAllowed},        {"10.20.30.40", 9999, kAllowed},  // the /16's any port
      {"10.20.30.41", 5432, kAllowed},      {"10.20.30.41", 1, kAllowed},
      {"10.20.99.1", 9999, kAllowed},       {"10.21.30.40", 22, kDenied},  // outside every prefix
      {"10.30.1.7", 8080, kAllowed},        {"10.30.1.7", 22, kAllowed},
      {"10.30.1.7", 5432, kAllowed},        {"10.30.1.7", 9999, kDenied},
      {"10.30.1.8", 22, kAllowed},          {"10.30.1.8", 5432, kAllowed},
      {"10.30.1.8", 8080, kDenied},         {"10.30.2.1", 5432, kAllowed},
      {"10.30.2.1", 22, kDenied},           {"10.31.0.1", 5432, kDenied},
      {"2001:db8:30:1::7", 22, kAllowed},   {"2001:db8:30:1::7", 9999, kAllowed},  // the /64's any port
      {"2001:db8:30:1::8", 9999, kAllowed}, {"2001:db8:30:2::1", 5432, kAllowed},
      {"2001:db8:30:2::1", 22, kDenied},    {"2001:db8:40::9", 22, kAllowed},
      {"2001:db8:40::9", 5432, kAllowed},   {"2001:db8:40::9", 5433, kDenied},
      {"2001:db8:40::8", 22, kDenied},      {"2001:db8:31::1", 5432, kDenied},
  };
  for (const auto& [dst, port, expected] : cases)
    EXPECT_EQ(d.verdict_of(tcp_to(dst, port)), expected) << dst << " port " << port;

  // Taking the /16 any-port rule away takes its ports out of the longer
  // prefixes too; the /32's own port stays.
  maps.delete_l4_rule(idx, l4_rule("10.20.0.0", 16, 0));
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 9999)), kDenied);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.99.1", 9999)), kDenied);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 22)), kAllowed);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 5432)), kAllowed);  // the /24's
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.41", 22)), kDenied);
  // Removing one of two ports of a prefix keeps the entry and the other port.
  maps.delete_l4_rule(idx, l4_rule("2001:db8:40::9", 128, 22));
  EXPECT_EQ(d.verdict_of(tcp_to("2001:db8:40::9", 22)), kDenied);
  EXPECT_EQ(d.verdict_of(tcp_to("2001:db8:40::9", 5432)), kAllowed);
  EXPECT_EQ(maps.l4_rule_count(idx), 9u);
  maps.replace_l4_rules(idx, maps.l4_rules(idx), {});
  EXPECT_EQ(maps.l4_rule_count(idx), 0u);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 22)), kDenied);
  EXPECT_EQ(d.verdict_of(tcp_to("2001:db8:30:1::7", 22)), kDenied);
}

// The trie holds what the rules were: a session's rules read back equal the
// ones written (what put_l4_rule and delete_l4_rule build on).
TEST(DatapathL4, RulesReadBackFromTheTrie) {
  FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = FixtureGuest::kSessionIdx;
  const std::vector<dp::L4Rule> rules = {l4_rule("10.20.0.0", 16, 0, 1), l4_rule("10.20.30.0", 24, 5432, 2),
                                         l4_rule("10.20.30.0", 24, 22, 2),
                                         l4_rule("2001:db8::1", 128, 22, 3)};
  maps.replace_l4_rules(idx, maps.l4_rules(idx), rules);
  auto back = maps.l4_rules(idx);
  auto key = [](const dp::L4Rule& r) { return std::tuple(r.family, r.addr, r.prefix_len, r.port); };
  std::vector<std::tuple<uint8_t, std::array<uint8_t, 16>, uint8_t, uint16_t>> want, got;
  for (const auto& r : rules) want.push_back(key(r));
  for (const auto& r : back) got.push_back(key(r));
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
}

// The per-session summary lets a denied port skip the trie, but only a port
// no rule names and only without any-port rules; a port sharing a named
// port's slot still goes to the trie, which denies it.
TEST(DatapathL4, TheSessionSummarySkipsOnlyWhatNoRuleCanAllow) {
  FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = FixtureGuest::kSessionIdx;
  maps.replace_l4_rules(idx, maps.l4_rules(idx), {l4_rule("10.20.30.40", 32, 5432)});
  zn_l4_summary sum = maps.l4_summary(idx);
  EXPECT_EQ(sum.entries, 1u);
  EXPECT_EQ(sum.any_port, 0u);
  EXPECT_EQ(sum.port_bits, uint64_t{1} << (5432 % 64));
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 5432)), kAllowed);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 22)), kDenied);         // skipped
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 5432 + 64)), kDenied);  // same slot: the trie says no
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.41", 5432)), kDenied);       // slot set, address not
  // An any-port rule anywhere sends every port to the trie.
  maps.put_l4_rule(idx, l4_rule("10.50.0.0", 16, 0));
  sum = maps.l4_summary(idx);
  EXPECT_EQ(sum.entries, 2u);
  EXPECT_EQ(sum.any_port, 1u);
  EXPECT_EQ(d.verdict_of(tcp_to("10.50.1.1", 22)), kAllowed);
  EXPECT_EQ(d.verdict_of(tcp_to("10.20.30.40", 22)), kDenied);
  maps.delete_l4_rule(idx, l4_rule("10.50.0.0", 16, 0));
  EXPECT_EQ(maps.l4_summary(idx).any_port, 0u);
  EXPECT_EQ(d.verdict_of(tcp_to("10.50.1.1", 22)), kDenied);
  EXPECT_EQ(maps.delete_l4_rules(idx), 1u);
  sum = maps.l4_summary(idx);
  EXPECT_EQ(sum.entries, 0u);
  EXPECT_EQ(sum.port_bits, 0u);
}

// A set that does not fit is refused before anything is written.
TEST(DatapathL4, TooManyPortsForOnePrefixAreRefusedAndNothingChanges) {
  FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = FixtureGuest::kSessionIdx;
  const auto before = maps.l4_rules(idx);
  std::vector<dp::L4Rule> rules = before;
  for (uint16_t p = 1; p <= ZN_L4_MAX_PORTS + 1; ++p)
    rules.push_back(l4_rule("10.40.0.0", 16 + (p % 2) * 8, p));
  EXPECT_THROW(maps.replace_l4_rules(idx, before, rules), std::invalid_argument);
  EXPECT_EQ(maps.l4_rule_count(idx), 2u);
  EXPECT_EQ(maps.l4_rules(idx).size(), before.size());
  EXPECT_EQ(d.verdict_of(fixture("tcp5432_l4_allowed")), kAllowed);
}

TEST(DatapathMaps, RejectsWhatWouldCorruptTheMaps) {
  dp::SessionEntry s;
  s.session_idx = 0;
  EXPECT_THROW(dp::to_abi(s), std::invalid_argument);
  s.session_idx = ZN_MAX_SESSIONS;
  EXPECT_THROW(dp::to_abi(s), std::invalid_argument);
  s.session_idx = 1;
  s.steered_ports = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_THROW(dp::to_abi(s), std::invalid_argument);
  s.steered_ports = {0};
  EXPECT_THROW(dp::to_abi(s), std::invalid_argument);
  dp::L4Rule r;
  r.family = 4;
  r.prefix_len = 33;
  EXPECT_THROW(dp::to_abi_key(1, r), std::invalid_argument);
  r.family = 5;
  EXPECT_THROW(dp::to_abi_key(1, r), std::invalid_argument);
  r.family = 4;
  r.prefix_len = 20;
  r.addr = {198, 18, 255, 255};
  zn_l4_key k = dp::to_abi_key(1, r);
  EXPECT_EQ(k.addr[2], 0xf0);  // host bits cleared
  EXPECT_EQ(k.addr[3], 0);
  EXPECT_EQ(k.prefixlen, ZN_L4_KEY_FIXED_BITS + 20u);
}

}  // namespace
}  // namespace zn::test
