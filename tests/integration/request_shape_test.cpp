// What a guest may not shape in a request (issue 30): where a scrubbed
// response is cut, header names a backend reads as other fields, and a body
// coded past the screen. A real zerod, curl in a lab guest; nginx (which
// serves byte ranges) and the echo upstreams on the stand-in internet.
//   - ranges: on a connection whose responses are scrubbed no Range,
//     If-Range or Request-Range goes upstream, and a partial response (206,
//     Content-Range, multipart/byteranges) is refused (502);
//   - names with anything but letters, digits and '-' never go on;
//   - a body with a content coding is screened decoded (gzip, deflate,
//     stacked), bounded (413), or refused when it cannot be read (415).
// Each refusal has its positive control: ranges pass on a session with no
// secret; honest names and coded bodies without a tripwire go through.
#include <zlib.h>

#include <cstring>
#include <functional>

#include "integration/proxy_fixture.h"
#include "support/deflated.h"

namespace zn::test {
namespace {

constexpr const char* kShapeCanary = "AKIAZNCANARY00077";
// The file nginx serves: the secret at a known offset between markers.
const std::string kBefore = "0123456789-before-";
const std::string kAfter = "-after-abcdefghij\n";

std::string shape_policy(bool with_secret) {
  std::string allow = R"({"host":"ranges.example","paths":["/open/**"]},
      {"host":"api.stripe.com","paths":["/open/**"]})";
  if (with_secret)
    allow += R"(,{"host":"ranges.example","paths":["/s/**"],"identity":"cap:stripe"},
      {"host":"api.stripe.com","paths":["/hdr/**"],"identity":"cap:stripe","inject":{"header":"X-Api-Key"}})";
  std::string out = R"({"policy":{"allow":[)" + allow + "]}";
  if (with_secret) out += std::string(R"(,"resources":{"stripe":{"accessToken":")") + kSecret + R"("}})";
  return out + R"(,"canaries":[")" + kShapeCanary + R"("]})";
}

class RequestShapeTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    issue_upstream_cert("ranges.example");
    config["dns_static"]["ranges.example"] = {"198.18.0.16"};
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(run_in_netns(lab_->inet_netns(), "ip addr add 198.18.0.16/32 dev lo").exit_code, 0);
    const fs::path root = pki_ / "www";
    for (const char* d : {"s", "open"}) {
      fs::create_directories(root / d);
      std::ofstream(root / d / "file.txt") << kBefore << kSecret << kAfter;
    }
    // Every range field the server received, to show what went on.
    start_nginx("nginx",
                "  log_format fields '$uri range=[$http_range] if_range=[$http_if_range] "
                "request_range=[$http_request_range]';\n"
                "  server {\n    listen 198.18.0.16:443 ssl http2;\n    ssl_certificate " +
                    p("ranges.example.pem") + ";\n    ssl_certificate_key " + p("ranges.example.key") +
                    ";\n    access_log " + (pki_ / "nginx" / "fields.log").string() + " fields;\n    root " +
                    root.string() + ";\n  }\n",
                "198.18.0.16 443");
    if (HasFatalFailure()) return;
    use_policy(true);
    ASSERT_EQ(dig("ranges.example"), "198.18.0.16\n");
  }
  void use_policy(bool with_secret) {
    json r = call("session.update", {{"id", "user-1"}, {"policy", shape_policy(with_secret)}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }
  std::string fields_log() { return slurp(pki_ / "nginx" / "fields.log"); }
  // Writes `bytes` where the guest can read it (the lab guest shares the
  // file system) and returns its path.
  std::string file(const std::string& name, const std::string& bytes) {
    const fs::path f = dir_ / name;
    std::ofstream(f, std::ios::binary) << bytes;
    return f.string();
  }
  // curl's status line (http_code) for a POST of `path`'s bytes with
  // `coding` as its Content-Encoding.
  std::string post_coded(const std::string& path, const std::string& coding, const std::string& version) {
    return curl(version + " -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' " +
                (coding.empty() ? "" : "-H 'Content-Encoding: " + coding + "' ") + "--data-binary @" + path +
                " https://api.stripe.com/open/upload")
        .output;
  }
};

// Where responses are scrubbed the guest cannot choose the cut: whatever it
// asks for, in either protocol, it gets the whole file, the secret redacted,
// and nginx never saw a range field.
TEST_F(RequestShapeTest, ARangeNeverGoesWhereResponsesAreScrubbed) {
  const size_t whole = kBefore.size() + std::strlen(kSecret) + kAfter.size();
  for (const std::string version : {"--http1.1", "--http2"}) {
    for (const std::string ask :
         {"-r 20-30", "-r 0-9,25-40", "-H 'Range: bytes=22-'", "-H 'range: bytes=-20'",
          "-H 'Request-Range: bytes=20-30'", "-H 'If-Range: x' -r 20-30", "-H 'Range: bytes=20-20, 21-21'"}) {
      for (const char* path : {"/s/file.txt", "/open/file.txt"}) {
        auto r = curl(version + " -D - " + ask + " https://ranges.example" + path);
        ASSERT_EQ(r.exit_code, 0) << ask << r.output;
        EXPECT_NE(r.output.find(" 200"), std::string::npos) << version << " " << ask << "\n" << r.output;
        EXPECT_EQ(r.output.find("ontent-range"), std::string::npos) << ask << "\n" << r.output;
        EXPECT_EQ(r.output.find(kSecret), std::string::npos) << ask;
        // The whole file, the secret's bytes replaced one for one.
        const std::string body = r.output.substr(r.output.find("\r\n\r\n") + 4);
        ASSERT_EQ(body.size(), whole) << ask << "\n" << body;
        EXPECT_EQ(body.substr(0, kBefore.size()), kBefore);
        EXPECT_EQ(body.substr(body.size() - kAfter.size()), kAfter);
      }
    }
  }
  const std::string log = fields_log();
  EXPECT_EQ(count(log, "range=[-] if_range=[-] request_range=[-]"), 28u) << log;
}

// An upstream that cuts a response itself is refused where responses are
// scrubbed: nothing of a part reaches the guest.
TEST_F(RequestShapeTest, APartialResponseIsRefusedWhereResponsesAreScrubbed) {
  for (const std::string version : {"--http1.1", "--http2"})
    for (const char* variant : {"206", "multi", "range200"})
      for (const char* path : {"/hdr/partial/", "/open/partial/"}) {
        auto r = curl(version + " -w '\\n%{http_code}' https://api.stripe.com" + std::string(path) + variant);
        EXPECT_EQ(r.output.substr(r.output.rfind('\n') + 1), "502") << path << variant << "\n" << r.output;
        EXPECT_EQ(r.output.find("Content-Range"), std::string::npos) << r.output;
        EXPECT_EQ(r.output.find("zn-parts"), std::string::npos) << r.output;
      }
}

// Positive control of both: on a session with no secret (nothing is
// scrubbed), the same ranges reach nginx and the parts reach the guest.
TEST_F(RequestShapeTest, WithoutASecretRangesAndPartsPass) {
  use_policy(false);
  auto r = curl("--http2 -D - -r 18-21 https://ranges.example/open/file.txt");
  EXPECT_NE(r.output.find(" 206"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.substr(r.output.find("\r\n\r\n") + 4), std::string(kSecret).substr(0, 4));
  r = curl("--http1.1 -D - -r 0-3,18-21 https://ranges.example/open/file.txt");
  EXPECT_NE(r.output.find("multipart/byteranges"), std::string::npos) << r.output;
  r = curl("--http1.1 -H 'Request-Range: bytes=1-2' -H 'If-Range: x' https://ranges.example/open/file.txt");
  EXPECT_NE(fields_log().find("range=[-] if_range=[x] request_range=[bytes=1-2]"), std::string::npos)
      << fields_log();
  for (const char* variant : {"206", "multi", "range200"}) {
    r = curl("--http1.1 -w '\\n%{http_code}' https://api.stripe.com/open/partial/" + std::string(variant));
    EXPECT_EQ(r.output.substr(r.output.rfind('\n') + 1), variant == std::string("range200") ? "200" : "206")
        << r.output;
  }
}

// A backend that maps '-' and '_' (and more) to one variable must not get
// a second framing, routing or credential field: such names are dropped in
// both protocols; honest names go on beside the injected one.
TEST_F(RequestShapeTest, HeaderNamesABackendCouldReadAsAnotherAreDropped) {
  for (const std::string version : {"--http1.1", "--http2"}) {
    auto r = curl(version +
                  " -o /dev/null -w '%{http_code}' -H 'X_Api_Key: guest-one' -H 'x_api_key: guest-two' "
                  "-H 'X.Api.Key: guest-three' -H 'Content_Length: 5' -H 'Transfer_Encoding: chunked' "
                  "-H 'X~Forwarded~For: 10.0.0.1' -H 'Authorization_: guest-four' -H 'X-Kept-" +
                  (version == "--http2" ? "h2" : "h1") +
                  ": yes' -H 'X-Api-Key-Extra: kept' https://api.stripe.com/hdr/v1");
    EXPECT_EQ(r.output, "200") << version;
  }
  const std::string log = upstream_log();
  for (const char* gone :
       {"X_Api_Key", "x_api_key", "X.Api.Key", "Content_Length", "Transfer_Encoding", "X~Forwarded~For",
        "Authorization_", "guest-one", "guest-two", "guest-three", "guest-four", "10.0.0.1"})
    EXPECT_EQ(log.find(gone), std::string::npos) << gone << "\n" << log;
  EXPECT_NE(log.find("X-Kept-h1"), std::string::npos) << log;
  EXPECT_NE(log.find("x-kept-h2"), std::string::npos) << log;
  EXPECT_EQ(count(log, "X-Api-Key-Extra") + count(log, "x-api-key-extra"), 2u) << log;
  EXPECT_EQ(count(log, std::string("\"") + kSecret + "\""), 2u) << log;  // the injected X-Api-Key
}

// A tripwire in a coded body is found as the upstream would decode it, in
// each coding and both protocols; what cannot be decoded, or decodes too
// far, does not go.
TEST_F(RequestShapeTest, ACodedBodyIsScreenedAsTheUpstreamWillReadIt) {
  const std::string with = std::string("{\"k\":\"") + kShapeCanary + "\"}";
  const std::string without = "{\"k\":\"nothing planted here\"}";
  const std::vector<std::pair<std::string, std::function<std::string(const std::string&)>>> codings = {
      {"gzip", [](const std::string& b) { return deflated(b, 31); }},
      {"x-gzip", [](const std::string& b) { return deflated(b, 31); }},
      {"deflate", [](const std::string& b) { return deflated(b, 15); }},
      {"deflate", [](const std::string& b) { return deflated(b, -15); }},
      {"gzip, gzip", [](const std::string& b) { return deflated(deflated(b, 31), 31); }},
      {"deflate, gzip", [](const std::string& b) { return deflated(deflated(b, 15), 31); }},
      {"GZip", [](const std::string& b) { return deflated(b, 31) + deflated(" ", 31); }},
  };
  int i = 0;
  for (const std::string version : {"--http1.1", "--http2"})
    for (const auto& [coding, encode] : codings) {
      const std::string n = std::to_string(i++);
      // Positive control first: the same coding without the canary passes.
      EXPECT_EQ(post_coded(file("clean" + n, encode(without)), coding, version), "200") << coding;
      EXPECT_EQ(post_coded(file("canary" + n, encode(with)), coding, version), "403") << coding << version;
    }
  EXPECT_EQ(post_coded(file("plain", with), "", "--http1.1"), "403");
  // br and zstd (and any coding the proxy does not read) cannot be screened.
  for (const char* c : {"br", "zstd", "compress", "gzip, br"})
    EXPECT_EQ(post_coded(file("opaque", deflated(without, 31)), c, "--http1.1"), "415") << c;
  // A bomb (64 MiB of zeros), a coded body past the read bound, corrupt bytes.
  EXPECT_EQ(post_coded(file("bomb", deflated(std::string(64 << 20, '\0'), 31)), "gzip", "--http1.1"), "413");
  std::string noise(1536 << 10, '\0');
  uint32_t x = 1;
  for (char& c : noise) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
  EXPECT_EQ(post_coded(file("big", deflated(noise, 31)), "gzip", "--http1.1"), "413");
  EXPECT_EQ(post_coded(file("corrupt", "\x1f\x8b not really gzip"), "gzip", "--http2"), "400");
  const std::string alarms = audit_events("secret:canary", {"secret:canary"});
  EXPECT_GE(count(alarms, "secret:canary"), 15u) << alarms;
}

}  // namespace
}  // namespace zn::test
