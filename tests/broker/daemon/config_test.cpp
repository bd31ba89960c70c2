// zerod's address plan keys: the pools and per-guest prefixes become the
// registry's plan; plans that cannot work are refused with their path.
#include "broker/daemon/config.h"

#include <gtest/gtest.h>

#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

std::string config_error(const std::string& text) {
  try {
    parse_daemon_config(text);
  } catch (const PolicyError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ZerodConfigPlan, DefaultIsTheLabPlan) {
  const vmm::AddressPlan plan = parse_daemon_config("{}").address_plan();
  EXPECT_EQ(plan.pool4(), "198.19.0.0/16");
  EXPECT_EQ(plan.pool6(), "2001:db8:19::/48");
  EXPECT_EQ(plan.guest4_len, 24u);
  EXPECT_EQ(plan.guest6_len, 64u);
  EXPECT_EQ(net::to_string(vmm::guest_network(plan, 3).guest_ip4), "198.19.3.2");
}

TEST(ZerodConfigPlan, DensePlanFromTheKeys) {
  const DaemonConfig c = parse_daemon_config(
      R"({"address_pool_ipv4":"10.64.0.0/16","address_pool_ipv6":"fd00:64::/48",
          "guest_prefix_ipv4":30,"guest_prefix_ipv6":120})");
  const vmm::AddressPlan plan = c.address_plan();
  EXPECT_EQ(plan.max_slots(), 16383u);
  const vmm::GuestNetwork g = vmm::guest_network(plan, 16000);  // 64000 = 250.0
  EXPECT_EQ(net::to_string(g.gateway_ip4), "10.64.250.1");
  EXPECT_EQ(net::to_string(g.guest_ip4), "10.64.250.2");
  EXPECT_EQ(net::to_string(g.guest_ip6), "fd00:64::3e:8002");
  EXPECT_EQ(g.prefix4, 30u);
}

TEST(ZerodConfigPlan, RefusesPlansWithTheirPath) {
  EXPECT_NE(config_error(R"({"guest_prefix_ipv4":31})").find("$.guest_prefix_ipv4"), std::string::npos);
  EXPECT_NE(config_error(R"({"guest_prefix_ipv6":127})").find("$.guest_prefix_ipv6"), std::string::npos);
  EXPECT_NE(config_error(R"({"guest_prefix_ipv4":"30"})").find("$.guest_prefix_ipv4"), std::string::npos);
  const std::string small = config_error(R"({"address_pool_ipv4":"10.0.0.0/28"})");  // /24 guests
  EXPECT_NE(small.find("$.guest_prefix_ipv4"), std::string::npos) << small;
  EXPECT_NE(small.find("larger than the pool"), std::string::npos) << small;
  const std::string small6 = config_error(R"({"address_pool_ipv6":"fd00::/96"})");  // /64 guests
  EXPECT_NE(small6.find("$.guest_prefix_ipv6"), std::string::npos) << small6;
  // Positive control: the same pools with prefixes that fit.
  EXPECT_EQ(config_error(R"({"address_pool_ipv4":"10.0.0.0/28","address_pool_ipv6":"fd00::/96",
                             "guest_prefix_ipv4":30,"guest_prefix_ipv6":126})"),
            "accepted");
}

TEST(ZerodConfigHostKey, OutsideTheStateDirectoryOnly) {
  EXPECT_EQ(parse_daemon_config("{}").host_key, "/etc/zeroness/host.key");
  for (const char* inside : {R"({"state_dir":"/var/lib/zn","host_key":"/var/lib/zn/host.key"})",
                             R"({"state_dir":"/var/lib/zn/","host_key":"/var/lib/zn/keys/host.key"})",
                             R"({"state_dir":"/var/lib/zn","host_key":"/var/lib/zn/a/../host.key"})",
                             R"({"state_dir":"/var/lib/zn","host_key":"/var/lib/zn"})"}) {
    const std::string e = config_error(inside);
    EXPECT_NE(e.find("$.host_key"), std::string::npos) << inside << ": " << e;
  }
  EXPECT_NE(config_error(R"({"host_key":"host.key"})").find("absolute"), std::string::npos);
  // Positive controls: beside the state directory, or a name that merely
  // starts like it.
  EXPECT_EQ(config_error(R"({"state_dir":"/var/lib/zn/state","host_key":"/var/lib/zn/host.key"})"),
            "accepted");
  EXPECT_EQ(config_error(R"({"state_dir":"/var/lib/zn","host_key":"/var/lib/zn.key"})"), "accepted");
}

