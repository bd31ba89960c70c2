// HTTP/2 to upstreams (issue 17): intercepted requests offer ALPN "h2" to a
// TLS upstream, and one that chooses it gets each request as a stream
// (h2_upstream_leg.h), whatever the guest spoke. The upstream here is a
// real one: nginx serving HTTP/2 on h2.example (198.18.0.15:443), passing
// every request on to the lab's echo server (which logs it), and saying in
// response headers which protocol and which of its connections carried it.
#include <set>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

class Http2UpstreamTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    issue_upstream_cert("h2.example");
    config["dns_static"]["h2.example"] = {"198.18.0.15"};
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string inet = lab_->inet_netns();
    ASSERT_EQ(run_in_netns(inet, "ip addr add 198.18.0.15/32 dev lo").exit_code, 0);
    start_nginx("nginx",
                "  server {\n    listen 198.18.0.15:443 ssl http2;\n    ssl_certificate " +
                    p("h2.example.pem") + ";\n    ssl_certificate_key " + p("h2.example.key") +
                    ";\n    client_max_body_size 16m;\n    location / {\n"
                    "      proxy_pass http://198.18.0.10:80;\n      proxy_http_version 1.1;\n"
                    "      proxy_request_buffering off;\n      proxy_buffering off;\n"
                    "      add_header X-Upstream-Proto $server_protocol always;\n"
                    "      add_header X-Upstream-Conn $connection always;\n    }\n  }\n",
                "198.18.0.15 443");
    if (HasFatalFailure()) return;
    json r = call("session.update", {{"id", "user-1"}, {"policy", h2_policy()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    ASSERT_EQ(dig("h2.example"), "198.18.0.15\n");
  }
  static std::string h2_policy() {
    return std::string(R"({"policy":{"allow":[
        {"host":"h2.example","paths":["/v1/**"],"identity":"cap:stripe"},
        {"host":"h2.example","paths":["/open/**"]}]},
      "resources":{"stripe":{"accessToken":")") +
           kSecret + R"("}}})";
  }
};

// An HTTP/1.1 guest and an HTTP/2 guest, both served over HTTP/2 upstream:
// the identity injected into the stream, two requests of one guest
// connection on one upstream connection, one after the other.
TEST_F(Http2UpstreamTest, RequestsGoAsStreamsWithTheIdentity) {
  for (const std::string version : {"--http1.1", "--http2"}) {
    // --next starts afresh: each part names the trust again.
    const std::string one =
        version + " --cacert " + p("guest-trust.pem") + " -s -o /dev/null -D - -w '%{http_code}\\n' ";
    auto r = curl(one + "https://h2.example/v1/a --next " + one + "https://h2.example/v1/c --next " + one +
                  "https://h2.example/open/b");
    EXPECT_EQ(count(r.output, "\n200\n"), 3u) << r.output;
    EXPECT_EQ(count(r.output, "x-upstream-proto: HTTP/2.0"), 3u) << version << "\n" << r.output;
    // The same nginx connection carried both requests with the identity
    // (the one without it had a connection of its own).
    const size_t first = r.output.find("x-upstream-conn: ");
    ASSERT_NE(first, std::string::npos) << r.output;
    const std::string conn = r.output.substr(first, r.output.find('\n', first) - first);
    EXPECT_EQ(count(r.output, conn), 2u) << r.output;
  }
  const std::string log = upstream_log();
  EXPECT_EQ(count(log, std::string("\"Bearer ") + kSecret + "\""), 4u) << log;
  EXPECT_NE(log.find("/open/b"), std::string::npos) << log;
  // The open path's requests went without it.
  const size_t open = log.find("/open/b");
  const std::string line =
      log.substr(log.rfind('\n', open) + 1, log.find('\n', open) - log.rfind('\n', open) - 1);
  EXPECT_EQ(line.find("Authorization"), std::string::npos) << line;
}

