// A guest's HTTP/2 stream as the HTTP/1.1 request the pipeline decides:
// the head it yields (checked against the HTTP/1.1 parser's reading of the
// same request), and every refusal beside a request of the same shape that
// passes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "session_fixture.h"
#include "userspace/h2/fields.h"
#include "userspace/h2/stream_request.h"

namespace zn::h2::test {
namespace {

const std::string kSni = "api.github.com";

RequestHeaders get(const std::string& authority = kSni, const std::string& path = "/repos") {
  RequestHeaders r;
  r.stream_id = 1;
  r.method = "GET";
  r.scheme = "https";
  r.authority = authority;
  r.path = path;
  r.end_stream = true;
  return r;
}

RequestHeaders with(RequestHeaders r, std::vector<Field> fields, bool end_stream = true) {
  for (Field& f : fields) r.headers.push_back(std::move(f));
  r.end_stream = end_stream;
  return r;
}

StreamRequestResult map(const RequestHeaders& r, const http::HttpLimits& limits = {}) {
  return to_request_head(r, kSni, limits);
}

// The status of the mapping: 0 when the request passes.
int status(const RequestHeaders& r, const http::HttpLimits& limits = {}) { return map(r, limits).status; }

TEST(StreamRequest, AGetIsTheHeadTheHttp11ParserReadsFromTheSameRequest) {
  const StreamRequestResult r =
      map(with(get(kSni, "/repos?page=2"), {{"accept", "*/*"}, {"x-trace", "a b"}}));
  ASSERT_TRUE(r) << r.reason;
  http::RequestHead h1;
  const std::string text =
      "GET /repos?page=2 HTTP/1.1\r\nhost: api.github.com\r\naccept: */*\r\nx-trace: a b\r\n\r\n";
  ASSERT_EQ(http::parse_request_head(text, {}, h1).state, http::ParseState::kDone);
  EXPECT_EQ(r.head.method, h1.method);
  EXPECT_EQ(r.head.target, h1.target);
  EXPECT_EQ(r.head.version_minor, h1.version_minor);
  EXPECT_EQ(r.head.host, h1.host);
  ASSERT_EQ(r.head.headers.size(), h1.headers.size());
  for (size_t i = 0; i < h1.headers.size(); ++i) {
    EXPECT_EQ(r.head.headers[i].name, h1.headers[i].name);
    EXPECT_EQ(r.head.headers[i].value, h1.headers[i].value);
  }
  EXPECT_EQ(r.head.framing, http::BodyFraming::kNone);
  EXPECT_TRUE(r.head.keep_alive);
  EXPECT_FALSE(r.head.upgrade);
  EXPECT_FALSE(r.head.expect_continue);
  EXPECT_FALSE(r.websocket);
}

TEST(StreamRequest, TheAuthorityMustNameTheSni) {
  EXPECT_EQ(status(get("API.GitHub.COM")), 0);  // hosts compare without case
  EXPECT_EQ(map(get("API.GitHub.COM")).head.host, "API.GitHub.COM");
  EXPECT_EQ(status(get("api.github.com:443")), 0);
  EXPECT_EQ(status(get("api.github.com:8443")), 421);
  EXPECT_EQ(to_request_head(get("api.github.com:8443"), kSni, {}, 8443).status, 0);  // the connection's port
  EXPECT_EQ(status(get("api.github.com:0443")), 421);  // one spelling of the port
  EXPECT_EQ(status(get("api.github.com:")), 400);
  EXPECT_EQ(status(get("api.github.com:99999")), 400);
  EXPECT_EQ(status(get("evil.example")), 421);
  EXPECT_EQ(status(get("api.github.com.evil.example")), 421);
  EXPECT_EQ(status(get("github.com")), 421);
  EXPECT_EQ(status(get("xapi.github.com")), 421);
  // A trailing dot: the SNI never has one, and servers differ on whether
  // it names the same virtual host. One spelling passes.
  EXPECT_EQ(status(get("api.github.com.")), 421);
  // An SNI is never an IP literal.
  EXPECT_EQ(status(get("[::1]")), 421);
  EXPECT_NE(map(get("[::1]")).reason.find("IP literal"), std::string::npos);
  EXPECT_EQ(status(get("[::1]:443")), 421);
  EXPECT_EQ(status(get("140.82.112.6")), 421);
  // Not a uri-host at all.
  EXPECT_EQ(status(get("user@api.github.com")), 400);
  EXPECT_EQ(status(get("user:pw@api.github.com")), 400);
  EXPECT_EQ(status(get("api%2Egithub.com")), 400);
  EXPECT_EQ(status(get("api.github.com%3A443")), 400);
  EXPECT_EQ(status(get("api.github.com/x")), 400);
  EXPECT_EQ(status(get("api.github.com ")), 400);
  EXPECT_EQ(status(get("[::1")), 400);
  EXPECT_EQ(status(get("")), 400);  // missing
  // No SNI: nothing to agree with.
  EXPECT_EQ(to_request_head(get(), "", {}).status, 421);
}

TEST(StreamRequest, HostStandsInForAMissingAuthorityOnlyWhenItIsTheSni) {
  // As the codec reads a block without :authority.
  auto read = [](const std::string& host) {
    RequestHeaders r;
    std::vector<Field> block = {{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {"host", host}};
    EXPECT_EQ(read_request_block(std::move(block), r), nullptr);
    r.end_stream = true;
    return r;
  };
  EXPECT_EQ(status(read(kSni)), 0);
  EXPECT_EQ(map(read(kSni)).head.host, kSni);
  EXPECT_EQ(status(read("evil.example")), 421);
  // A block built without the codec: Host read the same way.
  RequestHeaders bare = with(get(""), {{"host", kSni}});
  const StreamRequestResult r = map(bare);
  ASSERT_TRUE(r) << r.reason;
  EXPECT_EQ(r.head.host, kSni);
  ASSERT_EQ(r.head.headers.size(), 1u);  // one Host, not two
  EXPECT_EQ(status(with(get(""), {{"host", "evil.example"}})), 421);
}

TEST(StreamRequest, AHostBesideTheAuthorityMustAgree) {
  EXPECT_EQ(status(with(get(), {{"host", "API.github.com"}})), 0);
  EXPECT_EQ(map(with(get(), {{"host", kSni}})).head.headers.size(), 1u);
  // The codec refuses this first; a hand-built block is refused here too.
  EXPECT_EQ(status(with(get(), {{"host", "evil.example"}})), 400);
  EXPECT_EQ(status(with(get(), {{"host", kSni}, {"host", kSni}})), 400);
  EXPECT_EQ(status(with(get(""), {{"host", kSni}, {"host", "evil.example"}})), 400);
}

TEST(StreamRequest, ConnectIsRefusedAndWebSocketIsTheGetItWouldBeOverHttp11) {
  RequestHeaders plain = get();
  plain.method = "CONNECT";
  plain.scheme.clear();
  plain.path.clear();
  EXPECT_EQ(status(plain), 405);

  RequestHeaders ws = get(kSni, "/socket");
  ws.method = "CONNECT";
  ws.protocol = "websocket";
  ws.end_stream = false;
  ws.headers = {{"sec-websocket-version", "13"}};
  const StreamRequestResult r = map(ws);
  ASSERT_TRUE(r) << r.reason;
  EXPECT_TRUE(r.websocket);
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.target, "/socket");
  EXPECT_TRUE(r.head.upgrade);
  ASSERT_NE(r.head.find("upgrade"), nullptr);
  EXPECT_EQ(*r.head.find("upgrade"), "websocket");
  ASSERT_NE(r.head.find("connection"), nullptr);
  EXPECT_EQ(*r.head.find("connection"), "upgrade");
  EXPECT_EQ(r.head.find("sec-websocket-key"), nullptr);  // the proxy's to make
  EXPECT_EQ(r.head.framing, http::BodyFraming::kNone);   // DATA is the WebSocket's, not a body

  RequestHeaders other = ws;
  other.protocol = "connect-udp";
  EXPECT_EQ(status(other), 501);
  other.protocol = "WebSocket";
  EXPECT_EQ(status(other), 501);
  RequestHeaders not_connect = ws;
  not_connect.method = "GET";
  EXPECT_EQ(status(not_connect), 400);
  EXPECT_EQ(status(with(ws, {{"content-length", "0"}}, false)), 400);
  RequestHeaders elsewhere = ws;
  elsewhere.authority = "evil.example";
  EXPECT_EQ(status(elsewhere), 421);
}

TEST(StreamRequest, SchemeMethodAndPathAreTheHttp11RequestLinesRules) {
  RequestHeaders r = get();
  r.scheme = "http";
  EXPECT_EQ(status(r), 400);
  r.scheme = "HTTPS";
  EXPECT_EQ(status(r), 400);
  r.scheme = "";
  EXPECT_EQ(status(r), 400);

  r = get();
  r.method = "DELETE";
  EXPECT_EQ(status(r), 0);
  r.method = "get";  // past a rule written for GET
  EXPECT_EQ(status(r), 400);
  r.method = "GE T";
  EXPECT_EQ(status(r), 400);

  EXPECT_EQ(status(get(kSni, "/a/b?c=d&e")), 0);
  EXPECT_EQ(status(get(kSni, "")), 400);
  EXPECT_EQ(status(get(kSni, "a/b")), 400);
  EXPECT_EQ(status(get(kSni, "https://evil.example/")), 400);
  EXPECT_EQ(status(get(kSni, "/a b")), 400);
  EXPECT_EQ(status(get(kSni, "/a#frag")), 400);
  EXPECT_EQ(status(get(kSni, "/a\tb")), 400);
  EXPECT_EQ(status(get(kSni, std::string("/a\0b", 4))), 400);
  EXPECT_EQ(status(get(kSni, "/caf\xc3\xa9")), 400);
  RequestHeaders star = get(kSni, "*");
  star.method = "OPTIONS";
  EXPECT_EQ(status(star), 400);  // as over HTTP/1.1: origin-form only
}

TEST(StreamRequest, FieldsHttp11WouldRejectOrReadDifferentlyAreRefused) {
  EXPECT_EQ(status(with(get(), {{"x-a", "tab\tinside"}})), 0);
  EXPECT_EQ(status(with(get(), {{"x-a", "caf\xc3\xa9"}})), 0);  // obs-text, as HTTP/1.1 takes it
  EXPECT_EQ(status(with(get(), {{"x-a", ""}})), 0);
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("a\rb"), std::string("a\nb"), std::string("a\r\nx-injected: 1"),
        std::string("a\x01"), std::string("a\x7f"), std::string(" leading"), std::string("trailing "),
        std::string("\ttab")})
    EXPECT_EQ(status(with(get(), {{"x-a", bad}})), 400) << testing::PrintToString(bad);
  EXPECT_EQ(status(with(get(), {{"x-custom", "1"}})), 0);
  for (const char* name : {"X-Custom", "x-Custom", "", "x a", "x:a", ":path", ":x", "x\r\ny", "caf\xc3\xa9"})
    EXPECT_EQ(status(with(get(), {{name, "1"}})), 400) << testing::PrintToString(name);
}

