#include "broker/policy/parser.h"

#include <gtest/gtest.h>

namespace zn::broker {
namespace {

// The example policy of DESIGN.md.
constexpr const char* kExample = R"({
  "policy": {
    "default": "deny",
    "allow": [
      { "host": "api.github.com", "methods": ["GET"], "paths": ["/repos/**"] },
      { "host": "api.stripe.com", "identity": "cap:stripe" },
      { "host": "*.npmjs.org" },
      { "host": "db.internal", "port": 5432, "proto": "tcp" },
      { "host": "api.internal", "methods": ["DELETE"], "action": "ask" }
    ],
    "deny": [ { "host": "evil.example" } ],
    "rate": { "burst": 50, "per_second": 20 }
  },
  "resources": { "stripe": { "accessToken": "sk_live_abcdefgh" } }
})";

TEST(PolicyParser, ParsesTheDesignExample) {
  Policy p = parse_policy(kExample);
  ASSERT_EQ(p.allow.size(), 5u);
  EXPECT_EQ(p.allow[0].host.name, "api.github.com");
  EXPECT_EQ(p.allow[0].methods, std::vector<std::string>{"GET"});
  EXPECT_EQ(p.allow[0].paths.size(), 1u);
  EXPECT_EQ(p.allow[1].identity, "stripe");
  EXPECT_FALSE(p.allow[1].mint_jwt);
  EXPECT_TRUE(p.allow[1].needs_interception());
  EXPECT_EQ(p.allow[2].host.kind, HostPattern::Kind::kWildcard);
  EXPECT_FALSE(p.allow[2].needs_interception());
  EXPECT_EQ(p.allow[3].port, 5432);
  EXPECT_TRUE(p.allow[3].is_l4());
  EXPECT_EQ(p.allow[4].action, RuleAction::kAsk);
  ASSERT_EQ(p.deny.size(), 1u);
  ASSERT_TRUE(p.rate);
  EXPECT_EQ(p.rate->burst, 50u);
  EXPECT_EQ(p.rate->per_second, 20u);
  EXPECT_TRUE(p.resources.at("stripe").fields.at("accessToken").equals("sk_live_abcdefgh"));
}

TEST(PolicyParser, MinimalPolicyIsDefaultDeny) {
  Policy p = parse_policy(R"({"policy":{}})");
  EXPECT_TRUE(p.allow.empty());
  EXPECT_FALSE(p.rate);
}

struct Bad {
  const char* name;
  std::string json;
  std::string path;
  std::string message;
};

std::string with_allow(const std::string& rule) {
  return R"({"policy":{"allow":[{"host":"ok.example"},)" + rule + "]}}";
}

class PolicyParserRejects : public ::testing::TestWithParam<Bad> {};

