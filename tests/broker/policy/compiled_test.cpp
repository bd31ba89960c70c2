#include "broker/policy/compiled.h"

#include <gtest/gtest.h>

#include "broker/policy/parser.h"

namespace zn::broker {
namespace {

std::shared_ptr<const CompiledPolicy> compile(const std::string& json) {
  return CompiledPolicy::compile(parse_policy(json));
}

constexpr const char* kPolicy = R"({
  "policy": {
    "allow": [
      { "host": "api.github.com", "methods": ["GET"], "paths": ["/repos/**"] },
      { "host": "api.github.com", "methods": ["POST"], "paths": ["/gists"] },
      { "host": "api.stripe.com", "identity": "cap:stripe" },
      { "host": "*.npmjs.org" },
      { "host": "*.registry.npmjs.org", "methods": ["GET"] },
      { "host": "*.example.com" },
      { "host": "db.internal", "port": 5432, "proto": "tcp" },
      { "host": "198.18.0.0/24", "port": 8443 },
      { "host": "api.internal", "methods": ["DELETE"], "action": "ask" },
      { "host": "api.internal" }
    ],
    "deny": [ { "host": "evil.example.com" }, { "host": "*.bad.npmjs.org" } ]
  },
  "resources": { "stripe": { "accessToken": "sk_live_abcdefgh" } }
})";

TEST(CompiledPolicy, DefaultDeny) {
  auto p = compile(kPolicy);
  auto v = p->match_host("api.openai.com");
  EXPECT_FALSE(v.allowed);
  EXPECT_EQ(v.reason, "default deny");
}

TEST(CompiledPolicy, ExactAndCaseInsensitive) {
  auto p = compile(kPolicy);
  EXPECT_TRUE(p->match_host("API.GITHUB.COM.").allowed);
  EXPECT_EQ(p->match_host("api.github.com").rules.size(), 2u);
}

TEST(CompiledPolicy, WildcardMatchesSubdomainsOnly) {
  auto p = compile(kPolicy);
  EXPECT_TRUE(p->match_host("www.npmjs.org").allowed);
  EXPECT_TRUE(p->match_host("a.b.c.npmjs.org").allowed);
  EXPECT_FALSE(p->match_host("npmjs.org").allowed);
  EXPECT_FALSE(p->match_host("evilnpmjs.org").allowed);
  EXPECT_FALSE(p->match_host("npmjs.org.attacker.net").allowed);
}

TEST(CompiledPolicy, MostSpecificWildcardWins) {
  auto p = compile(kPolicy);
  auto v = p->match_host("x.registry.npmjs.org");
  ASSERT_TRUE(v.allowed);
  ASSERT_EQ(v.rules.size(), 1u);
  EXPECT_EQ(v.rules[0]->index, 4u);  // *.registry.npmjs.org, GET only
  EXPECT_TRUE(v.intercept);
  EXPECT_EQ(p->match_request("x.registry.npmjs.org", "POST", "/").action, RequestAction::kDeny);
  auto other = p->match_host("www.npmjs.org");
  ASSERT_EQ(other.rules.size(), 1u);
  EXPECT_EQ(other.rules[0]->index, 3u);
  EXPECT_FALSE(other.intercept);
}

TEST(CompiledPolicy, DenyBeatsAllowAtAnyLevel) {
  auto p = compile(kPolicy);
  auto exact = p->match_host("evil.example.com");
  EXPECT_FALSE(exact.allowed);
  EXPECT_EQ(exact.reason, "deny rule 0 (evil.example.com)");
  EXPECT_TRUE(p->match_host("good.example.com").allowed);
  // A deny wildcard below an allow wildcard.
  EXPECT_FALSE(p->match_host("x.bad.npmjs.org").allowed);
  EXPECT_FALSE(p->match_host("y.x.bad.npmjs.org").allowed);
  EXPECT_TRUE(p->match_host("bad.npmjs.org").allowed);  // "*." excludes the name itself
}

TEST(CompiledPolicy, DenyBeatsAnExactAllow) {
  auto p = compile(R"({"policy":{"allow":[{"host":"a.evil.test"}],"deny":[{"host":"*.evil.test"}]}})");
  EXPECT_FALSE(p->match_host("a.evil.test").allowed);
}