TEST(StreamRequest, ConnectionSpecificFieldsAreRefused) {
  EXPECT_EQ(status(with(get(), {{"te", "trailers"}})), 0);
  const StreamRequestResult trailers = map(with(get(), {{"te", "trailers"}}));
  ASSERT_NE(trailers.head.find("te"), nullptr);
  EXPECT_EQ(*trailers.head.find("te"), "trailers");  // the rewrite drops it, as for HTTP/1.1
  for (const char* name : {"transfer-encoding", "connection", "keep-alive", "proxy-connection", "upgrade"})
    EXPECT_EQ(status(with(get(), {{name, "x"}})), 400) << name;
  EXPECT_EQ(status(with(get(), {{"transfer-encoding", "chunked"}}, false)), 400);
  EXPECT_EQ(status(with(get(), {{"te", "gzip"}})), 400);
  EXPECT_EQ(status(with(get(), {{"te", "trailers, gzip"}})), 400);
}

TEST(StreamRequest, ContentLengthIsOneValidValue) {
  const StreamRequestResult r = map(with(get(), {{"content-length", "5"}}, false));
  ASSERT_TRUE(r) << r.reason;
  EXPECT_EQ(r.head.framing, http::BodyFraming::kContentLength);
  EXPECT_EQ(r.head.content_length, 5u);
  const StreamRequestResult most = map(with(get(), {{"content-length", "9007199254740992"}}, false));
  EXPECT_TRUE(most) << most.reason;  // 2^53, the HTTP/1.1 parser's bound
  for (const char* bad : {"", "-1", "+5", "0x10", "1,1", "5, 5", "1.0", "abc", "9007199254740993",
                          "18446744073709551616", "99999999999999999999999"})
    EXPECT_EQ(status(with(get(), {{"content-length", bad}}, false)), 400) << bad;
  EXPECT_EQ(status(with(get(), {{"content-length", "5"}, {"content-length", "5"}}, false)), 400);
  EXPECT_EQ(status(with(get(), {{"content-length", "5"}, {"content-length", "6"}}, false)), 400);
  // A length the stream cannot have.
  EXPECT_EQ(status(with(get(), {{"content-length", "5"}}, true)), 400);
  const StreamRequestResult empty = map(with(get(), {{"content-length", "0"}}, true));
  ASSERT_TRUE(empty) << empty.reason;
  EXPECT_EQ(empty.head.framing, http::BodyFraming::kContentLength);
}

