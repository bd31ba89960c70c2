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

TEST(ZerodConfigSecrets, ReadLingerWithinItsBounds) {
  EXPECT_EQ(parse_daemon_config("{}").secret_read_linger_ms, 100u);
  EXPECT_EQ(parse_daemon_config(R"({"secret_read_linger_ms": 0})").secret_read_linger_ms, 0u);
  EXPECT_NE(config_error(R"({"secret_read_linger_ms": 10001})").find("$.secret_read_linger_ms"),
            std::string::npos);
}

// Issue 32: the shares of shared work are the operator's to set, within
// bounds that keep a share for the other sessions.
TEST(ZerodConfigShares, CapabilityAndDnsSharesWithinTheirBounds) {
  const DaemonConfig d = parse_daemon_config("{}");
  EXPECT_EQ(d.capability_threads, 8u);
  EXPECT_EQ(d.capability_calls_per_session, 3u);
  EXPECT_EQ(d.dns_pending_per_session, 64u);
  EXPECT_EQ(d.dns_tcp_per_session, 8u);
  EXPECT_EQ(d.approval_held_per_session, 32u);
  EXPECT_EQ(d.proxy_workers, 8u);
  EXPECT_EQ(d.proxy_workers_per_session, 2u);
  const DaemonConfig c = parse_daemon_config(
      R"({"capability_threads": 16, "capability_calls_per_session": 4, "dns_queries_per_second": 50,
          "proxy_max_connections": 100000, "proxy_workers": 32, "proxy_workers_per_session": 4,
          "dns_tcp_per_session": 63, "approval_held_per_session": 5})");
  EXPECT_EQ(c.dns_tcp_per_session, 63u);
  EXPECT_EQ(c.approval_held_per_session, 5u);
  EXPECT_EQ(c.proxy_workers, 32u);
  EXPECT_EQ(c.proxy_workers_per_session, 4u);
  EXPECT_EQ(c.capability_threads, 16u);
  EXPECT_EQ(c.capability_calls_per_session, 4u);
  EXPECT_EQ(c.dns_queries_per_second, 50u);
  EXPECT_EQ(c.proxy_max_connections, 100000u);
  // One session may never hold every thread.
  EXPECT_NE(config_error(R"({"capability_threads": 4, "capability_calls_per_session": 4})")
                .find("$.capability_calls_per_session"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"proxy_workers": 2, "proxy_workers_per_session": 2})")
                .find("$.proxy_workers_per_session"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"dns_pending_per_session": 0})").find("$.dns_pending_per_session"),
            std::string::npos);
  // A session's DNS TCP share leaves the others one of the 64.
  EXPECT_NE(config_error(R"({"dns_tcp_per_session": 64})").find("$.dns_tcp_per_session"), std::string::npos);
  EXPECT_NE(config_error(R"({"approval_held_per_session": 0})").find("$.approval_held_per_session"),
            std::string::npos);
}

// The audit's group commit: 10 ms unless the operator sets it (0: none).
TEST(ZerodConfigAudit, GatherWithinItsBounds) {
  EXPECT_EQ(parse_daemon_config("{}").audit_gather_ms, 10u);
  EXPECT_EQ(parse_daemon_config(R"({"audit_gather_ms": 0})").audit_gather_ms, 0u);
  EXPECT_EQ(parse_daemon_config(R"({"audit_gather_ms": 100})").audit_gather_ms, 100u);
  EXPECT_NE(config_error(R"({"audit_gather_ms": 101})").find("$.audit_gather_ms"), std::string::npos);
  EXPECT_NE(config_error(R"({"audit_gather_ms": -1})").find("$.audit_gather_ms"), std::string::npos);
}

// Guest TLS resumption is on unless the operator turns it off.
TEST(ZerodConfigTcAttach, ClsactByDefaultTcxOnRequestNothingElse) {
  EXPECT_EQ(parse_daemon_config("{}").tc_attach, "clsact");
  EXPECT_EQ(parse_daemon_config(R"({"tc_attach":"tcx"})").tc_attach, "tcx");
  EXPECT_NE(config_error(R"({"tc_attach":"xdp"})").find("$.tc_attach"), std::string::npos);
  EXPECT_NE(config_error(R"({"tc_attach":"TCX"})").find("$.tc_attach"), std::string::npos);
}

