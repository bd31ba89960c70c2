// The broker's side of where credentials go (issue 12), over a fake session
// directory with the real audit: the injection each placement makes, the
// placeholder swap offered only for its own rule, the tripwires a
// connection is screened for, canaries in an SNI or a DNS name, and the
// alarms the proxy's hits become.
#include <gtest/gtest.h>

#include "broker/session/canary_names.h"
#include "broker/session/fake_directory.h"
#include "broker/session/placeholders.h"

namespace zn::broker::test {
namespace {

constexpr const char* kUsePolicy = R"({"policy":{"allow":[
    {"host":"api.stripe.com","paths":["/hdr/**"],"identity":"cap:stripe","inject":{"header":"X-Api-Key"}},
    {"host":"api.stripe.com","paths":["/tok/**"],"identity":"cap:stripe",
     "inject":{"header":"Authorization","prefix":"token "}},
    {"host":"api.stripe.com","paths":["/basic/**"],"identity":"cap:jira"},
    {"host":"api.stripe.com","paths":["/q/**"],"identity":"cap:stripe","inject":{"query":"key"}},
    {"host":"api.stripe.com","paths":["/jwt/**"],"identity":"jwt","inject":{"header":"X-Zn-Token","prefix":""}},
    {"host":"api.github.com"}]},
  "resources":{"stripe":{"kind":"token","token":"sk_unit_placement_1","placeholder":"STRIPE_KEY"},
               "jira":{"kind":"basic","user":"bot","password":"pw:1"}},
  "canaries":["AKIAZNCANARY00001"]})";

proxy::RequestFacts request(const std::string& host, const std::string& path, bool first = false) {
  proxy::RequestFacts f;
  f.session = "s1";
  f.sni = host;
  f.port = 443;
  f.host_header = host;
  f.method = "GET";
  f.path = path;
  f.want_session_secrets = first;
  return f;
}

struct SecretUse : ::testing::Test {
  void SetUp() override { b.sessions.put("s1", kUsePolicy, 0); }
  proxy::RequestDecision decide(const std::string& host, const std::string& path, bool first = false) {
    return b.proxy.decide_request(request(host, path, first));
  }
  std::string placeholder() { return b.sessions.get("s1")->record.placeholders.at("stripe"); }
  Broker b;
};

TEST_F(SecretUse, EachPlacementInjectsWhereItSays) {
  auto injection = [&](const std::string& path) {
    proxy::RequestDecision d = decide("api.stripe.com", path);
    EXPECT_TRUE(d.allow) << path << ": " << d.reason;
    return d.injection.value_or(proxy::Injection{});
  };
  proxy::Injection i = injection("/hdr/a");
  EXPECT_EQ(i.header, "X-Api-Key");
  EXPECT_TRUE(i.value == "sk_unit_placement_1");
  EXPECT_FALSE(i.query);
  i = injection("/tok/a");
  EXPECT_EQ(i.header, "Authorization");
  EXPECT_TRUE(i.value == "token sk_unit_placement_1");
  i = injection("/basic/a");
  EXPECT_TRUE(i.value == "Basic Ym90OnB3OjE=");  // bot:pw:1
  ASSERT_EQ(i.scrub.size(), 1u);
  EXPECT_TRUE(i.scrub[0] == "pw:1");  // the password is what must not come back
  i = injection("/q/a");
  EXPECT_TRUE(i.query);
  EXPECT_EQ(i.header, "key");
  EXPECT_TRUE(i.value == "sk_unit_placement_1");
  EXPECT_FALSE(decide("api.github.com", "/x").injection);  // positive control: no identity, none injected
}

TEST_F(SecretUse, APlaceholderIsOfferedForSwappingOnlyUnderItsOwnRule) {
  const std::string ph = placeholder();
  EXPECT_EQ(ph.rfind("zn_ph_", 0), 0u);
  EXPECT_EQ(ph.size(), 6u + 32u);
  proxy::RequestDecision own = decide("api.stripe.com", "/hdr/a");
  ASSERT_EQ(own.substitutions.size(), 1u);
  EXPECT_EQ(own.substitutions[0].placeholder, ph);
  EXPECT_TRUE(own.substitutions[0].credential == "sk_unit_placement_1");
  EXPECT_EQ(own.substitutions[0].label, "placeholder:stripe");
  EXPECT_TRUE(decide("api.stripe.com", "/basic/a").substitutions.empty());  // another resource's rule
  EXPECT_TRUE(decide("api.github.com", "/x").substitutions.empty());
  // The tripwires, with the first request of a connection, allowed or not.
  proxy::RequestDecision first = decide("api.github.com", "/x", true);
  ASSERT_EQ(first.tripwires.size(), 3u);  // the canary as planted and in lower case; the placeholder
  EXPECT_EQ(first.tripwires[0].label, "canary:0");
  EXPECT_EQ(first.tripwires[1].pattern, "akiazncanary00001");
  EXPECT_EQ(first.tripwires[1].label, "canary:0");
  EXPECT_EQ(first.tripwires[2].pattern, ph);
  EXPECT_EQ(decide("evil.example", "/x", true).tripwires.size(), 3u);
  EXPECT_TRUE(decide("api.github.com", "/x").tripwires.empty());
  // A policy update keeps a running guest's placeholder.
  b.sessions.put("s1", kUsePolicy, 0);
  EXPECT_EQ(placeholder(), ph);
}