TEST(StreamRequest, FramingFollowsTheStream) {
  EXPECT_EQ(map(get()).head.framing, http::BodyFraming::kNone);
  RequestHeaders post = get();
  post.method = "POST";
  post.end_stream = false;
  EXPECT_EQ(map(post).head.framing, http::BodyFraming::kChunked);  // DATA follows, length unknown
}

TEST(StreamRequest, ExpectContinueOnlyWithABody) {
  RequestHeaders post = get();
  post.method = "POST";
  EXPECT_TRUE(map(with(post, {{"expect", "100-continue"}}, false)).head.expect_continue);
  EXPECT_TRUE(map(with(post, {{"expect", "100-Continue"}}, false)).head.expect_continue);
  const StreamRequestResult ended = map(with(post, {{"expect", "100-continue"}}, true));
  ASSERT_TRUE(ended);
  EXPECT_FALSE(ended.head.expect_continue);
  EXPECT_EQ(status(with(post, {{"expect", "something-else"}}, false)), 417);
}

TEST(StreamRequest, CookiesAreJoinedInOrderAtTheFirstsPlace) {
  const StreamRequestResult r = map(with(get(), {{"x-a", "1"},
                                                 {"cookie", "a=1"},
                                                 {"x-b", "2"},
                                                 {"cookie", "b=2"},
                                                 {"cookie", ""},
                                                 {"cookie", "c=3; d=4"}}));
  ASSERT_TRUE(r) << r.reason;
  ASSERT_EQ(r.head.headers.size(), 4u);
  EXPECT_EQ(r.head.headers[0].name, "host");
  EXPECT_EQ(r.head.headers[1].name, "x-a");
  EXPECT_EQ(r.head.headers[2].name, "cookie");
  EXPECT_EQ(r.head.headers[2].value, "a=1; b=2; c=3; d=4");
  EXPECT_EQ(r.head.headers[3].name, "x-b");
}