TEST(ZerodConfigTlsResumption, OnByDefault) {
  EXPECT_TRUE(parse_daemon_config("{}").proxy_tls_resumption);
  EXPECT_FALSE(parse_daemon_config(R"({"proxy_tls_resumption": false})").proxy_tls_resumption);
  EXPECT_NE(config_error(R"({"proxy_tls_resumption": "no"})").find("$.proxy_tls_resumption"),
            std::string::npos);
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

namespace zn::broker {
namespace {

TEST(ZerodConfigStores, NamedStoresWithTheirQuotas) {
  const DaemonConfig c = parse_daemon_config(R"({"state_dir":"/var/lib/zn","stores":{
      "kv":{"fast":{"path":"/srv/kv.db","max_bytes":4096,"max_keys":10}},
      "blob":{"reports":{"directory":"/srv/reports","max_bytes":1000000,"max_object_bytes":65536}},
      "sql":{"ledger":{"path":"/srv/ledger.db","time_budget_ms":500,"max_rows":100,"max_memory_bytes":67108864},
             "scratch":{"path":"/srv/scratch.db","create":true,"max_bytes":1048576}},
      "queue":{"jobs":{"path":"/srv/q.db","max_messages":5}}}})");
  EXPECT_EQ(c.stores.kv.at("fast").path, "/srv/kv.db");
  EXPECT_EQ(c.stores.kv.at("fast").quota.max_bytes, 4096u);
  EXPECT_EQ(c.stores.kv.at("fast").quota.max_keys, 10u);
  // KV and queue "default" live in the state directory unless named.
  EXPECT_EQ(c.stores.kv.at("default").path, "/var/lib/zn/resources/kv.db");
  EXPECT_EQ(c.stores.queue.at("default").path, "/var/lib/zn/resources/queue.db");
  EXPECT_EQ(c.stores.queue.at("jobs").quota.max_messages, 5u);
  EXPECT_EQ(c.stores.blob.at("reports").directory, "/srv/reports");
  EXPECT_EQ(c.stores.blob.at("reports").max_object_bytes, 65536u);
  EXPECT_EQ(c.stores.sql.at("ledger").limits.time_budget, std::chrono::milliseconds(500));
  EXPECT_EQ(c.stores.sql.at("ledger").limits.max_rows, 100u);
  EXPECT_EQ(c.stores.sql.at("ledger").limits.max_memory_bytes, 64u << 20);
  EXPECT_EQ(c.stores.sql.at("scratch").limits.max_memory_bytes, 256u << 20);  // the default
  EXPECT_TRUE(c.stores.sql.at("scratch").create_if_missing);
  EXPECT_EQ(c.stores.sql.at("scratch").quota_bytes, 1048576u);
  EXPECT_FALSE(c.stores.blob.count("default"));  // the operator's only
  // The gateway's addresses by default, outside the pools.
  EXPECT_EQ(c.capability_addresses, (std::vector<std::string>{"203.0.113.253", "2001:db8:ca9::1"}));
}

TEST(ZerodConfigStores, RefusedWithTheirPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"stores":{"files":{}}})", "$.stores.files"},
      {R"({"stores":{"kv":{"Bad Name":{"path":"/x"}}}})", "$.stores.kv.Bad Name"},
      {R"({"stores":{"kv":{"a":{}}}})", "$.stores.kv.a.path"},
      {R"({"stores":{"kv":{"a":{"path":"relative.db"}}}})", "$.stores.kv.a.path"},
      {R"({"stores":{"blob":{"a":{"path":"/x"}}}})", "$.stores.blob.a.path"},
      {R"({"stores":{"blob":{"a":{"directory":"/x","max_bytes":0}}}})", "$.stores.blob.a.max_bytes"},
      {R"({"stores":{"sql":{"a":{"path":"/x","create":"yes"}}}})", "$.stores.sql.a.create"},
      {R"({"stores":{"sql":{"a":{"path":"/x","time_budget_ms":0}}}})", "$.stores.sql.a.time_budget_ms"},
      {R"({"stores":{"sql":{"a":{"path":"/x","max_memory_bytes":1024}}}})",
       "$.stores.sql.a.max_memory_bytes"},
      {R"({"stores":{"queue":{"a":{"path":"/x","max_message_bytes":100000000}}}})",
       "$.stores.queue.a.max_message_bytes"},
      {R"({"capability_addresses":["cap.example"]})", "$.capability_addresses[0]"},
      {R"({"capability_addresses":["203.0.113.1","203.0.113.2"]})", "$.capability_addresses[1]"},
      {R"({"capability_addresses":["198.19.0.7"]})", "$.capability_addresses[0]"},  // in the guest pool
      {R"({"capability_addresses":"203.0.113.1"})", "$.capability_addresses"},
  };
  for (const auto& [text, path] : cases) {
    const std::string e = config_error(text);
    EXPECT_EQ(e.rfind(path, 0), 0u) << text << ": " << e;
  }
  EXPECT_TRUE(parse_daemon_config(R"({"capability_addresses":[]})").capability_addresses.empty());
}

TEST(ZerodConfigAudit, SinksRetentionAndCommentsAreCheckedWithTheirPath) {
  const DaemonConfig c = parse_daemon_config(R"({
    "// audit_sinks": "a comment key is ignored",
    "audit_host": "web-7",
    "audit_sinks": [{"name": "local", "type": "file", "path": "/var/log/zn/a.jsonl", "format": "ocsf",
                     "events": ["egress:", "dns:deny"]}],
    "audit_retention": {"max_age_days": 30}})");
  EXPECT_EQ(c.audit_host, "web-7");
  EXPECT_EQ(c.audit_sinks.size(), 1u);
  EXPECT_EQ(c.audit_retention.max_age, std::chrono::hours(24 * 30));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"audit_sinks": {}})", "$.audit_sinks"},
      {R"({"audit_sinks": [{"type": "file", "path": "/a"}]})", "$.audit_sinks[0].name"},
      {R"({"audit_sinks": [{"name": "a", "type": "ftp"}]})", "$.audit_sinks[0].type"},
      {R"({"audit_sinks": [{"name": "a", "type": "file", "path": "/a"}, {"name": "a", "type": "file", "path": "/b"}]})",
       "$.audit_sinks[1].name"},
      {R"({"audit_sinks": [{"name": "a", "type": "file", "path": "/a", "colour": 1}]})",
       "$.audit_sinks[0].colour"},
      {R"({"audit_sinks": [{"name": "a", "type": "file", "path": "/a", "events": ["dns:nope"]}]})",
       "$.audit_sinks[0].events[0]"},
      {R"({"audit_retention": {}})", "$.audit_retention"},
      {R"({"audit_retention": {"max_records": 0}})", "$.audit_retention.max_records"},
      {R"({"audit_host": "a b"})", "$.audit_host"},
      {R"({"colour": 1})", "$.colour"},
  };
  for (const auto& [text, path] : bad) {
    const std::string e = config_error(text);
    EXPECT_EQ(e.rfind(path + ":", 0), 0u) << text << " -> " << e;
  }
}

}  // namespace
}  // namespace zn::broker
