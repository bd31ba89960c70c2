// "identity": "jwt" through the broker's request verdict: the injection is
// a token minted for this request (session, upstream host, method, path)
// that verifies against zerod's published JWKS and fails for any other
// request shape; never over cleartext; a held request's token is minted for
// the held request once approved; no minter, no identity.
#include <gtest/gtest.h>

#include "broker/identity/jwt_verifier.h"
#include "broker/session/fake_directory.h"

namespace zn::broker::test {
namespace {

const std::string kJwtPolicy = R"({"policy":{"allow":[
    {"host":"api.stripe.com","identity":"jwt"},
    {"host":"api.github.com","methods":["DELETE"],"identity":"jwt","action":"ask"}]}})";

proxy::RequestFacts request(const std::string& host, const std::string& method, const std::string& path,
                            bool tls = true) {
  proxy::RequestFacts f;
  f.session = "s1";
  if (tls) f.sni = host;
  f.port = tls ? 443 : 80;
  f.host_header = host;
  f.method = method;
  f.path = path;
  return f;
}

std::string bearer_of(const proxy::Injection& i) {
  EXPECT_EQ(i.header, "Authorization");
  EXPECT_EQ(i.value.rfind("Bearer ", 0), 0u) << "no bearer";
  return i.value.substr(7);
}

class MintedIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override { b.sessions.put("s1", kJwtPolicy, 0); }
  VerifyResult verify(const std::string& token, const std::string& aud, const std::string& method,
                      const std::string& path) {
    return verify_jwt(token, minter->jwks(), {"zeroness-test", aud, method, path},
                      std::chrono::system_clock::now());
  }
  Broker b;
  std::shared_ptr<JwtMinter> minter = std::make_shared<JwtMinter>("zeroness-test");
  SessionProxyPolicy proxy{b.sessions, b.dns, b.resolver, b.audit, b.approvals, lab_guard(), {}, minter};
};

TEST_F(MintedIdentityTest, TheTokenIsForThisRequestOnly) {
  const proxy::RequestDecision d = proxy.decide_request(request("api.stripe.com", "POST", "/v1/charges"));
  ASSERT_TRUE(d.allow) << d.reason;
  ASSERT_TRUE(d.injection);
  const std::string token = bearer_of(*d.injection);
  // The token is scrubbed from responses like a static one.
  EXPECT_EQ(d.injection->scrub, std::vector<std::string>{token});
  EXPECT_TRUE(verify(token, "api.stripe.com", "POST", "/v1/charges").ok());
  EXPECT_FALSE(verify(token, "api.github.com", "POST", "/v1/charges").ok());
  EXPECT_FALSE(verify(token, "api.stripe.com", "GET", "/v1/charges").ok());
  EXPECT_FALSE(verify(token, "api.stripe.com", "POST", "/v1/refunds").ok());
  // A second request gets its own token.
  const proxy::RequestDecision again = proxy.decide_request(request("api.stripe.com", "POST", "/v1/charges"));
  ASSERT_TRUE(again.injection);
  EXPECT_NE(bearer_of(*again.injection), token);
  EXPECT_EQ(d.rule->identity, "minted:jwt");  // the pool key and the audit's name for it
}

TEST_F(MintedIdentityTest, NeverOverCleartext) {
  const proxy::RequestDecision d = proxy.decide_request(request("api.stripe.com", "GET", "/", false));
  EXPECT_FALSE(d.allow);
  EXPECT_EQ(d.reason, "identity is never sent over cleartext");
  EXPECT_FALSE(d.injection);
}

TEST_F(MintedIdentityTest, AHeldRequestIsMintedForItselfOnceApproved) {
  const proxy::RequestDecision d = proxy.decide_request(request("api.github.com", "DELETE", "/repos/a/b"));
  ASSERT_TRUE(d.allow) << d.reason;
  EXPECT_NE(d.hold_ticket, 0u);
  EXPECT_FALSE(d.injection);  // not before a person decides
  ASSERT_TRUE(b.approvals.decide(d.hold_ticket, true));
  std::optional<proxy::Injection> i = proxy.injection_for("s1", *d.rule);
  ASSERT_TRUE(i);
  const std::string token = bearer_of(*i);
  EXPECT_TRUE(verify(token, "api.github.com", "DELETE", "/repos/a/b").ok());
  EXPECT_FALSE(verify(token, "api.github.com", "DELETE", "/repos/a/c").ok());
}

TEST_F(MintedIdentityTest, WithoutAMinterTheIdentityIsUnavailable) {
  SessionProxyPolicy no_minter{b.sessions, b.dns, b.resolver, b.audit, b.approvals, lab_guard()};
  const proxy::RequestDecision d = no_minter.decide_request(request("api.stripe.com", "GET", "/"));
  EXPECT_FALSE(d.allow);
  EXPECT_EQ(d.reason, "identity unavailable");
  // The positive control: the same request with the minter.
  EXPECT_TRUE(proxy.decide_request(request("api.stripe.com", "GET", "/")).allow);
}

}  // namespace
}  // namespace zn::broker::test