// Whether the HTTP/1.1 parser, with the same limits, accepts the head this
// request is equivalent to: the two must agree.
bool http1_accepts(const http::RequestHead& head, const http::HttpLimits& limits) {
  std::string text = head.method + " " + head.target + " HTTP/1.1\r\n";
  for (const http::Header& h : head.headers) text += h.name + ": " + h.value + "\r\n";
  text += "\r\n";
  http::RequestHead parsed;
  return http::parse_request_head(text, limits, parsed).state == http::ParseState::kDone;
}

TEST(StreamRequest, LimitsAreTheHttp11HeadsCountedAsHttp11WouldWriteIt) {
  http::HttpLimits limits;
  limits.max_headers = 3;  // Host and two more
  EXPECT_EQ(status(with(get(), {{"x-a", "1"}, {"x-b", "2"}}), limits), 0);
  EXPECT_EQ(status(with(get(), {{"x-a", "1"}, {"x-b", "2"}, {"x-c", "3"}}), limits), 431);
  // Cookie crumbs are one field once joined.
  EXPECT_EQ(
      status(with(get(), {{"cookie", "a=1"}, {"cookie", "b=2"}, {"cookie", "c=3"}, {"x-b", "2"}}), limits),
      0);

  // "GET /repos HTTP/1.1\r\n" (21) "host: api.github.com\r\n" (22) "x-a: " +
  // value + "\r\n" (7 + n) "\r\n" (2): exactly 100 bytes with n = 48.
  limits = {};
  limits.max_head_bytes = 100;
  const RequestHeaders fits = with(get(), {{"x-a", std::string(48, 'v')}});
  const RequestHeaders over = with(get(), {{"x-a", std::string(49, 'v')}});
  const StreamRequestResult ok = map(fits, limits);
  ASSERT_TRUE(ok) << ok.reason;
  EXPECT_TRUE(http1_accepts(ok.head, limits));
  EXPECT_EQ(status(over, limits), 431);
  const StreamRequestResult over_unlimited = map(over);
  ASSERT_TRUE(over_unlimited);
  EXPECT_FALSE(http1_accepts(over_unlimited.head, limits));
  // Joined cookies are counted joined: "; " per crumb, not a field line.
  const StreamRequestResult crumbs =
      map(with(get(), {{"cookie", std::string(20, 'a')}, {"cookie", std::string(20, 'b')}}), limits);
  ASSERT_TRUE(crumbs) << crumbs.reason;  // 21 + 22 + "cookie: " 8 + 42 + 2 + 2 = 97
  EXPECT_TRUE(http1_accepts(crumbs.head, limits));
}

