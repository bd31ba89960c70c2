// A decided request sent to an HTTP/2 upstream, and its answer read back.
// The request must carry exactly what http::forwarded_request_head() writes
// for an HTTP/1.1 upstream (checked by parsing that head back), the
// identity included; and a real nghttp2 server must see it so.
#include <gtest/gtest.h>

#include <string>

#include "session_fixture.h"
#include "userspace/h2/stream_upstream.h"
#include "userspace/http/rewrite.h"

namespace zn::h2::test {
namespace {

http::RequestHead parse_head(const std::string& text) {
  http::RequestHead r;
  const http::ParseResult p = http::parse_request_head(text, {}, r);
  EXPECT_EQ(p.state, http::ParseState::kDone) << p.error;
  return r;
}

http::NormalisedTarget target_of(const http::RequestHead& r) {
  std::optional<http::NormalisedTarget> t = http::normalise_target(r.target);
  EXPECT_TRUE(t.has_value());
  return t.value_or(http::NormalisedTarget{});
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  return s;
}

// The HTTP/2 request must be the HTTP/1.1 one: same method and target, and
// the same fields in order once Host and framing (each protocol's own) are
// set aside and names lower-cased.
void expect_same_as_http11(const http::RequestHead& req, const http::Injection* injection, bool scanned) {
  const http::NormalisedTarget target = target_of(req);
  const UpstreamRequest h2 = to_h2_request_fields(req, target, "api.example", injection, scanned);
  ASSERT_EQ(h2.error, nullptr);
  const http::RequestHead h1 =
      parse_head(http::forwarded_request_head(req, target, "api.example", injection, scanned));
  EXPECT_EQ(h2.method, h1.method);
  EXPECT_EQ(h2.path, h1.target);
  EXPECT_EQ(h2.scheme, "https");
  EXPECT_EQ(h2.authority, h1.host);
  std::vector<Field> h1_fields;
  for (const http::Header& h : h1.headers) {
    const std::string name = lower(h.name);
    if (name == "host" || name == "transfer-encoding" || name == "content-length") continue;
    h1_fields.push_back({name, h.value});
  }
  std::vector<Field> h2_fields;
  for (const Field& f : h2.headers)
    if (f.name != "content-length") h2_fields.push_back(f);
  ASSERT_EQ(h2_fields.size(), h1_fields.size());
  for (size_t i = 0; i < h1_fields.size(); ++i) {
    EXPECT_EQ(h2_fields[i].name, h1_fields[i].name);
    EXPECT_EQ(h2_fields[i].value, h1_fields[i].value);
  }
}

const std::string kGuestRequest =
    "POST /v1/charges?expand=a&api_key=guest HTTP/1.1\r\nHost: api.example\r\nAuthorization: Bearer guest\r\n"
    "X-Api-Key: guest\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nTE: trailers\r\nAccept-Encoding: "
    "gzip\r\n"
    "User-Agent: agent/1\r\nContent-Length: 2\r\n\r\n";

TEST(StreamUpstream, TheRequestIsTheHttp11RewriteWithAndWithoutAnIdentity) {
  const http::RequestHead req = parse_head(kGuestRequest);
  expect_same_as_http11(req, nullptr, false);
  expect_same_as_http11(req, nullptr, true);
  http::Injection header{"Authorization", "Bearer S3CR3T", {"X-Api-Key"}, {"S3CR3T"}, false};
  expect_same_as_http11(req, &header, false);
  http::Injection query{"api_key", "S3CR3T", {}, {"S3CR3T"}, true};
  expect_same_as_http11(req, &query, false);
}

TEST(StreamUpstream, TheIdentityReplacesTheGuestsCredential) {
  const http::RequestHead req = parse_head(kGuestRequest);
  http::Injection inj{"Authorization", "Bearer S3CR3T", {"X-Api-Key"}, {"S3CR3T"}, false};
  const UpstreamRequest r = to_h2_request_fields(req, target_of(req), "api.example", &inj);
  ASSERT_EQ(r.error, nullptr);
  int authorizations = 0;
  for (const Field& f : r.headers) {
    EXPECT_NE(f.name, "x-api-key");
    EXPECT_NE(f.name, "x-hop");
    EXPECT_NE(f.name, "connection");
    if (f.name == "te") {
      EXPECT_EQ(f.value, "trailers");  // gRPC's; any other TE is dropped
    }
    EXPECT_NE(f.name, "host");
    if (f.name == "authorization") {
      ++authorizations;
      EXPECT_EQ(f.value, "Bearer S3CR3T");
    }
    if (f.name == "accept-encoding") {
      EXPECT_EQ(f.value, "identity");
    }
  }
  EXPECT_EQ(authorizations, 1);
  EXPECT_EQ(r.path, "/v1/charges?expand=a&api_key=guest");

  http::Injection query{"api_key", "S3 CR3T", {}, {"S3 CR3T"}, true};
  const UpstreamRequest q = to_h2_request_fields(req, target_of(req), "api.example", &query);
  EXPECT_EQ(q.path, "/v1/charges?expand=a&api_key=S3%20CR3T");
  int guest_auth = 0;
  for (const Field& f : q.headers) guest_auth += f.name == "authorization" && f.value == "Bearer guest";
  EXPECT_EQ(guest_auth, 1);  // a query identity leaves the guest's headers alone, as over HTTP/1.1
}

TEST(StreamUpstream, FramingBecomesALengthOrDataFrames) {
  const UpstreamRequest sized =
      to_h2_request_fields(parse_head(kGuestRequest), {"/v1", "", false}, "api.example", nullptr);
  EXPECT_TRUE(sized.has_body);
  int lengths = 0;
  for (const Field& f : sized.headers) lengths += f.name == "content-length" && f.value == "2";
  EXPECT_EQ(lengths, 1);

  const http::RequestHead chunked =
      parse_head("POST /v1 HTTP/1.1\r\nHost: api.example\r\nTransfer-Encoding: chunked\r\n\r\n");
  const UpstreamRequest streamed = to_h2_request_fields(chunked, {"/v1", "", false}, "api.example", nullptr);
  EXPECT_TRUE(streamed.has_body);
  for (const Field& f : streamed.headers) {
    EXPECT_NE(f.name, "transfer-encoding");
    EXPECT_NE(f.name, "content-length");
  }
  const UpstreamRequest none =
      to_h2_request_fields(parse_head("GET /v1 HTTP/1.1\r\nHost: api.example\r\n\r\n"), {"/v1", "", false},
                           "api.example", nullptr);
  EXPECT_FALSE(none.has_body);
  EXPECT_TRUE(none.headers.empty());
  const UpstreamRequest empty =
      to_h2_request_fields(parse_head("POST /v1 HTTP/1.1\r\nHost: api.example\r\nContent-Length: 0\r\n\r\n"),
                           {"/v1", "", false}, "api.example", nullptr);
  EXPECT_FALSE(empty.has_body);
}

TEST(StreamUpstream, WhatCannotBeSentIsRefusedWithNothingLeftBehind) {
  http::RequestHead upgrade =
      parse_head("GET /ws HTTP/1.1\r\nHost: api.example\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_NE(to_h2_request_fields(upgrade, {"/ws", "", false}, "api.example", nullptr).error, nullptr);
  const http::RequestHead req = parse_head("GET /v1?q=1 HTTP/1.1\r\nHost: api.example\r\n\r\n");
  http::Injection bad_name{"Bad Header", "S3CR3T", {}, {"S3CR3T"}, false};
  const UpstreamRequest r = to_h2_request_fields(req, target_of(req), "api.example", &bad_name);
  EXPECT_NE(r.error, nullptr);
  EXPECT_TRUE(r.headers.empty());
  EXPECT_TRUE(r.path.empty());
  // Control: a token name goes.
  http::Injection good{"X-Key", "S3CR3T", {}, {"S3CR3T"}, false};
  UpstreamRequest ok = to_h2_request_fields(req, target_of(req), "api.example", &good);
  ASSERT_EQ(ok.error, nullptr);
  ok.wipe();
  for (const Field& f : ok.headers) EXPECT_EQ(f.value.find("S3CR3T"), std::string::npos);
}

ResponseHeaders answer(int status, std::vector<Field> headers, bool end_stream = false) {
  return ResponseHeaders{1, status, std::move(headers), end_stream};
}

TEST(StreamUpstream, TheAnswerIsReadAsTheHttp11ParserWould) {
  const UpstreamResponse sized =
      from_h2_response(answer(200, {{"content-length", "5"}, {"x-a", "1"}}), "GET");
  ASSERT_EQ(sized.error, nullptr);
  EXPECT_EQ(sized.head.framing, http::BodyFraming::kContentLength);
  EXPECT_EQ(sized.head.content_length, 5u);
  EXPECT_TRUE(sized.head.keep_alive);
  EXPECT_EQ(*sized.head.find("x-a"), "1");

  const UpstreamResponse streamed = from_h2_response(answer(200, {{"x-a", "1"}}), "GET");
  EXPECT_EQ(streamed.head.framing, http::BodyFraming::kUntilClose);  // until END_STREAM
  EXPECT_TRUE(streamed.head.keep_alive);
  const UpstreamResponse ended = from_h2_response(answer(200, {}, true), "GET");
  EXPECT_EQ(ended.head.framing, http::BodyFraming::kContentLength);
  EXPECT_EQ(ended.head.content_length, 0u);

  const UpstreamResponse head = from_h2_response(answer(200, {{"content-length", "500"}}, true), "HEAD");
  ASSERT_EQ(head.error, nullptr);
  EXPECT_EQ(head.head.framing, http::BodyFraming::kNone);
  EXPECT_EQ(*head.head.find("content-length"), "500");  // metadata, relayed as such
  for (int status : {100, 103, 204, 304})
    EXPECT_EQ(from_h2_response(answer(status, {}), "GET").head.framing, http::BodyFraming::kNone) << status;
  EXPECT_EQ(from_h2_response(answer(200, {{"content-length", "5"}, {"content-length", "5"}}), "GET").error,
            nullptr);
}

TEST(StreamUpstream, AnAnswerHttp11CouldNotCarryIsRefused) {
  for (int status : {0, 99, 600, 999}) EXPECT_NE(from_h2_response(answer(status, {}), "GET").error, nullptr);
  for (const char* bad : {"", "-1", "1,1", "abc", "9007199254740993"})
    EXPECT_NE(from_h2_response(answer(200, {{"content-length", bad}}), "GET").error, nullptr) << bad;
  EXPECT_NE(from_h2_response(answer(200, {{"content-length", "5"}, {"content-length", "6"}}), "GET").error,
            nullptr);
  EXPECT_NE(from_h2_response(answer(200, {{"content-length", "5"}}, true), "GET").error, nullptr);
  for (const char* name : {"connection", "transfer-encoding", "keep-alive", "upgrade", "proxy-connection"})
    EXPECT_NE(from_h2_response(answer(200, {{name, "x"}}), "GET").error, nullptr) << name;
  EXPECT_NE(from_h2_response(answer(200, {{"te", "gzip"}}), "GET").error, nullptr);
  for (const std::string& v :
       {std::string("a\rb"), std::string("a\nb"), std::string("a\0b", 3), std::string("\x01")})
    EXPECT_NE(from_h2_response(answer(200, {{"x-a", v}}), "GET").error, nullptr);
  for (const char* name : {"", "x a", "x:a", ":status"})
    EXPECT_NE(from_h2_response(answer(200, {{name, "1"}}), "GET").error, nullptr) << name;
  EXPECT_EQ(from_h2_response(answer(200, {{"x-a", "tab\tok"}}), "GET").error, nullptr);
}

// Over the real codec: the mapped request reaches an nghttp2 server as it
// would an HTTP/1.1 one, and its answer maps back.
TEST(StreamUpstream, ARealServerSeesTheRequestAndItsAnswerMapsBack) {
  H2ClientSession client;
  NgPeer server{NgPeer::Role::kServer};
  ClientExchange ex;
  const http::RequestHead req = parse_head(kGuestRequest);
  http::Injection inj{"Authorization", "Bearer S3CR3T", {"X-Api-Key"}, {"S3CR3T"}, false};
  UpstreamRequest r = to_h2_request_fields(req, target_of(req), "api.example", &inj);
  ASSERT_EQ(r.error, nullptr);
  const int32_t id = client.submit_request(r.method, r.scheme, r.authority, r.path, r.headers, r.has_body);
  r.wipe();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(client.send_data(id, "{}", true));
  ex.pump(client, server);
  ASSERT_TRUE(ex.fed.ok) << ex.fed.error;
  const NgPeer::StreamSeen& seen = server.streams[id];
  EXPECT_EQ(find_field(seen.headers, ":method"), "POST");
  EXPECT_EQ(find_field(seen.headers, ":authority"), "api.example");
  EXPECT_EQ(find_field(seen.headers, ":path"), "/v1/charges?expand=a&api_key=guest");
  EXPECT_EQ(find_field(seen.headers, "authorization"), "Bearer S3CR3T");
  EXPECT_EQ(find_field(seen.headers, "x-api-key"), "");
  EXPECT_EQ(find_field(seen.headers, "accept-encoding"), "identity");
  EXPECT_EQ(seen.body, "{}");

  server.respond(id, {{":status", "200"}, {"content-type", "application/json"}}, std::string("{\"ok\":1}"));
  ex.pump(client, server);
  const auto responses = of<ResponseHeaders>(ex.events);
  ASSERT_EQ(responses.size(), 1u);
  const UpstreamResponse back = from_h2_response(responses[0], "POST");
  ASSERT_EQ(back.error, nullptr);
  EXPECT_EQ(back.head.status, 200);
  EXPECT_EQ(back.head.framing, http::BodyFraming::kUntilClose);
  // For an HTTP/1.1 guest, re-chunked like any close-delimited body.
  const std::string h1 = http::forwarded_response_head(back.head, /*chunked=*/true, /*close=*/false);
  http::ResponseHead reparsed;
  ASSERT_EQ(http::parse_response_head(h1, {}, false, reparsed).state, http::ParseState::kDone);
  EXPECT_EQ(reparsed.framing, http::BodyFraming::kChunked);
  EXPECT_EQ(*reparsed.find("content-type"), "application/json");
}

}  // namespace
}  // namespace zn::h2::test
