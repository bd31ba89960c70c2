#include "userspace/http/rewrite.h"

#include <gtest/gtest.h>

namespace zn::http {
namespace {

RequestHead parse(const std::string& raw) {
  RequestHead h;
  ParseResult r = parse_request_head(raw, HttpLimits{}, h);
  EXPECT_EQ(r.state, ParseState::kDone) << r.error;
  return h;
}

TEST(HttpRewrite, FramingIsRegeneratedAndHopByHopHeadersDropped) {
  RequestHead h = parse(
      "POST /v1/a HTTP/1.1\r\nHost: API.stripe.com\r\nConnection: keep-alive, X-Secret-Hop\r\n"
      "X-Secret-Hop: 1\r\nKeep-Alive: timeout=5\r\nTE: gzip\r\nExpect: 100-continue\r\n"
      "Accept: */*\r\nTransfer-Encoding: chunked\r\n\r\n");
  NormalisedTarget t{"/v1/a", "x=1", true};
  const std::string out = forwarded_request_head(h, t, "api.stripe.com", nullptr);
  EXPECT_EQ(out,
            "POST /v1/a?x=1 HTTP/1.1\r\nHost: api.stripe.com\r\nAccept: */*\r\n"
            "Transfer-Encoding: chunked\r\n\r\n");
}

// gRPC over HTTP/2 needs "te: trailers" at the upstream: it goes on; any
// other TE does not.
TEST(HttpRewrite, TeTrailersGoesOn) {
  RequestHead h =
      parse("POST /svc/M HTTP/1.1\r\nHost: a.example\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(forwarded_request_head(h, NormalisedTarget{"/svc/M", "", false}, "a.example", nullptr),
            "POST /svc/M HTTP/1.1\r\nHost: a.example\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n");
}

// An upstream's trailers go on but for fields that frame, route,
// authenticate or control the response.
TEST(HttpRewrite, TrailerFieldsAreFiltered) {
  const std::vector<Header> in = {{"grpc-status", "0"},    {"grpc-message", "ok"},
                                  {"Content-Length", "5"}, {"Transfer-Encoding", "chunked"},
                                  {"Set-Cookie", "a=b"},   {"WWW-Authenticate", "Basic"},
                                  {"Connection", "close"}, {"Location", "/x"},
                                  {"x-checksum", "abc"}};
  const std::vector<Header> out = forwarded_trailer_fields(in);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].name, "grpc-status");
  EXPECT_EQ(out[1].name, "grpc-message");
  EXPECT_EQ(out[2].name, "x-checksum");
}

TEST(HttpRewrite, TheIdentityReplacesEveryCredentialTheRuleOwns) {
  RequestHead h = parse(
      "GET /v1/a HTTP/1.1\r\nHost: api.stripe.com\r\nauthorization: Bearer guest\r\n"
      "Proxy-Authorization: Basic x\r\nAUTHORIZATION: Bearer again\r\nContent-Length: 3\r\n\r\n");
  Injection inj{"Authorization", "Bearer sk_test_1", {"Authorization", "Proxy-Authorization"}};
  const std::string out =
      forwarded_request_head(h, NormalisedTarget{"/v1/a", "", false}, "api.stripe.com", &inj);
  EXPECT_EQ(out,
            "GET /v1/a HTTP/1.1\r\nHost: api.stripe.com\r\nAuthorization: Bearer sk_test_1\r\n"
            "Accept-Encoding: identity\r\nContent-Length: 3\r\n\r\n");
}

