// The policy's L4 rules in the real BPF maps, decided by the real program.
#include "broker/policy/datapath_plan.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/pkt_cls.h>

#include "broker/policy/parser.h"
#include "support/verdict_fixtures.h"

namespace zn::broker {
namespace {

ResolvedAddress v4(const char* text) {
  ResolvedAddress a;
  a.family = 4;
  inet_pton(AF_INET, text, a.addr.data());
  return a;
}

std::shared_ptr<const CompiledPolicy> compile(const std::string& json) {
  return CompiledPolicy::compile(parse_policy(json));
}

NameResolver lab_names() {
  return [](const std::string& name) -> std::vector<ResolvedAddress> {
    if (name == "db.internal") return {v4("198.18.0.20"), v4("198.18.0.21")};
    return {};
  };
}

TEST(DatapathPlan, NamesResolveToHostPrefixesAndCidrsStayPrefixes) {
  auto p = compile(R"({"policy":{"allow":[
      {"host":"db.internal","port":5432},
      {"host":"198.18.1.0/24","port":8443},
      {"host":"2001:db8:18::10","port":22},
      {"host":"unknown.internal","port":1},
      {"host":"api.github.com"}]}})");
  DatapathPlan plan = plan_datapath(*p, lab_names());
  EXPECT_EQ(plan.steered_ports, (std::vector<uint16_t>{80, 443}));
  ASSERT_EQ(plan.l4_rules.size(), 4u);
  EXPECT_EQ(plan.l4_rules[0].prefix_len, 32);
  EXPECT_EQ(plan.l4_rules[0].port, 5432);
  EXPECT_EQ(plan.l4_rules[0].rule_id, 0u);
  EXPECT_EQ(plan.l4_rules[2].prefix_len, 24);
  EXPECT_EQ(plan.l4_rules[2].rule_id, 1u);
  EXPECT_EQ(plan.l4_rules[3].family, 6);
  EXPECT_EQ(plan.l4_rules[3].prefix_len, 128);
}

TEST(DatapathPlan, DuplicateDestinationsBecomeOneEntry) {
  auto p = compile(R"({"policy":{"allow":[
      {"host":"db.internal","port":5432},{"host":"198.18.0.20","port":5432}]}})");
  EXPECT_EQ(plan_datapath(*p, lab_names()).l4_rules.size(), 2u);
}

// Policy update: the new rule set replaces the old one in the trie, the
// datapath verdict follows, and nothing both sets allow is ever missing.
TEST(DatapathPlan, ApplyingAChangeMovesTheDatapathVerdict) {
  test::FixtureDatapath d;
  auto& maps = d.maps();
  const uint32_t idx = test::FixtureGuest::kSessionIdx;
  maps.delete_l4_rules(idx);
  auto verdict = [&](const char* name) {
    for (const auto& f : test::verdict_fixtures())
      if (f.name == name) return d.verdict_of(f);
    return unsigned{ZN_VERDICT_COUNT};
  };
  DatapathPlan none;
  EXPECT_EQ(verdict("tcp5432_l4_allowed"), unsigned{ZN_DROP_TCP_PORT});

  DatapathPlan first =
      plan_datapath(*compile(R"({"policy":{"allow":[{"host":"db.internal","port":5432}]}})"), lab_names());
  apply_l4_change(maps, idx, none, first);
  EXPECT_EQ(maps.l4_rule_count(idx), 2u);
  EXPECT_EQ(verdict("tcp5432_l4_allowed"), unsigned{ZN_DROP_ASSIGN_FAILED});  // steered
  EXPECT_EQ(verdict("tcp_any_port_prefix"), unsigned{ZN_DROP_TCP_PORT});

  DatapathPlan second = plan_datapath(
      *compile(
          R"({"policy":{"allow":[{"host":"198.18.0.20","port":5432},{"host":"198.18.1.0/24","port":9999}]}})"),
      lab_names());
  apply_l4_change(maps, idx, first, second);
  EXPECT_EQ(maps.l4_rule_count(idx), 2u);  // .21 gone, .20 kept, /24 added
  EXPECT_EQ(verdict("tcp5432_l4_allowed"), unsigned{ZN_DROP_ASSIGN_FAILED});
  EXPECT_EQ(verdict("tcp_any_port_prefix"), unsigned{ZN_DROP_ASSIGN_FAILED});

  apply_l4_change(maps, idx, second, none);
  EXPECT_EQ(maps.l4_rule_count(idx), 0u);
  EXPECT_EQ(verdict("tcp5432_l4_allowed"), unsigned{ZN_DROP_TCP_PORT});
}

}  // namespace
}  // namespace zn::broker