// Bodies beyond the stream windows both ways, with and without a length;
// a reflected secret scrubbed from a response that came over HTTP/2.
TEST_F(Http2UpstreamTest, BodiesAndScrubbing) {
  const fs::path up = dir_ / "up.bin";
  {
    std::ofstream f(up, std::ios::binary);
    for (int i = 0; i < 300000; ++i) f.put(static_cast<char>('a' + i % 26));
  }
  auto r = curl(
      "--http1.1 -s -o /dev/null -w '%{http_code} %{size_download}' https://h2.example/v1/bytes/3000000");
  EXPECT_EQ(r.output, "200 3000000");
  r = curl("--http1.1 -s -w '%{http_code}' -o /dev/null --data-binary @" + up.string() +
           " https://h2.example/v1/upload");
  EXPECT_EQ(r.output, "200");
  r = curl("--http1.1 -s -w '%{http_code}' -o /dev/null -H 'Transfer-Encoding: chunked' --data-binary @" +
           up.string() + " https://h2.example/v1/chunked-upload");
  EXPECT_EQ(r.output, "200");
  const std::string log = upstream_log();
  EXPECT_NE(log.find("/v1/upload"), std::string::npos);
  EXPECT_NE(log.find("/v1/chunked-upload"), std::string::npos);
  EXPECT_EQ(count(log, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"), 2u * 300000 / 52)
      << log.size();
  r = curl("--http1.1 -s https://h2.example/v1/reflect/cl");
  EXPECT_EQ(r.output.find(kSecret), std::string::npos);
  EXPECT_GT(r.output.size(), 200u) << r.output;
  EXPECT_NE(audit_events("secret:reflected", {"secret:reflected"}).find("secret:reflected"),
            std::string::npos);
}

// Streams of an HTTP/2 guest started together share one upstream connection
// (h2_upstream_connection.h): the burst waits for the first connect of its
// session, host and identity and takes streams of it, instead of opening a
// connection each. Each request still carries the identity.
TEST_F(Http2UpstreamTest, ConcurrentStreamsShareOneUpstreamConnection) {
  // The nginx connections that carried a burst of `n` streams to `path`.
  const auto burst = [&](const std::string& path, int n) {
    std::string uris;
    for (int i = 0; i < n; ++i) uris += " https://h2.example" + path + std::to_string(i);
    const auto r = guest("nghttp -n -v --no-verify-peer" + uris + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(count(r.output, ":status: 200"), static_cast<size_t>(n)) << r.output;
    std::set<std::string> connections;
    for (size_t at = r.output.find("x-upstream-conn: "); at != std::string::npos;
         at = r.output.find("x-upstream-conn: ", at + 1))
      connections.insert(r.output.substr(at, r.output.find('\n', at) - at));
    return connections;
  };
  const std::set<std::string> with_identity = burst("/v1/m", 10);
  EXPECT_EQ(with_identity.size(), 1u);
  const std::string log = upstream_log();
  EXPECT_EQ(count(log, std::string("\"Bearer ") + kSecret + "\""), 10u) << log;
  // Positive control: a request of another identity (none) never shares
  // that connection; its own burst shares another.
  const std::set<std::string> without = burst("/open/o", 5);
  EXPECT_EQ(without.size(), 1u);
  EXPECT_NE(without, with_identity);
}

class Http2UpstreamOffTest : public Http2UpstreamTest {
 protected:
  void configure(json& config) override {
    Http2UpstreamTest::configure(config);
    config["proxy_upstream_http2"] = false;
  }
};

// Positive control for the protocol header: with HTTP/2 to upstreams off,
// the same nginx is spoken to in HTTP/1.1.
TEST_F(Http2UpstreamOffTest, TheSameUpstreamOverHttp11) {
  auto r = curl("--http2 -si https://h2.example/v1/a -o /dev/null -D -");
  EXPECT_NE(r.output.find("x-upstream-proto: HTTP/1.1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace zn::test