// The response to a request carrying a secret is scanned for its
// reflection: the guest cannot ask for a compressed one.
TEST(HttpRewrite, WithAnIdentityTheUpstreamIsAskedForAnUncompressedResponse) {
  RequestHead h = parse(
      "GET /v1/a HTTP/1.1\r\nHost: api.stripe.com\r\nAccept-Encoding: gzip, br\r\n"
      "accept-encoding: deflate\r\nAccept: */*\r\n\r\n");
  Injection inj{"Authorization", "Bearer sk_test_1", {"Authorization"}};
  const std::string out =
      forwarded_request_head(h, NormalisedTarget{"/v1/a", "", false}, "api.stripe.com", &inj);
  EXPECT_EQ(out,
            "GET /v1/a HTTP/1.1\r\nHost: api.stripe.com\r\nAccept: */*\r\nAuthorization: Bearer sk_test_1\r\n"
            "Accept-Encoding: identity\r\n\r\n");
  // Positive control: without an identity the guest's choice goes through.
  const std::string plain =
      forwarded_request_head(h, NormalisedTarget{"/v1/a", "", false}, "api.stripe.com", nullptr);
  EXPECT_NE(plain.find("Accept-Encoding: gzip, br\r\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("identity"), std::string::npos) << plain;
}

TEST(HttpRewrite, ResponseHeadKeepsLengthOrRechunks) {
  ResponseHead r;
  ParseResult pr =
      parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\nServer: up\r\n\r\n",
                          HttpLimits{}, false, r);
  ASSERT_EQ(pr.state, ParseState::kDone);
  EXPECT_EQ(forwarded_response_head(r, false, false),
            "HTTP/1.1 200 OK\r\nServer: up\r\nContent-Length: 5\r\n\r\n");
  pr = parse_response_head("HTTP/1.1 200 OK\r\nServer: up\r\n\r\n", HttpLimits{}, false, r);
  ASSERT_EQ(r.framing, BodyFraming::kUntilClose);
  EXPECT_EQ(forwarded_response_head(r, true, true),
            "HTTP/1.1 200 OK\r\nServer: up\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
  // HEAD: the length describes the GET's body and is kept, with no body.
  pr = parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", HttpLimits{}, true, r);
  ASSERT_EQ(r.framing, BodyFraming::kNone);
  EXPECT_EQ(forwarded_response_head(r, false, false), "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n");
}

TEST(HttpRewrite, OnAScannedConnectionEveryRequestAsksForIdentity) {
  RequestHead h = parse("GET /v1/b HTTP/1.1\r\nHost: api.stripe.com\r\nAccept-Encoding: gzip\r\n\r\n");
  const std::string out =
      forwarded_request_head(h, NormalisedTarget{"/v1/b", "", false}, "api.stripe.com", nullptr, true);
  EXPECT_EQ(out, "GET /v1/b HTTP/1.1\r\nHost: api.stripe.com\r\nAccept-Encoding: identity\r\n\r\n");
}

TEST(HttpRewrite, OnlyAnIdentityContentEncodingIsScannable) {
  auto head = [](const std::string& extra) {
    ResponseHead r;
    parse_response_head("HTTP/1.1 200 OK\r\n" + extra + "Content-Length: 1\r\n\r\n", HttpLimits{}, false, r);
    return r;
  };
  EXPECT_TRUE(identity_content_encoding(head("")));
  EXPECT_TRUE(identity_content_encoding(head("Content-Encoding: identity\r\n")));
  EXPECT_TRUE(identity_content_encoding(head("Content-Encoding: IDENTITY , identity\r\n")));
  EXPECT_FALSE(identity_content_encoding(head("Content-Encoding: gzip\r\n")));
  EXPECT_FALSE(identity_content_encoding(head("Content-Encoding: identity, br\r\n")));
  EXPECT_FALSE(
      identity_content_encoding(head("Content-Encoding: identity\r\nContent-Encoding: deflate\r\n")));
  EXPECT_FALSE(identity_content_encoding(head("content-encoding: x-gzip\r\n")));
}

TEST(HttpRewrite, ProxyResponsesCloseAndCarryTheirLength) {
  const std::string out = proxy_response(403, "zeroness: blocked by policy (default deny)\n");
  EXPECT_EQ(out.substr(0, 24), "HTTP/1.1 403 Forbidden\r\n");
  EXPECT_NE(out.find("Content-Length: 43\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos);
  EXPECT_EQ(out.substr(out.size() - 43), "zeroness: blocked by policy (default deny)\n");
  EXPECT_EQ(reason_phrase(421), "Misdirected Request");
}

// A query placement: the guest's own parameter of that name goes, however
// spelled; the credential is appended percent-encoded.
TEST(HttpRewrite, AQueryPlacementReplacesTheGuestsParameter) {
  EXPECT_EQ(query_with_parameter("", "key", "s3cr/t+"), "key=s3cr%2Ft%2B");
  EXPECT_EQ(query_with_parameter("a=1&key=guest&b=2", "key", "v"), "a=1&b=2&key=v");
  EXPECT_EQ(query_with_parameter("k%65y=guest&key&KEY=x&a", "key", "v"), "KEY=x&a&key=v");
  EXPECT_EQ(query_with_parameter("a=1&&b", "key", "v"), "a=1&b&key=v");
  EXPECT_EQ(percent_encode("a b~-._Z9"), "a%20b~-._Z9");
}

TEST(HttpRewrite, AQueryInjectionGoesInTheTargetNotAHeader) {
  RequestHead req;
  ASSERT_EQ(
      parse_request_head("GET /v1/x?key=mine&q=1 HTTP/1.1\r\nHost: a.example\r\nkey: h\r\n\r\n", {}, req)
          .state,
      ParseState::kDone);
  std::string why;
  auto target = normalise_target(req.target, &why);
  ASSERT_TRUE(target) << why;
  Injection inj{"key", "sk test", {"Authorization"}, {"sk test"}, true};
  const std::string out = forwarded_request_head(req, *target, "a.example", &inj);
  EXPECT_EQ(out.substr(0, out.find("\r\n")), "GET /v1/x?q=1&key=sk%20test HTTP/1.1") << out;
  EXPECT_NE(out.find("\r\nkey: h\r\n"), std::string::npos) << out;  // a header of that name is the guest's
}

// A name a CGI/WSGI/Rack/PHP backend would read as another field's
// ("Transfer_Encoding" as Transfer-Encoding, "X_Api_Key" beside an injected
// X-Api-Key) never goes on, in any of the spellings those map to '_';
// letters, digits and '-' do (positive control).
TEST(HttpRewrite, NamesABackendCouldReadAsAnotherAreDropped) {
  RequestHead h = parse(
      "POST /v1/a HTTP/1.1\r\nHost: a.example\r\nTransfer_Encoding: chunked\r\nContent_Length: 5\r\n"
      "X_Api_Key: guest-1\r\nx_api_key: guest-2\r\nX.Api.Key: guest-3\r\nX~Api~Key: guest-4\r\n"
      "X!Api!Key: guest-5\r\nAuthorization_: guest-6\r\nX-Kept-1: yes\r\nX-Api-Key-Extra: kept\r\n"
      "Content-Length: 0\r\n\r\n");
  Injection inj;
  inj.header = "X-Api-Key";
  inj.value = "sk_injected";
  const std::string out = forwarded_request_head(h, NormalisedTarget{"/v1/a", "", false}, "a.example", &inj);
  EXPECT_EQ(out,
            "POST /v1/a HTTP/1.1\r\nHost: a.example\r\nX-Kept-1: yes\r\nX-Api-Key-Extra: kept\r\n"
            "X-Api-Key: sk_injected\r\nAccept-Encoding: identity\r\nContent-Length: 0\r\n\r\n");
}

// Where responses are scrubbed the guest may not choose the cut: every
// range field goes; where they are not, ranges go on (positive control).
TEST(HttpRewrite, RangeFieldsGoOnlyWhereResponsesAreNotScrubbed) {
  RequestHead h = parse(
      "GET /f HTTP/1.1\r\nHost: a.example\r\nRange: bytes=10-20\r\nIf-Range: \"e1\"\r\n"
      "Request-Range: bytes=1-2\r\nrange: bytes=-5\r\nAccept: */*\r\n\r\n");
  const NormalisedTarget t{"/f", "", false};
  EXPECT_EQ(forwarded_request_head(h, t, "a.example", nullptr, true),
            "GET /f HTTP/1.1\r\nHost: a.example\r\nAccept: */*\r\nAccept-Encoding: identity\r\n\r\n");
  Injection inj;
  inj.header = "Authorization";
  inj.value = "Bearer x";
  EXPECT_EQ(forwarded_request(h, t, &inj).headers.size(), 3u);  // Accept, the injection, Accept-Encoding
  EXPECT_EQ(forwarded_request_head(h, t, "a.example", nullptr, false),
            "GET /f HTTP/1.1\r\nHost: a.example\r\nRange: bytes=10-20\r\nIf-Range: \"e1\"\r\n"
            "Request-Range: bytes=1-2\r\nrange: bytes=-5\r\nAccept: */*\r\n\r\n");
}

TEST(HttpRewrite, PartialResponsesAreRecognised) {
  auto head = [](int status, std::vector<Header> headers) {
    ResponseHead r;
    r.status = status;
    r.headers = std::move(headers);
    return r;
  };
  EXPECT_TRUE(is_partial_response(head(206, {})));
  EXPECT_TRUE(is_partial_response(head(200, {{"Content-Range", "bytes 0-9/100"}})));
  EXPECT_TRUE(is_partial_response(head(200, {{"content-type", " Multipart/ByteRanges; boundary=x"}})));
  // Positive controls: a whole response, a 416 saying the length.
  EXPECT_FALSE(is_partial_response(head(200, {{"Content-Type", "text/plain"}})));
  EXPECT_FALSE(is_partial_response(head(416, {{"Content-Range", "bytes */100"}})));
  EXPECT_FALSE(is_partial_response(head(200, {{"Content-Type", "multipart/mixed; boundary=x"}})));
}

}  // namespace
}  // namespace zn::http