TEST(CompiledPolicy, RequestsByMethodAndPath) {
  auto p = compile(kPolicy);
  EXPECT_EQ(p->match_request("api.github.com", "GET", "/repos/a/b").action, RequestAction::kAllow);
  EXPECT_EQ(p->match_request("api.github.com", "POST", "/gists").action, RequestAction::kAllow);
  auto wrong_path = p->match_request("api.github.com", "GET", "/user");
  EXPECT_EQ(wrong_path.action, RequestAction::kDeny);
  EXPECT_EQ(wrong_path.reason, "path not allowed");
  auto wrong_method = p->match_request("api.github.com", "DELETE", "/repos/a");
  EXPECT_EQ(wrong_method.action, RequestAction::kDeny);
  EXPECT_EQ(wrong_method.reason, "method not allowed");
  EXPECT_EQ(p->match_request("api.github.com", "POST", "/repos/a").reason, "path not allowed");
  EXPECT_EQ(p->match_request("evil.example.com", "GET", "/").reason, "deny rule 0 (evil.example.com)");
}

// A WebSocket handshake is allowed only by a rule that says so; the rule
// still allows ordinary requests, and the first rule that allows the
// handshake decides (its identity goes into it).
TEST(CompiledPolicy, WebSocketOnlyWhereARuleAllowsIt) {
  auto p = compile(R"({"policy":{"allow":[
      {"host":"ws.example","paths":["/plain/**"]},
      {"host":"ws.example","paths":["/ws/**"],"websocket":true},
      {"host":"ws.example","paths":["/**"],"methods":["GET"]},
      {"host":"ws.example","paths":["/late/**"],"websocket":true}]}})");
  EXPECT_EQ(p->match_request("ws.example", "GET", "/ws/a", true).action, RequestAction::kAllow);
  EXPECT_EQ(p->match_request("ws.example", "GET", "/ws/a", true).rule->index, 1u);
  EXPECT_EQ(p->match_request("ws.example", "GET", "/ws/a", false).action, RequestAction::kAllow);
  const RequestVerdict plain = p->match_request("ws.example", "GET", "/plain/a", true);
  EXPECT_EQ(plain.action, RequestAction::kDeny);
  EXPECT_EQ(plain.reason, "websocket not allowed");
  EXPECT_EQ(p->match_request("ws.example", "GET", "/plain/a", false).action, RequestAction::kAllow);
  // Past a rule that matches without allowing it, a later one may.
  EXPECT_EQ(p->match_request("ws.example", "GET", "/late/a", true).rule->index, 3u);
  EXPECT_EQ(p->match_request("ws.example", "GET", "/other", true).reason, "websocket not allowed");
  EXPECT_TRUE(p->match_host("ws.example").intercept);
}

TEST(CompiledPolicy, FirstMatchingRuleInPolicyOrderDecides) {
  auto p = compile(kPolicy);
  auto del = p->match_request("api.internal", "DELETE", "/x");
  EXPECT_EQ(del.action, RequestAction::kAsk);
  EXPECT_EQ(del.rule->index, 8u);
  EXPECT_EQ(p->match_request("api.internal", "GET", "/x").action, RequestAction::kAllow);
}

TEST(CompiledPolicy, IdentityRulesNeedInterception) {
  auto p = compile(kPolicy);
  auto v = p->match_host("api.stripe.com");
  EXPECT_TRUE(v.intercept);
  auto r = p->match_request("api.stripe.com", "GET", "/v1/charges");
  ASSERT_EQ(r.action, RequestAction::kAllow);
  EXPECT_EQ(r.rule->identity, "stripe");
}

TEST(CompiledPolicy, L4RulesAreTargetsAndNamesResolve) {
  auto p = compile(kPolicy);
  ASSERT_EQ(p->l4_targets().size(), 2u);
  EXPECT_EQ(p->l4_targets()[0].port, 5432);
  EXPECT_EQ(p->l4_targets()[0].rule->host.name, "db.internal");
  EXPECT_EQ(p->l4_targets()[1].rule->host.name, "198.18.0.0/24");
  EXPECT_TRUE(p->match_host("db.internal").allowed);  // DNS may answer it
  EXPECT_EQ(p->match_request("db.internal", "GET", "/").action, RequestAction::kDeny);
}

TEST(CompiledPolicy, InvalidNamesAreDenied) {
  auto p = compile(kPolicy);
  EXPECT_FALSE(p->match_host("").allowed);
  EXPECT_FALSE(p->match_host("api github.com").allowed);
  EXPECT_FALSE(p->match_host("a..npmjs.org").allowed);
  EXPECT_EQ(p->match_host(std::string("x\0.npmjs.org", 12)).reason, "invalid host name");
}

TEST(CompiledPolicy, IpLiteralsOnlyWhenNamed) {
  auto p = compile(R"({"policy":{"allow":[{"host":"198.18.0.10"}]}})");
  EXPECT_TRUE(p->match_host("198.18.0.10").allowed);
  EXPECT_FALSE(p->match_host("198.18.0.11").allowed);
  EXPECT_FALSE(p->match_host("169.254.169.254").allowed);
}

}  // namespace
}  // namespace zn::broker
