// Issue 9, class 4, end to end: request targets that some mainstream backend
// would route outside the path the policy matched (Tomcat's "..;", IIS's
// double decoding and trailing dots, overlong UTF-8, best-fit Unicode...)
// are refused by zerod before any byte goes upstream, and the identity it
// would inject never leaves. Real curl and openssl s_client in the guest;
// the echo upstreams log every request that reached them. The session's
// policy: api.github.com GET /repos/**; api.stripe.com identity cap:stripe.
#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

class PathEscapeTest : public ProxyTest {
 protected:
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
    ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
  }
  // One request with exactly these target bytes over TLS to the host's
  // address; what came back.
  std::string get(const std::string& host, const std::string& ip, const std::string& target) {
    const fs::path f = dir_ / ("raw-" + std::to_string(raw_count_++));
    std::ofstream(f, std::ios::binary)
        << "GET " << target << " HTTP/1.1\r\nHost: " << host << "\r\nConnection: close\r\n\r\n";
    return guest("timeout 10 openssl s_client -quiet -CAfile " + p("guest-trust.pem") + " -connect " + ip +
                 ":443 -servername " + host + " < " + f.string() + " 2>/dev/null")
        .output;
  }
  int raw_count_ = 0;
};

// Targets inside /repos/** as sent, that a backend would route elsewhere.
const char* const kHostileUnderRepos[] = {
    "/repos/..;/admin",                         // Tomcat, Jetty, Spring: ".."
    "/repos/%2e%2e;/admin",                     // decoded then stripped
    "/repos/.%2E;x=1/admin",                    //
    "/repos/x/..;jsessionid=1/../admin",        //
    "/repos/x/..%3B/admin",                     // encoded parameter (Jetty)
    "/repos/a%252e%252e/",                      // double decoding
    "/repos/%252e%252e%252fadmin",              //
    "/repos/%25%32%65%25%32%65/admin",          // double escape built from decoded ones
    "/repos/%u002e%u002e/admin",                // IIS %u
    "/repos/..%5Cadmin",                        // encoded backslash
    "/repos/%C0%AE%C0%AE/admin",                // overlong '.'
    "/repos/..%C0%AFadmin",                     // overlong '/'
    "/repos/%E0%80%AE%E0%80%AE/admin",          // 3-byte overlong '.'
    "/repos/%80/admin",                         // lone continuation byte
    "/repos/%ED%A0%80/admin",                   // surrogate
    "/repos/%EF%BC%8E%EF%BC%8E%EF%BC%8Fadmin",  // fullwidth "../"
    "/repos/..%E2%88%95admin",                  // U+2215 division slash
    "/repos/..%C2%A5admin",                     // U+00A5: '\' in cp932
    "/repos/..%0D%0A/admin",                    // encoded controls
    "/repos/..%C2%85/admin",                    // C1 (NEL)
    "/repos/..%20/admin",                       // Windows strips trailing spaces
    "/repos/.../admin",                         // ... and dots
    "/repos/admin.",                            //
};

TEST_F(PathEscapeTest, AmbiguousTargetsAre400AndNeverReachTheUpstream) {
  for (const char* target : kHostileUnderRepos) {
    const std::string got = get("api.github.com", "198.18.0.10", target);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 400") << target << ": " << got;
    EXPECT_NE(got.find("zeroness: bad request ("), std::string::npos) << target << ": " << got;
  }
  // Real curl, as a client would send them (--path-as-is keeps the dots).
  for (const char* url :
       {"'https://api.github.com/repos/..;/admin'", "'https://api.github.com/repos/%2e%2e;/admin'",
        "'https://api.github.com/repos/x/..%3B/admin'", "'https://api.github.com/repos/a%252e%252e/'"}) {
    const auto r = curl(std::string("--path-as-is -w '\\n%{http_code}' ") + url);
    EXPECT_TRUE(r.output.ends_with("\n400")) << url << ": " << r.output;
  }
  // Merged slashes are collapsed before dot segments: what nginx routes to
  // "/admin" is matched as "/admin" and refused by policy.
  std::string got = get("api.github.com", "198.18.0.10", "/repos//..//admin");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 403") << got;
  EXPECT_NE(got.find("path not allowed"), std::string::npos) << got;
  EXPECT_EQ(upstream_log(), "");

  // Positive controls on the same connection kind: allowed paths go through,
  // a merged slash forwarded collapsed, '?' encoded staying in the path, and
  // a query with ';' (not a path parameter) untouched.
  got = get("api.github.com", "198.18.0.10", "/repos/zn/zeroness");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got;
  got = get("api.github.com", "198.18.0.10", "/repos//zn//caf%c3%a9");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got;
  got = get("api.github.com", "198.18.0.10", "/repos/a%3Fb?x=1;y=2");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got;
  const std::string log = upstream_log();
  EXPECT_EQ(count(log, "\"method\": \"GET\""), 3u) << log;
  EXPECT_NE(log.find("\"target\": \"/repos/zn/zeroness\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"target\": \"/repos/zn/caf%C3%A9\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"target\": \"/repos/a%3Fb?x=1;y=2\""), std::string::npos) << log;
  EXPECT_EQ(log.find("admin"), std::string::npos) << log;
  EXPECT_EQ(log.find(";/"), std::string::npos) << log;
  // Each refusal is audited with the reason, like any bad request.
  const std::string events =
      egress_events({"path parameter", "double-encoded escape", "invalid UTF-8 in path"});
  EXPECT_NE(events.find("path parameter"), std::string::npos) << events;
  EXPECT_NE(events.find("double-encoded escape"), std::string::npos) << events;
  EXPECT_NE(events.find("invalid UTF-8 in path"), std::string::npos) << events;
}

// Where zerod injects an identity there is no path rule at all: the class is
// about where the backend routes a credential. Nothing ambiguous goes up, so
// the key never reaches a route the request did not name.
TEST_F(PathEscapeTest, AnInjectedIdentityIsNeverSentWithAnAmbiguousTarget) {
  for (const char* target :
       {"/v1/..;/admin", "/v1/%2e%2e;/admin", "/v1/x/..%3B/admin", "/v1/%252e%252e/admin",
        "/v1/%C0%AE%C0%AE/admin", "/v1/..%EF%BC%8Fadmin", "/v1/..%20/admin", "/v1/admin."}) {
    const std::string got = get("api.stripe.com", "198.18.0.11", target);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 400") << target << ": " << got;
  }
  EXPECT_EQ(upstream_log(), "");
  // Positive control: the same host with a plain target gets the identity.
  const std::string got = get("api.stripe.com", "198.18.0.11", "/v1/charges?expand=a;b");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got;
  const std::string log = upstream_log();
  EXPECT_EQ(count(log, "\"method\": \"GET\""), 1u) << log;
  EXPECT_EQ(count(log, std::string("\"Bearer ") + kSecret + "\""), 1u) << log;
  EXPECT_NE(log.find("\"target\": \"/v1/charges?expand=a;b\""), std::string::npos) << log;
}

}  // namespace
}  // namespace zn::test