TEST_F(SecretUse, TripwireHitsBecomeAlarms) {
  const size_t from = b.records().size();
  b.proxy.on_tripwire({"s1", "api.github.com", "POST", "/x", {"canary:0", "placeholder:stripe"}, {"body"}});
  const auto records = b.records();
  ASSERT_EQ(records.size(), from + 2);
  EXPECT_EQ(records[from].event, "secret:canary");
  EXPECT_EQ(records[from].detail["canary"], nlohmann::json::array({0}));
  EXPECT_EQ(records[from].detail["where"], nlohmann::json::array({"body"}));
  EXPECT_EQ(records[from + 1].event, "secret:misuse");
  EXPECT_EQ(records[from + 1].detail["resource"], nlohmann::json::array({"stripe"}));
  EXPECT_EQ(b.audit.stats().secret_canary, 1u);
  EXPECT_EQ(b.audit.stats().secret_misuse, 1u);
}

TEST_F(SecretUse, ACanaryInTheSniResetsTheConnection) {
  auto facts = [](const std::string& sni) {
    proxy::ConnectionFacts f;
    auto* g = reinterpret_cast<sockaddr_in*>(&f.guest);
    g->sin_family = AF_INET;
    inet_pton(AF_INET, "198.19.0.2", &g->sin_addr);
    auto* d = reinterpret_cast<sockaddr_in*>(&f.original_dst);
    d->sin_family = AF_INET;
    d->sin_port = htons(443);
    inet_pton(AF_INET, "198.18.0.10", &d->sin_addr);
    f.tls = true;
    f.sni = sni;
    return f;
  };
  EXPECT_EQ(b.proxy.decide(facts("akiazncanary00001.api.github.com")).mode, proxy::ConnectionMode::kReset);
  EXPECT_EQ(b.records().back().event, "egress:deny");
  EXPECT_EQ(b.audit.stats().secret_canary, 1u);
  // Positive control: a name without it is intercepted (its rules inject).
  EXPECT_EQ(b.proxy.decide(facts("api.stripe.com")).mode, proxy::ConnectionMode::kIntercept);
}

TEST_F(SecretUse, ACanaryInADnsNameIsRefused) {
  EXPECT_FALSE(b.dns.decide({"s1", nullptr}, "AKIAZNCANARY00001.api.github.com").allow);
  EXPECT_FALSE(b.dns.decide({"s1", nullptr}, "akia-zn.canary00001.api.github.com").allow);
  EXPECT_TRUE(b.dns.decide({"s1", nullptr}, "api.github.com").allow);  // positive control
  EXPECT_EQ(b.audit.stats().secret_canary, 2u);
}

TEST(CanaryNames, FoldedHexAndBase32FormsAreFound) {
  const std::vector<std::string> canaries = {"AKIAZNCANARY00001", "sk-live-canary-22"};
  EXPECT_EQ(canary_in_name(canaries, "akiazncanary00001.evil.example"), 0u);
  EXPECT_EQ(canary_in_name(canaries, "AKIA.ZN.CANARY.00001.evil.example"), 0u);
  EXPECT_EQ(canary_in_name(canaries, "x.sklivecanary22.evil.example"), 1u);
  // hex("sk-live-canary-22") split across labels
  EXPECT_EQ(canary_in_name(canaries, "736b2d6c6976652d63.616e6172792d3232.evil.example"), 1u);
  // base32("AKIAZNCANARY00001"), lowercase
  EXPECT_EQ(canary_in_name(canaries, "iffusqk2jzbuctsbkjmtambqgayq.evil.example"), 0u);
  EXPECT_FALSE(canary_in_name(canaries, "akiazncanary00002.evil.example"));
  EXPECT_FALSE(canary_in_name(canaries, "api.github.com"));
  EXPECT_FALSE(canary_in_name({}, "akiazncanary00001"));
}

TEST(Placeholders, KeptForResourcesThatStillAskMadeForNewOnes) {
  Policy p = parse_policy(R"({"policy":{},"resources":{
      "a":{"kind":"token","token":"t1","placeholder":"A_KEY"},
      "b":{"kind":"token","token":"t2","placeholder":"B_KEY"},
      "c":{"kind":"token","token":"t3"}}})");
  auto first = assign_placeholders(p, {});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_NE(first["a"], first["b"]);
  for (const auto& [name, ph] : first) {
    EXPECT_EQ(ph.rfind("zn_ph_", 0), 0u);
    EXPECT_EQ(ph.find_first_not_of("abcdefghijklmnopqrstuvwxyz234567", 6), std::string::npos) << ph;
  }
  auto again = assign_placeholders(p, {{"a", first["a"]}, {"gone", "zn_ph_old"}});
  EXPECT_EQ(again["a"], first["a"]);
  EXPECT_NE(again["b"], first["b"]);
  EXPECT_EQ(again.count("gone"), 0u);
}

}  // namespace
}  // namespace zn::broker::test