TEST(StreamRequest, ReasonsNeverQuoteAValue) {
  const std::string secret = "sk_live_S3CR3T";
  const std::vector<RequestHeaders> refused = {
      with(get(), {{"x-a", secret + std::string("\0", 1)}}),
      with(get(), {{"content-length", secret}}, false),
      with(get(), {{"te", secret}}),
      with(get(), {{"expect", secret}}, false),
      with(get(), {{"host", secret}}),
      with(get(), {{"connection", secret}}),
      get(secret + ".example"),
      get(secret + "@" + kSni),
      get(kSni, "/" + secret + " x"),
  };
  for (const RequestHeaders& r : refused) {
    const StreamRequestResult m = map(r);
    EXPECT_NE(m.status, 0);
    EXPECT_FALSE(m.reason.empty());
    EXPECT_EQ(m.reason.find("S3CR3T"), std::string::npos) << m.reason;
  }
}

// Through the real codec: a client's request, as nghttp2 delivers it, maps
// to the head; the split cookies come back whole.
TEST(StreamRequest, ARequestFromARealClientMaps) {
  H2ServerSession server;
  NgPeer client{NgPeer::Role::kClient};
  ServerExchange ex;
  Fields fields = get_request("/repos/x?y=1", "API.github.com:443");
  fields.emplace_back("cookie", "a=1");
  fields.emplace_back("user-agent", "curl/8");
  fields.emplace_back("cookie", "b=2");
  fields.emplace_back("content-length", "3");
  client.request(fields, "abc");
  ex.pump(server, client);
  ASSERT_TRUE(ex.fed.ok) << ex.fed.error;
  const auto requests = of<RequestHeaders>(ex.events);
  ASSERT_EQ(requests.size(), 1u);
  const StreamRequestResult r = map(requests[0]);
  ASSERT_TRUE(r) << r.reason;
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.target, "/repos/x?y=1");
  EXPECT_EQ(r.head.host, "API.github.com:443");
  EXPECT_EQ(*r.head.find("cookie"), "a=1; b=2");
  EXPECT_EQ(*r.head.find("user-agent"), "curl/8");
  EXPECT_EQ(r.head.framing, http::BodyFraming::kContentLength);
  EXPECT_EQ(r.head.content_length, 3u);
  // The same client naming another host on the connection.
  NgPeer other{NgPeer::Role::kClient};
  H2ServerSession server2;
  ServerExchange ex2;
  other.request(get_request("/", "evil.example"));
  ex2.pump(server2, other);
  const auto elsewhere = of<RequestHeaders>(ex2.events);
  ASSERT_EQ(elsewhere.size(), 1u);
  EXPECT_EQ(map(elsewhere[0]).status, 421);
}

}  // namespace
}  // namespace zn::h2::test
