// The policy's L4 rules in the real BPF maps, decided by the real program.
#include "broker/policy/datapath_plan.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/pkt_cls.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "broker/policy/parser.h"
#include "support/verdict_fixtures.h"
#include "userspace/datapath/l4_entries.h"

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

std::string host_on_ports(unsigned n) {
  std::string allow;
  for (unsigned p = 1; p <= n; ++p)
    allow += std::string(allow.empty() ? "" : ",") + R"({"host":"198.18.0.20","port":)" +
             std::to_string(1000 + p) + "}";
  return R"({"policy":{"allow":[)" + allow + "]}}";
}

TEST(DatapathPlan, APolicyTheMapsCannotHoldIsRefusedAtPlanTime) {
  EXPECT_EQ(plan_datapath(*compile(host_on_ports(ZN_L4_MAX_PORTS)), lab_names()).l4_rules.size(),
            size_t{ZN_L4_MAX_PORTS});
  EXPECT_THROW(plan_datapath(*compile(host_on_ports(ZN_L4_MAX_PORTS + 1)), lab_names()),
               std::invalid_argument);
}

const dp::L4Entry& entry(const std::vector<dp::L4Entry>& entries, uint8_t prefix_len) {
  for (const auto& e : entries)
    if (e.prefix_len == prefix_len) return e;
  throw std::out_of_range("no /" + std::to_string(prefix_len));
}

using Ports = std::vector<uint16_t>;

// The issue's example: a /16 on any port, a /24 on 5432 and a /32 on 22 in it.
TEST(FoldL4Rules, AnAnyPortPrefixOpensEveryLongerPrefixInIt) {
  const auto entries =
      dp::fold_l4_rules({test::l4_rule("10.20.30.40", 32, 22, 3), test::l4_rule("10.20.0.0", 16, 0, 1),
                         test::l4_rule("10.20.30.0", 24, 5432, 2)});
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].prefix_len, 32);  // longest first
  EXPECT_EQ(entries[1].prefix_len, 24);
  EXPECT_EQ(entries[2].prefix_len, 16);
  const auto& host = entries[0];
  EXPECT_TRUE(host.any_port);
  EXPECT_FALSE(host.own_any);
  EXPECT_EQ(host.own_ports, Ports{22});
  EXPECT_TRUE(host.inherited.empty());  // any port: nothing more to list
  EXPECT_EQ(host.rule_id, 3u);
  EXPECT_TRUE(entries[1].any_port);
  EXPECT_TRUE(entries[2].any_port);
  EXPECT_TRUE(entries[2].own_any);
  EXPECT_TRUE(entries[2].own_ports.empty());
}

TEST(FoldL4Rules, PortsOfCoveringPrefixesAreInheritedAndSiblingsStayApart) {
  const auto entries =
      dp::fold_l4_rules({test::l4_rule("10.30.0.0", 16, 5432), test::l4_rule("10.30.1.0", 24, 22),
                         test::l4_rule("10.30.1.7", 32, 8080), test::l4_rule("10.30.1.7", 32, 22),
                         test::l4_rule("10.30.2.0", 24, 443), test::l4_rule("10.31.0.0", 16, 7)});
  ASSERT_EQ(entries.size(), 5u);
  const auto& host = entry(entries, 32);
  EXPECT_FALSE(host.any_port);
  EXPECT_EQ(host.own_ports, (Ports{22, 8080}));
  EXPECT_EQ(host.inherited, Ports{5432});  // 22 is its own already
  for (const auto& e : entries) {
    if (e.prefix_len != 24) continue;
    EXPECT_EQ(e.inherited, Ports{5432}) << int(e.addr[2]);  // 10.30.2.0/24: not 10.30.1.0/24's 22
  }
  for (const auto& e : entries) {
    if (e.prefix_len == 16) {
      EXPECT_TRUE(e.inherited.empty()) << int(e.addr[1]);  // 10.31 is no child of 10.30
    }
  }
}