TEST(ZerodConfigJwks, AnIpv4AndAPortOrNothing) {
  EXPECT_EQ(parse_daemon_config("{}").jwks_port, 0u);
  for (const char* bad : {R"({"jwks_listen":"198.18.255.1"})", R"({"jwks_listen":"host.example:80"})",
                          R"({"jwks_listen":"198.18.255.1:0"})", R"({"jwks_listen":"198.18.255.1:70000"})",
                          R"({"jwks_listen":"[::1]:80"})", R"({"jwks_listen":"198.18.255.1:8a"})"}) {
    const std::string e = config_error(bad);
    EXPECT_NE(e.find("$.jwks_listen"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_EQ(config_error(R"({"jwks_listen":"198.18.255.1:8089"})"), "accepted");
  const DaemonConfig c = parse_daemon_config(R"({"jwks_listen":"198.18.255.1:8089"})");
  EXPECT_EQ(c.jwks_address, "198.18.255.1");
  EXPECT_EQ(c.jwks_port, 8089u);
}

TEST(ZerodConfigApprovals, GrantMaximumAndWebhook) {
  const DaemonConfig d = parse_daemon_config("{}");
  EXPECT_EQ(d.approval_grant_max_s, 86400u);
  EXPECT_FALSE(d.approval_webhook);
  EXPECT_EQ(d.webhook_signing_key(), "/etc/zeroness/webhook-ed25519.key");
  const DaemonConfig c = parse_daemon_config(
      R"({"approval_grant_max_s":600,"host_key":"/etc/zn/host.key","approval_webhook":{
          "url":"https://hooks.example/zn","hmac_key_file":"/etc/zn/webhook.key","signing":"ed25519",
          "timeout_ms":2000}})");
  EXPECT_EQ(c.approval_grant_max_s, 600u);
  ASSERT_TRUE(c.approval_webhook);
  EXPECT_EQ(c.approval_webhook->url, "https://hooks.example/zn");
  EXPECT_EQ(c.approval_webhook->hmac_key_file, "/etc/zn/webhook.key");
  EXPECT_TRUE(c.approval_webhook->ed25519);
  EXPECT_EQ(c.approval_webhook->timeout_ms, 2000u);
  EXPECT_EQ(c.webhook_signing_key(), "/etc/zn/webhook-ed25519.key");
  EXPECT_EQ(config_error(R"({"approval_webhook":{"url":"http://127.0.0.1:9999/hook","signing":"ed25519"}})"),
            "accepted");
  for (const auto& [bad, path] : std::vector<std::pair<std::string, std::string>>{
           {R"({"approval_grant_max_s":0})", "$.approval_grant_max_s"},
           {R"({"approval_grant_max_s":604801})", "$.approval_grant_max_s"},
           {R"({"approval_webhook":"http://x"})", "$.approval_webhook"},
           {R"({"approval_webhook":{"url":"ftp://x/","signing":"ed25519"}})", "$.approval_webhook.url"},
           {R"({"approval_webhook":{"url":"http://x/"}})", "$.approval_webhook"},  // unsigned
           {R"({"approval_webhook":{"url":"http://x/","signing":"rsa"}})", "$.approval_webhook.signing"},
           {R"({"approval_webhook":{"url":"http://x/","hmac_key_file":"k"}})",
            "$.approval_webhook.hmac_key_file"},
           {R"({"approval_webhook":{"url":"http://x/","signing":"ed25519","x":1}})", "$.approval_webhook.x"},
           {R"({"approval_webhook":{"url":"http://x/","signing":"ed25519","timeout_ms":5}})",
            "$.approval_webhook.timeout_ms"}}) {
    const std::string e = config_error(bad);
    EXPECT_NE(e.find(path), std::string::npos) << bad << ": " << e;
  }
}

}  // namespace
}  // namespace zn::broker
