// Every verdict of the TAP programs, through BPF_PROG_TEST_RUN: the TC action,
// the named reason's counter for the session, and (for drops) the ring-buffer
// event carrying session, reason and 5-tuple.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/pkt_cls.h>

#include <cstring>
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
  const std::vector<unsigned> elsewhere = {ZN_PASS_DNS,        ZN_PASS_STEER,         ZN_PASS_L4,
                                           ZN_DROP_NO_SESSION, ZN_DROP_TRUNCATED_ETH, ZN_DROP_NO_LISTENER};
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