TEST(FoldL4Rules, Ipv6FoldsWithinItsFamilyOnly) {
  const auto entries =
      dp::fold_l4_rules({test::l4_rule("2001:db8:30::", 48, 5432), test::l4_rule("2001:db8:30:1::", 64, 0),
                         test::l4_rule("2001:db8:30:1::7", 128, 22), test::l4_rule("0.0.0.0", 0, 9)});
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_TRUE(entry(entries, 128).any_port);
  EXPECT_EQ(entry(entries, 128).own_ports, Ports{22});
  EXPECT_FALSE(entry(entries, 48).any_port);
  EXPECT_TRUE(entry(entries, 48).inherited.empty());  // the IPv4 /0 covers no IPv6 address
  EXPECT_EQ(entry(entries, 0).family, 4);
}

TEST(FoldL4Rules, DuplicatesMergeAndHostBitsAreCleared) {
  const auto entries =
      dp::fold_l4_rules({test::l4_rule("10.20.30.99", 24, 22, 1), test::l4_rule("10.20.30.0", 24, 22, 2)});
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].addr[3], 0);
  EXPECT_EQ(entries[0].own_ports, Ports{22});
  EXPECT_EQ(entries[0].rule_id, 1u);  // the first rule's
}

TEST(FoldL4Rules, TheValueListsOwnPortsFirstInNetworkOrder) {
  const auto entries =
      dp::fold_l4_rules({test::l4_rule("10.30.0.0", 16, 5432), test::l4_rule("10.30.1.7", 32, 8080),
                         test::l4_rule("10.30.1.7", 32, 22)});
  const zn_l4_value v = dp::to_abi_value(entry(entries, 32));
  EXPECT_EQ(v.any_port, 0);
  EXPECT_EQ(v.own_any, 0);
  EXPECT_EQ(v.own_nports, 2);
  EXPECT_EQ(v.nports, 3);
  EXPECT_EQ(v.ports[0], htons(22));
  EXPECT_EQ(v.ports[1], htons(8080));
  EXPECT_EQ(v.ports[2], htons(5432));
  EXPECT_EQ(v.ports[3], 0);
  const zn_l4_key k = dp::to_abi_key(7, entry(entries, 32));
  EXPECT_EQ(k.prefixlen, ZN_L4_KEY_FIXED_BITS + 32u);
  EXPECT_EQ(k.pad0, 0);
  // Read back: the entry's own rules only, not the inherited port.
  const auto own = dp::own_rules(k, v);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].port, 22);
  EXPECT_EQ(own[1].port, 8080);
  EXPECT_EQ(own[0].prefix_len, 32);

  const zn_l4_value any = dp::to_abi_value(
      dp::fold_l4_rules({test::l4_rule("10.0.0.0", 8, 0), test::l4_rule("10.1.0.0", 16, 22)})[0]);
  EXPECT_EQ(any.any_port, 1);
  EXPECT_EQ(any.own_nports, 1);
  EXPECT_EQ(any.nports, 1);  // only its own port, kept to be read back
}

TEST(FoldL4Rules, MorePortsThanAnEntryHoldsAreRefusedUnlessAnyPortCovers) {
  std::vector<dp::L4Rule> rules;
  for (uint16_t p = 1; p <= ZN_L4_MAX_PORTS; ++p) rules.push_back(test::l4_rule("10.0.0.0", 8, p));
  EXPECT_EQ(dp::fold_l4_rules(rules).size(), 1u);        // exactly the limit
  rules.push_back(test::l4_rule("10.1.0.0", 16, 9999));  // inherits 28, one more of its own
  EXPECT_THROW(dp::fold_l4_rules(rules), std::invalid_argument);
  rules.push_back(test::l4_rule("10.0.0.0", 8, 0));  // any port: nothing to list
  rules.erase(rules.begin());                        // 27 own ports left on the /8
  EXPECT_EQ(dp::fold_l4_rules(rules).size(), 2u);
  EXPECT_THROW(dp::fold_l4_rules({test::l4_rule("10.0.0.0", 33, 1)}), std::invalid_argument);
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
