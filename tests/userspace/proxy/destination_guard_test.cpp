// DestinationGuard without the local table (its namespace test is root-only:
// tests/integration/ssrf_test.cpp): guest pools, allowances, NAT64, the
// order of the checks; and zerod's config fields that feed it.
#include "userspace/proxy/destination_guard.h"

#include <gtest/gtest.h>

#include "broker/daemon/config.h"
#include "broker/policy/parser.h"

namespace zn::proxy {
namespace {

zn::net::AddressPrefix prefix(const char* text) {
  auto p = zn::net::AddressPrefix::parse(text);
  EXPECT_TRUE(p) << text;
  return p.value_or(zn::net::AddressPrefix{});
}

std::string refusal(const DestinationGuard& g, const char* address) {
  auto a = zn::net::IpAddress::parse(address);
  EXPECT_TRUE(a) << address;
  return g.refusal(*a).value_or("allowed");
}

// The lab's shape: guests in 198.19/16 and 2001:db8:19::/48, the stand-in
// internet allowed in 198.18/16 and 2001:db8:18::/48.
GuardConfig lab() {
  GuardConfig c;
  c.guest_pools = {prefix("198.19.0.0/16"), prefix("2001:db8:19::/48")};
  c.allow = {prefix("198.18.0.0/16"), prefix("2001:db8:18::/48")};
  return c;
}

TEST(DestinationGuard, RefusesGuestPoolsWhateverForm) {
  DestinationGuard g(lab());
  for (const char* a : {"198.19.0.1", "198.19.1.2", "198.19.255.255", "::ffff:198.19.1.2", "2001:db8:19::1",
                        "2001:db8:19:1::2", "2001:db8:19:ffff:ffff:ffff:ffff:ffff"})
    EXPECT_EQ(refusal(g, a), "guest pool") << a;
  // Positive controls: the allowance next door.
  for (const char* a : {"198.18.0.10", "198.18.255.255", "::ffff:198.18.0.10", "2001:db8:18::10"})
    EXPECT_EQ(refusal(g, a), "allowed") << a;
  // Just outside both: the special-purpose classes apply.
  EXPECT_EQ(refusal(g, "198.20.0.0"), "allowed");
  EXPECT_EQ(refusal(g, "2001:db8:1a::1"), "special-purpose: documentation");
}

TEST(DestinationGuard, SpecialPurposeRefusedUnlessAnAllowanceCoversIt) {
  DestinationGuard g(lab());
  EXPECT_EQ(refusal(g, "127.0.0.1"), "special-purpose: loopback");
  EXPECT_EQ(refusal(g, "::1"), "special-purpose: loopback");
  EXPECT_EQ(refusal(g, "169.254.169.254"), "special-purpose: metadata");
  EXPECT_EQ(refusal(g, "::ffff:169.254.169.254"), "special-purpose: metadata");
  EXPECT_EQ(refusal(g, "10.0.0.1"), "special-purpose: private");
  EXPECT_EQ(refusal(g, "192.0.2.1"), "special-purpose: documentation");
  EXPECT_EQ(refusal(g, "198.51.100.7"), "special-purpose: documentation");
  // Transition forms, even of an allowed or a public address.
  EXPECT_EQ(refusal(g, "2002:c612:a::1"), "special-purpose: 6to4 (carries benchmarking)");  // 198.18.0.10
  EXPECT_EQ(refusal(g, "2002:808:808::1"), "special-purpose: 6to4");
  EXPECT_EQ(refusal(g, "64:ff9b::c612:a"),
            "special-purpose: nat64 (carries benchmarking)");  // no NAT64 configured
  EXPECT_EQ(refusal(g, "64:ff9b::808:808"), "special-purpose: nat64");
  EXPECT_EQ(refusal(g, "2001:0:c612:a::1"), "special-purpose: teredo (carries benchmarking)");
  EXPECT_EQ(refusal(g, "::8.8.8.8"), "special-purpose: ipv4-compatible");
  EXPECT_EQ(refusal(g, "8.8.8.8"), "allowed");
  EXPECT_EQ(refusal(g, "2606:4700::1111"), "allowed");

  // The lab's guests must stay refused: an allowance of the whole
  // benchmarking /15 does not open the pool inside it.
  GuardConfig wide = lab();
  wide.allow = {prefix("198.18.0.0/15")};
  DestinationGuard w(wide);
  EXPECT_EQ(refusal(w, "198.19.0.1"), "guest pool");
  EXPECT_EQ(refusal(w, "198.18.0.10"), "allowed");
  // An allowance covers exactly what it names.
  GuardConfig one;
  one.allow = {prefix("10.1.2.3/32")};
  DestinationGuard o(one);
  EXPECT_EQ(refusal(o, "10.1.2.3"), "allowed");
  EXPECT_EQ(refusal(o, "::ffff:10.1.2.3"), "allowed");
  EXPECT_EQ(refusal(o, "10.1.2.4"), "special-purpose: private");
}

TEST(DestinationGuard, APoolOpensOnlyToAnAllowanceInsideIt) {
  GuardConfig c = lab();
  c.allow.push_back(prefix("0.0.0.0/0"));  // covers everything, names nothing
  DestinationGuard broad(c);
  EXPECT_EQ(refusal(broad, "198.19.1.2"), "guest pool");
  EXPECT_EQ(refusal(broad, "10.0.0.1"), "allowed");  // a special-purpose range is the operator's to open
  c.allow.push_back(prefix("198.19.7.0/24"));
  DestinationGuard narrow(c);
  EXPECT_EQ(refusal(narrow, "198.19.7.9"), "allowed");
  EXPECT_EQ(refusal(narrow, "198.19.8.9"), "guest pool");
}

TEST(DestinationGuard, Nat64ConfiguredIsJudgedAsTheIpv4ItCarries) {
  GuardConfig c = lab();
  c.nat64 = prefix("64:ff9b::/96");
  DestinationGuard g(c);
  EXPECT_EQ(refusal(g, "64:ff9b::808:808"), "allowed");  // 8.8.8.8
  EXPECT_EQ(refusal(g, "64:ff9b::c612:a"), "allowed");   // 198.18.0.10, allowed
  EXPECT_EQ(refusal(g, "64:ff9b::7f00:1"), "NAT64 to special-purpose: loopback");
  EXPECT_EQ(refusal(g, "64:ff9b::a9fe:a9fe"), "NAT64 to special-purpose: metadata");
  EXPECT_EQ(refusal(g, "64:ff9b::c613:102"), "NAT64 to guest pool");  // 198.19.1.2
  // Other transition forms stay refused.
  EXPECT_EQ(refusal(g, "2002:808:808::1"), "special-purpose: 6to4");
  EXPECT_EQ(refusal(g, "64:ff9b:1::808:808"), "special-purpose: local-use translation");
}

TEST(DestinationGuard, UpstreamText) {
  EXPECT_EQ(upstream_text(*zn::net::IpAddress::parse("198.18.0.10"), 443), "198.18.0.10:443");
  EXPECT_EQ(upstream_text(*zn::net::IpAddress::parse("2001:db8:18::10"), 80), "[2001:db8:18::10]:80");
}

std::string config_error(const std::string& text) {
  try {
    broker::parse_daemon_config(text);
  } catch (const broker::PolicyError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(DaemonConfigGuard, RejectsBadAllowancesAndPrefixesWithTheirPath) {
  EXPECT_NE(config_error(R"({"upstream_allow":"198.18.0.0/16"})").find("$.upstream_allow"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"upstream_allow":[1]})").find("$.upstream_allow[0]"), std::string::npos);
  for (const char* bad :
       {"198.18.0.1/16", "198.18.0.0/33", "example.com", "198.18.0.0/", "2001:db8:18::1/48", ""})
    EXPECT_NE(config_error(std::string(R"({"upstream_allow":["198.18.0.0/16",")") + bad + "\"]}")
                  .find("$.upstream_allow[1]"),
              std::string::npos)
        << bad;
  for (const char* bad : {"64:ff9b::/64", "64:ff9b::1/96", "10.0.0.0/8", "nat64"})
    EXPECT_NE(config_error(std::string(R"({"nat64_prefix":")") + bad + "\"}").find("$.nat64_prefix"),
              std::string::npos)
        << bad;
  EXPECT_NE(config_error(R"({"address_pool_ipv4":"2001:db8:19::/48"})").find("$.address_pool_ipv4"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"address_pool_ipv4":"198.19.0.1/16"})").find("$.address_pool_ipv4"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"address_pool_ipv6":"198.19.0.0/16"})").find("$.address_pool_ipv6"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"upstream_allows":[]})").find("unknown field"), std::string::npos);

  // Positive control.
  broker::DaemonConfig c = broker::parse_daemon_config(
      R"({"upstream_allow":["198.18.0.0/16","2001:db8:18::/48","203.0.113.9"],"nat64_prefix":"64:ff9b::/96"})");
  EXPECT_EQ(c.upstream_allow, (std::vector<std::string>{"198.18.0.0/16", "2001:db8:18::/48", "203.0.113.9"}));
  EXPECT_EQ(c.nat64_prefix, "64:ff9b::/96");
  EXPECT_TRUE(broker::parse_daemon_config("{}").upstream_allow.empty());
}

}  // namespace
}  // namespace zn::proxy