TEST_P(PolicyParserRejects, WithThePathOfTheFirstError) {
  const Bad& b = GetParam();
  try {
    parse_policy(b.json);
    FAIL() << b.name << ": accepted";
  } catch (const PolicyError& e) {
    EXPECT_EQ(e.path(), b.path) << b.name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(b.message), std::string::npos) << b.name << ": " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    All, PolicyParserRejects,
    ::testing::Values(
        Bad{"not_json", "{", "$", "invalid JSON"}, Bad{"not_object", "[]", "$", "must be an object"},
        Bad{"no_policy", "{}", "$.policy", "required"},
        Bad{"unknown_top", R"({"policy":{},"extra":1})", "$.extra", "unknown field"},
        Bad{"unknown_policy_field", R"({"policy":{"allw":[]}})", "$.policy.allw", "unknown field"},
        Bad{"duplicate_key", R"({"policy":{"allow":[{"host":"a.example","host":"b.example"}]}})", "$",
            "duplicate key 'host'"},
        Bad{"default_allow", R"({"policy":{"default":"allow"}})", "$.policy.default", "deny"},
        Bad{"allow_not_array", R"({"policy":{"allow":{}}})", "$.policy.allow", "array"},
        Bad{"rule_not_object", with_allow("3"), "$.policy.allow[1]", "object"},
        Bad{"rule_unknown_field", with_allow(R"({"host":"a.example","method":["GET"]})"),
            "$.policy.allow[1].method", "unknown field"},
        Bad{"rule_no_host", with_allow(R"({"methods":["GET"]})"), "$.policy.allow[1].host", "required"},
        Bad{"host_not_string", with_allow(R"({"host":5})"), "$.policy.allow[1].host", "string"},
        Bad{"host_too_broad", with_allow(R"({"host":"*.com"})"), "$.policy.allow[1].host", "too broad"},
        Bad{"host_bad_char", with_allow(R"({"host":"a b.example"})"), "$.policy.allow[1].host", "character"},
        Bad{"bad_method", with_allow(R"({"host":"a.example","methods":["FETCH"]})"),
            "$.policy.allow[1].methods[0]", "method"},
        Bad{"lowercase_method", with_allow(R"({"host":"a.example","methods":["get"]})"),
            "$.policy.allow[1].methods[0]", "method"},
        Bad{"connect_method", with_allow(R"({"host":"a.example","methods":["CONNECT"]})"),
            "$.policy.allow[1].methods[0]", "method"},
        Bad{"duplicate_method", with_allow(R"({"host":"a.example","methods":["GET","GET"]})"),
            "$.policy.allow[1].methods[1]", "duplicate"},
        Bad{"empty_methods", with_allow(R"({"host":"a.example","methods":[]})"), "$.policy.allow[1].methods",
            "empty"},
        Bad{"bad_path", with_allow(R"({"host":"a.example","paths":["repos/**"]})"),
            "$.policy.allow[1].paths[0]", "start with '/'"},
        Bad{"path_dotdot", with_allow(R"({"host":"a.example","paths":["/a/../b"]})"),
            "$.policy.allow[1].paths[0]", "'..'"},
        Bad{"bad_identity", with_allow(R"({"host":"a.example","identity":"stripe"})"),
            "$.policy.allow[1].identity", "cap:"},
        Bad{"jwt_with_issuer", with_allow(R"({"host":"a.example","identity":"jwt:zn"})"),
            "$.policy.allow[1].identity", "\"jwt\""},
        Bad{"jwt_on_l4", with_allow(R"({"host":"a.example","port":5432,"proto":"tcp","identity":"jwt"})"),
            "$.policy.allow[1]", "identity"},
        Bad{"missing_resource", with_allow(R"({"host":"a.example","identity":"cap:nope"})"),
            "$.policy.allow[1].identity", "no resource 'nope'"},
        Bad{"bad_action", with_allow(R"({"host":"a.example","action":"maybe"})"), "$.policy.allow[1].action",
            "allow"},
        Bad{"bad_proto", with_allow(R"({"host":"a.example","port":53,"proto":"udp"})"),
            "$.policy.allow[1].proto", "tcp"},
        Bad{"proto_without_port", with_allow(R"({"host":"a.example","proto":"tcp"})"),
            "$.policy.allow[1].port", "required"},
        Bad{"port_zero", with_allow(R"({"host":"a.example","port":0})"), "$.policy.allow[1].port", "between"},
        Bad{"port_too_big", with_allow(R"({"host":"a.example","port":70000})"), "$.policy.allow[1].port",
            "between"},
        Bad{"port_negative", with_allow(R"({"host":"a.example","port":-1})"), "$.policy.allow[1].port",
            "between"},
        Bad{"port_float", with_allow(R"({"host":"a.example","port":5432.5})"), "$.policy.allow[1].port",
            "integer"},
        Bad{"port_string", with_allow(R"({"host":"a.example","port":"5432"})"), "$.policy.allow[1].port",
            "integer"},
        Bad{"l4_with_methods", with_allow(R"({"host":"a.example","port":5432,"methods":["GET"]})"),
            "$.policy.allow[1]", "L4 rule"},
        Bad{"l4_websocket", with_allow(R"({"host":"a.example","port":5432,"websocket":true})"),
            "$.policy.allow[1]", "websocket"},
        Bad{"websocket_not_bool", with_allow(R"({"host":"a.example","websocket":"yes"})"),
            "$.policy.allow[1].websocket", "true or false"},
        Bad{"websocket_without_get",
            with_allow(R"({"host":"a.example","methods":["POST"],"websocket":true})"),
            "$.policy.allow[1].websocket", "GET"},
        Bad{"l4_wildcard", with_allow(R"({"host":"*.example.com","port":5432})"), "$.policy.allow[1].host",
            "wildcard"},
        Bad{"cidr_without_port", with_allow(R"({"host":"198.18.0.0/24"})"), "$.policy.allow[1].host", "CIDR"},
        Bad{"deny_unknown_field", R"({"policy":{"deny":[{"host":"a.example","why":1}]}})",
            "$.policy.deny[0].why", "unknown field"},
        Bad{"deny_bad_host", R"({"policy":{"deny":[{"host":"*"}]}})", "$.policy.deny[0].host", "'*'"},
        Bad{"rate_missing_burst", R"({"policy":{"rate":{"per_second":1}}})", "$.policy.rate.burst",
            "required"},
        Bad{"rate_zero", R"({"policy":{"rate":{"burst":0,"per_second":1}}})", "$.policy.rate.burst",
            "between"},
        Bad{"rate_huge", R"({"policy":{"rate":{"burst":1,"per_second":1000001}}})",
            "$.policy.rate.per_second", "between"},
        Bad{"resource_bad_name", R"({"policy":{},"resources":{"Stripe":{}}})", "$.resources.Stripe",
            "resource names"},
        Bad{"resource_not_string", R"({"policy":{},"resources":{"s":{"accessToken":5}}})",
            "$.resources.s.accessToken", "string"},
        Bad{"method_not_string", with_allow(R"({"host":"a.example","methods":["GET",5]})"),
            "$.policy.allow[1].methods[1]", "string"},
        Bad{"path_not_string", with_allow(R"({"host":"a.example","paths":["/a","/b",null]})"),
            "$.policy.allow[1].paths[2]", "string"},
        Bad{"too_many_methods",
            with_allow(
                R"({"host":"a.example","methods":["GET","GET","GET","GET","GET","GET","GET","GET","GET","GET"]})"),
            "$.policy.allow[1].methods", "more than 9 entries"},
        Bad{"deny_no_host", R"({"policy":{"deny":[{"host":"a.example"},{}]}})", "$.policy.deny[1].host",
            "required"},
        Bad{"deny_rule_not_object", R"({"policy":{"deny":[[]]}})", "$.policy.deny[0]", "object"},
        Bad{"rate_unknown_field", R"({"policy":{"rate":{"burst":1,"per_second":1,"period":1}}})",
            "$.policy.rate.period", "unknown field"},
        Bad{"resource_field_too_long",
            R"({"policy":{},"resources":{"s":{"accessToken":")" + std::string(16385, 'x') + R"("}}})",
            "$.resources.s.accessToken", "too long"},
        Bad{"resource_not_object", R"({"policy":{},"resources":{"s":"x"}})", "$.resources.s", "object"},
        Bad{"duplicate_nested_key", R"({"policy":{},"resources":{"s":{"user":"a","user":"b"}}})", "$",
            "duplicate key 'user'"},
        Bad{"duplicate_empty_key", R"({"policy":{},"resources":{"s":{"":"a","":"b"}}})", "$",
            "duplicate key ''"},
        Bad{"syntax_error_after_duplicate", R"({"policy":{},"policy":{})", "$", "invalid JSON at byte"},
        Bad{"many_digit_index",
            R"({"policy":{"allow":[{"host":"a.example"},{"host":"a.example"},{"host":"a.example"},)"
            R"({"host":"a.example"},{"host":"a.example"},{"host":"a.example"},{"host":"a.example"},)"
            R"({"host":"a.example"},{"host":"a.example"},{"host":"a.example"},{"host":"*"}]}})",
            "$.policy.allow[10].host", "'*'"},
        Bad{"kind_unknown", R"({"policy":{},"resources":{"s":{"kind":"oauth","token":"x"}}})",
            "$.resources.s.kind", "\"token\" or \"basic\""},
        Bad{"token_missing", R"({"policy":{},"resources":{"s":{"kind":"token"}}})", "$.resources.s.token",
            "required"},
        Bad{"token_typo", R"({"policy":{},"resources":{"s":{"kind":"token","tokn":"x"}}})",
            "$.resources.s.tokn", "unknown field"},
        Bad{"token_crlf", R"({"policy":{},"resources":{"s":{"kind":"token","token":"a\r\nX-Evil: 1"}}})",
            "$.resources.s.token", "control characters"},
        Bad{"legacy_token_crlf",
            R"({"policy":{"allow":[{"host":"a.example","identity":"cap:s"}]},)"
            R"("resources":{"s":{"accessToken":"a\nb"}}})",
            "$.policy.allow[0].identity", "control characters"},
        Bad{"basic_missing_password", R"({"policy":{},"resources":{"s":{"kind":"basic","user":"u"}}})",
            "$.resources.s.password", "required"},
        Bad{"basic_colon_user",
            R"({"policy":{},"resources":{"s":{"kind":"basic","user":"a:b","password":"p"}}})",
            "$.resources.s.user", "':'"},
        Bad{"basic_in_query",
            R"({"policy":{"allow":[{"host":"a.example","identity":"cap:s","inject":{"query":"k"}}]},)"
            R"("resources":{"s":{"kind":"basic","user":"u","password":"p"}}})",
            "$.policy.allow[0].inject", "Basic"},
        Bad{"inject_without_identity", with_allow(R"({"host":"a.example","inject":{"header":"x-api-key"}})"),
            "$.policy.allow[1].inject", "identity"},
        Bad{"inject_host_header",
            with_allow(R"({"host":"a.example","identity":"jwt","inject":{"header":"Host"}})"),
            "$.policy.allow[1].inject.header", "header name"},
        Bad{"inject_bad_header",
            with_allow(R"({"host":"a.example","identity":"jwt","inject":{"header":"x api"}})"),
            "$.policy.allow[1].inject.header", "header name"},
        Bad{"inject_query_and_header",
            with_allow(R"({"host":"a.example","identity":"jwt","inject":{"header":"a","query":"k"}})"),
            "$.policy.allow[1].inject.query", "excludes"},
        Bad{"inject_bad_query",
            with_allow(R"({"host":"a.example","identity":"jwt","inject":{"query":"a&b"}})"),
            "$.policy.allow[1].inject.query", "parameter name"},
        Bad{"inject_prefix_crlf",
            with_allow(R"({"host":"a.example","identity":"jwt","inject":{"prefix":"a\r\n"}})"),
            "$.policy.allow[1].inject.prefix", "printable"},
        Bad{"inject_empty", with_allow(R"({"host":"a.example","identity":"jwt","inject":{}})"),
            "$.policy.allow[1].inject", "needs"},
        Bad{"placeholder_bad_env",
            R"({"policy":{},"resources":{"s":{"kind":"token","token":"t","placeholder":"lower"}}})",
            "$.resources.s.placeholder", "environment variable"},
        Bad{"placeholder_no_credential",
            R"({"policy":{},"resources":{"s":{"user":"u","placeholder":"S_KEY"}}})",
            "$.resources.s.placeholder", "credential"},
        Bad{"canary_short", R"({"policy":{},"canaries":["abc"]})", "$.canaries[0]", "8-256"},
        Bad{"canary_space", R"({"policy":{},"canaries":["abcd efgh ij"]})", "$.canaries[0]", "8-256"},
        Bad{"canary_duplicate", R"({"policy":{},"canaries":["AKIAFAKE0001","AKIAFAKE0001"]})",
            "$.canaries[1]", "duplicate"},
        Bad{"canaries_not_array", R"({"policy":{},"canaries":"AKIAFAKE0001"})", "$.canaries", "array"},
        Bad{"caps_not_object", R"({"policy":{},"caps":[]})", "$.caps", "object"},
        Bad{"cap_bad_name", R"({"policy":{},"caps":{"Data":{"kind":"kv"}}})", "$.caps.Data",
            "capability names"},
        Bad{"cap_no_kind", R"({"policy":{},"caps":{"data":{"mode":"ro"}}})", "$.caps.data.kind", "required"},
        Bad{"cap_bad_kind", R"({"policy":{},"caps":{"data":{"kind":"s3"}}})", "$.caps.data.kind", "\"kv\""},
        Bad{"cap_bad_mode", R"({"policy":{},"caps":{"data":{"kind":"kv","mode":"wo"}}})", "$.caps.data.mode",
            "\"ro\" or \"rw\""},
        Bad{"cap_ro_queue", R"({"policy":{},"caps":{"jobs":{"kind":"queue","mode":"ro"}}})",
            "$.caps.jobs.mode", "queue"},
        Bad{"cap_db_not_sql", R"({"policy":{},"caps":{"data":{"kind":"kv","db":"x"}}})", "$.caps.data.db",
            "only for"},
        Bad{"cap_db_and_store", R"({"policy":{},"caps":{"l":{"kind":"sql","db":"x","store":"y"}}})",
            "$.caps.l.db", "give one"},
        Bad{"cap_store_path", R"({"policy":{},"caps":{"l":{"kind":"sql","db":"/etc/shadow"}}})",
            "$.caps.l.db", "zerod's config"},
        Bad{"cap_unknown_field", R"({"policy":{},"caps":{"l":{"kind":"blob","path":"/x"}}})", "$.caps.l.path",
            "unknown field"},
        Bad{"identity_without_token",
            R"({"policy":{"allow":[{"host":"a.example","identity":"cap:s"}]},"resources":{"s":{"user":"x"}}})",
            "$.policy.allow[0].identity", "accessToken"}),
    [](const auto& info) { return std::string(info.param.name); });

// Typed resources and where their credential goes (the positive controls of
// the kind_ and inject_ cases above).
TEST(PolicyParser, TypedResourcesAndPlacements) {
  Policy p = parse_policy(R"({"policy":{"allow":[
      {"host":"a.example","identity":"cap:gh","inject":{"header":"Authorization","prefix":"token "}},
      {"host":"b.example","identity":"cap:gh","inject":{"header":"x-api-key"}},
      {"host":"c.example","identity":"cap:gh","inject":{"query":"api_key"}},
      {"host":"d.example","identity":"cap:jira"},
      {"host":"e.example","identity":"cap:gh"},
      {"host":"f.example","identity":"jwt","inject":{"header":"X-Zn-Token"}}]},
    "resources":{"gh":{"kind":"token","token":"ghp_x1","placeholder":"GITHUB_TOKEN"},
                 "jira":{"kind":"basic","user":"bot","password":"pw:with colon"}},
    "canaries":["AKIAFAKECANARY01","sk-canary-0001"]})");
  ASSERT_EQ(p.allow.size(), 6u);
  EXPECT_EQ(p.allow[0].placement.name, "Authorization");
  EXPECT_EQ(p.allow[0].placement.prefix, "token ");
  EXPECT_EQ(p.allow[1].placement.name, "x-api-key");
  EXPECT_EQ(p.allow[1].placement.prefix, "");  // another header: the bare credential
  EXPECT_EQ(p.allow[2].placement.kind, Placement::Kind::kQuery);
  EXPECT_EQ(p.allow[2].placement.name, "api_key");
  EXPECT_EQ(p.allow[4].placement.prefix, "Bearer ");  // the default
  EXPECT_EQ(p.allow[5].placement.name, "X-Zn-Token");
  EXPECT_EQ(p.resources.at("gh").kind, ResourceKind::kToken);
  EXPECT_EQ(p.resources.at("gh").placeholder_env, "GITHUB_TOKEN");
  ASSERT_NE(p.resources.at("gh").credential(), nullptr);
  EXPECT_TRUE(p.resources.at("gh").credential()->equals("ghp_x1"));
  EXPECT_TRUE(p.resources.at("jira").credential()->equals("pw:with colon"));
  EXPECT_EQ(p.resources.at("gh").fields.count("placeholder"), 0u);  // metadata, not a secret
  EXPECT_EQ(p.canaries, (std::vector<std::string>{"AKIAFAKECANARY01", "sk-canary-0001"}));
}

TEST(PolicyParser, Capabilities) {
  Policy p = parse_policy(R"({"policy":{},"caps":{
      "data":{"kind":"kv","mode":"rw"},"reports":{"kind":"blob","mode":"ro","store":"reports"},
      "ledger":{"kind":"sql","mode":"ro","db":"ledger"},"jobs":{"kind":"queue"},
      "seen":{"kind":"kv"},"notes":{"kind":"blob","store":"notes"}}})");
  ASSERT_EQ(p.caps.size(), 6u);
  // Without "mode": read-only, but for a queue.
  EXPECT_TRUE(p.caps.at("seen").read_only);
  EXPECT_TRUE(p.caps.at("notes").read_only);
  EXPECT_FALSE(p.caps.at("jobs").read_only);
  EXPECT_EQ(p.caps.at("data").kind, CapabilityKind::kKv);
  EXPECT_FALSE(p.caps.at("data").read_only);
  EXPECT_EQ(p.caps.at("data").store, "default");
  EXPECT_TRUE(p.caps.at("reports").read_only);
  EXPECT_EQ(p.caps.at("reports").store, "reports");
  EXPECT_EQ(p.caps.at("ledger").kind, CapabilityKind::kSql);
  EXPECT_EQ(p.caps.at("ledger").store, "ledger");
  EXPECT_EQ(p.caps.at("jobs").kind, CapabilityKind::kQueue);
  EXPECT_EQ(capability_kind_name(CapabilityKind::kBlob), "blob");
}

// Found by fuzz/policy_fuzz: a number no type can hold made nlohmann throw
// something other than parse_error, which escaped as a non-PolicyError.
TEST(PolicyParser, HugeNumbersAreAPolicyError) {
  // The whole literal, its embedded NULs too (a hand-counted length read past its end).
  static constexpr char kHuge[] = "66666.0e66666.0e06.0e0\0\0 \"\"";
  EXPECT_THROW(parse_policy(std::string(kHuge, sizeof kHuge - 1)), PolicyError);
  EXPECT_THROW(parse_policy(R"({"policy":{"rate":{"burst":1e999,"per_second":1}}})"), PolicyError);
}

TEST(PolicyParser, ErrorsNeverEchoSecrets) {
  try {
    parse_policy(R"({"policy":{},"resources":{"s":{"accessToken":"sk_live_secret_value", "n": 1}}})");
    FAIL();
  } catch (const PolicyError& e) {
    EXPECT_EQ(std::string(e.what()).find("sk_live"), std::string::npos) << e.what();
  }
}

// Keys are unique per object, not per document: the same key in sibling and
// nested objects is fine (the positive control of duplicate_key).
TEST(PolicyParser, SameKeyInDifferentObjectsIsNotADuplicate) {
  Policy p = parse_policy(
      R"({"policy":{"allow":[{"host":"a.example"},{"host":"b.example"}],"deny":[{"host":"c.example"}]},)"
      R"("resources":{"s":{"user":"x"},"t":{"user":"y"}}})");
  EXPECT_EQ(p.allow.size(), 2u);
  EXPECT_TRUE(p.resources.at("t").fields.at("user").equals("y"));
}

// A policy of the benchmark's shape at scale, parsed twice on one thread
// (the document's tree lives in a per-parse arena).
TEST(PolicyParser, ParsesALargePolicy) {
  std::string doc = R"({"policy":{"allow":[)";
  for (int i = 0; i < 3000; ++i) {
    const std::string n = std::to_string(i);
    if (i) doc += ",";
    doc += i % 2 ? R"({"host":"*.svc)" + n + R"(.example.net"})"
                 : R"({"host":"API)" + n + R"(.Example.com","methods":["GET","POST"],"paths":["/v1/**"]})";
  }
  doc += R"(],"deny":[{"host":"bad.example.com"}]}})";
  for (int round = 0; round < 2; ++round) {
    Policy p = parse_policy(doc);
    ASSERT_EQ(p.allow.size(), 3000u);
    EXPECT_EQ(p.allow[2998].host.name, "api2998.example.com");
    EXPECT_EQ(p.allow[2998].methods, (std::vector<std::string>{"GET", "POST"}));
    EXPECT_EQ(p.allow[2998].paths.at(0).text(), "/v1/**");
    EXPECT_EQ(p.allow[2999].host.kind, HostPattern::Kind::kWildcard);
    EXPECT_EQ(p.allow[2999].index, 2999u);
    EXPECT_EQ(p.deny.at(0).host.name, "bad.example.com");
  }
}

TEST(PolicyParser, LimitsAreEnforced) {
  PolicyLimits limits;
  limits.max_allow_rules = 2;
  EXPECT_THROW(
      parse_policy(R"({"policy":{"allow":[{"host":"a.example"},{"host":"b.example"},{"host":"c.example"}]}})",
                   limits),
      PolicyError);
  limits.max_document_bytes = 10;
  EXPECT_THROW(parse_policy(R"({"policy":{}})", limits), PolicyError);
}

}  // namespace
TEST(PolicyParser, AMintedIdentityNeedsNoResourceAndMeansInterception) {
  const Policy p = parse_policy(R"({"policy":{"allow":[{"host":"api.example.com","identity":"jwt"}]}})");
  ASSERT_EQ(p.allow.size(), 1u);
  EXPECT_TRUE(p.allow[0].mint_jwt);
  EXPECT_FALSE(p.allow[0].identity);
  EXPECT_TRUE(p.allow[0].injects_identity());
  EXPECT_TRUE(p.allow[0].needs_interception());
}

}  // namespace zn::broker
