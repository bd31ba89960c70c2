#include "userspace/http/message.h"

#include <gtest/gtest.h>

#include <string>

namespace zn::http {
namespace {

ParseResult parse_req(std::string_view s, RequestHead& h, const HttpLimits& limits = {}) {
  return parse_request_head(s, limits, h);
}

ParseResult parse_req(std::string_view s) {
  RequestHead h;
  return parse_req(s, h);
}

ParseResult parse_resp(std::string_view s, ResponseHead& h, bool head = false) {
  return parse_response_head(s, HttpLimits{}, head, h);
}

// Feeds every prefix of s, as a connection receiving one byte at a time
// would, and checks that the verdict only appears once the whole head (or the
// offending byte) is there and equals the all-at-once verdict.
void expect_incremental_matches(std::string_view s, bool response = false) {
  auto parse = [&](std::string_view b) {
    if (response) {
      ResponseHead h;
      return parse_response_head(b, HttpLimits{}, false, h);
    }
    RequestHead h;
    return parse_request_head(b, HttpLimits{}, h);
  };
  const ParseResult whole = parse(s);
  for (size_t n = 0; n <= s.size(); ++n) {
    const ParseResult r = parse(s.substr(0, n));
    if (r.state == ParseState::kNeedMore) continue;
    EXPECT_EQ(r.state, whole.state) << "prefix " << n;
    if (whole.state == ParseState::kDone) {
      EXPECT_EQ(n, whole.consumed);
      EXPECT_EQ(r.consumed, whole.consumed);
    } else {
      EXPECT_EQ(r.error_status, whole.error_status) << "prefix " << n;
    }
    return;
  }
  EXPECT_EQ(whole.state, ParseState::kNeedMore);
}

TEST(Http1Request, ParsesSimpleGet) {
  const std::string s = "GET /repos/x?y=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept:  */*  \r\n\r\n";
  RequestHead h;
  const ParseResult r = parse_req(s, h);
  ASSERT_EQ(r.state, ParseState::kDone) << r.error;
  EXPECT_EQ(r.consumed, s.size());
  EXPECT_EQ(h.method, "GET");
  EXPECT_EQ(h.target, "/repos/x?y=1");
  EXPECT_EQ(h.version_minor, 1);
  EXPECT_EQ(h.host, "api.example.com");
  ASSERT_EQ(h.headers.size(), 2u);
  EXPECT_EQ(h.headers[1].name, "Accept");
  EXPECT_EQ(h.headers[1].value, "*/*");  // OWS trimmed
  EXPECT_EQ(h.framing, BodyFraming::kNone);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_FALSE(h.expect_continue);
  EXPECT_FALSE(h.upgrade);
}

TEST(Http1Request, FindIsCaseInsensitiveAndReturnsFirst) {
  RequestHead h;
  ASSERT_EQ(parse_req("GET / HTTP/1.1\r\nhOsT: a\r\nX-A: 1\r\nx-a: 2\r\n\r\n", h).state, ParseState::kDone);
  ASSERT_NE(h.find("x-A"), nullptr);
  EXPECT_EQ(*h.find("x-A"), "1");
  ASSERT_NE(h.find("HOST"), nullptr);
  EXPECT_EQ(h.find("missing"), nullptr);
  EXPECT_EQ(h.headers[0].name, "hOsT");  // case preserved
}

TEST(Http1Request, ContentLengthAndChunkedFraming) {
  RequestHead h;
  ASSERT_EQ(parse_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kContentLength);
  EXPECT_EQ(h.content_length, 42u);
  ASSERT_EQ(parse_req("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ChUnKeD\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kChunked);
  ASSERT_EQ(parse_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.content_length, 7u);
  ASSERT_EQ(parse_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9007199254740992\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.content_length, uint64_t{1} << 53);
  ASSERT_EQ(parse_req("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5 \r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.content_length, 5u);
}

TEST(Http1Request, KeepAliveAndConnectionOptions) {
  RequestHead h;
  ASSERT_EQ(parse_req("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, , Close\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_FALSE(h.keep_alive);
  ASSERT_EQ(parse_req("GET / HTTP/1.0\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_FALSE(h.keep_alive);
  EXPECT_EQ(h.version_minor, 0);
  EXPECT_EQ(h.host, "");
  ASSERT_EQ(parse_req("GET / HTTP/1.0\r\nConnection: keep-alive\r\nHost: a\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_EQ(h.host, "a");
  ASSERT_EQ(parse_req("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_FALSE(h.keep_alive);
  ASSERT_EQ(parse_req("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_TRUE(h.upgrade);
  ASSERT_EQ(parse_req("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_TRUE(h.upgrade);
}

TEST(Http1Request, Expect) {
  RequestHead h;
  ASSERT_EQ(
      parse_req("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", h).state,
      ParseState::kDone);
  EXPECT_TRUE(h.expect_continue);
  ASSERT_EQ(parse_req("PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_FALSE(h.expect_continue);  // ignored for HTTP/1.0 (RFC 9110 10.1.1)
  const ParseResult r = parse_req("PUT / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n");
  EXPECT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error_status, 417);
}

TEST(Http1Request, HostForms) {
  for (const char* host : {"a", "api.example.com", "a:1", "a:65535", "1.2.3.4:443", "[::1]",
                           "[2001:db8::1]:8443", "my_host.internal", "EXAMPLE.com"}) {
    RequestHead h;
    const std::string s = std::string("GET / HTTP/1.1\r\nHost: ") + host + "\r\n\r\n";
    ASSERT_EQ(parse_req(s, h).state, ParseState::kDone) << host;
    EXPECT_EQ(h.host, host);
  }
}

TEST(Http1Request, NeedMoreUntilTheEmptyLine) {
  EXPECT_EQ(parse_req("").state, ParseState::kNeedMore);
  EXPECT_EQ(parse_req("GET / HTTP/1.1\r\nHost: a\r\n").state, ParseState::kNeedMore);
  EXPECT_EQ(parse_req("GET / HTTP/1.1\r\nHost: a\r\n\r").state, ParseState::kNeedMore);
}

TEST(Http1Request, PipelinedRequests) {
  const std::string first = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n";
  const std::string second = "GET /b HTTP/1.1\r\nHost: b\r\n\r\n";
  const std::string wire = first + "xyz" + second;
  RequestHead h;
  ParseResult r = parse_req(wire, h);
  ASSERT_EQ(r.state, ParseState::kDone);
  EXPECT_EQ(r.consumed, first.size());
  EXPECT_EQ(h.target, "/a");
  r = parse_req(std::string_view(wire).substr(r.consumed + h.content_length), h);
  ASSERT_EQ(r.state, ParseState::kDone);
  EXPECT_EQ(r.consumed, second.size());
  EXPECT_EQ(h.target, "/b");
  EXPECT_EQ(h.host, "b");
}

// A head of exactly max_head_bytes (final CRLFCRLF included) is accepted;
// one byte more is 431, whether or not the end has arrived yet.
TEST(Http1Request, HeadSizeLimitBoundary) {
  HttpLimits limits;
  limits.max_head_bytes = 200;
  const std::string prefix = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: ";
  const std::string exact = prefix + std::string(limits.max_head_bytes - prefix.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(exact.size(), limits.max_head_bytes);
  RequestHead h;
  ParseResult r = parse_req(exact, h, limits);
  ASSERT_EQ(r.state, ParseState::kDone) << r.error;
  EXPECT_EQ(r.consumed, exact.size());

  const std::string over = prefix + std::string(limits.max_head_bytes - prefix.size() - 3, 'p') + "\r\n\r\n";
  r = parse_req(over, h, limits);
  EXPECT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error_status, 431);

  // Incomplete: limit-1 bytes without an end may still finish in time...
  EXPECT_EQ(parse_req(std::string_view(over).substr(0, limits.max_head_bytes - 1), h, limits).state,
            ParseState::kNeedMore);
  // ...limit bytes without the end cannot.
  r = parse_req(std::string_view(over).substr(0, limits.max_head_bytes), h, limits);
  EXPECT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error_status, 431);
}

TEST(Http1Request, HeaderCountLimitBoundary) {
  HttpLimits limits;
  limits.max_headers = 5;
  std::string s = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 4; ++i) s += "X-" + std::to_string(i) + ": v\r\n";
  RequestHead h;
  ASSERT_EQ(parse_req(s + "\r\n", h, limits).state, ParseState::kDone);
  EXPECT_EQ(h.headers.size(), 5u);
  const ParseResult r = parse_req(s + "X-9: v\r\n\r\n", h, limits);
  EXPECT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error_status, 431);
}

TEST(Http1Request, ErrorTextNeverQuotesHeaderValues) {
  const ParseResult r = parse_req("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: secret-token\x01\r\n\r\n");
  ASSERT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error.find("secret"), std::string::npos);
}

struct Rejected {
  const char* name;
  std::string wire;
  int status;
};

std::string post(std::string_view headers) {
  return "POST / HTTP/1.1\r\nHost: a\r\n" + std::string(headers) + "\r\n";
}

class Http1RequestRejects : public ::testing::TestWithParam<Rejected> {};

TEST_P(Http1RequestRejects, WithStatus) {
  const Rejected& c = GetParam();
  RequestHead h;
  const ParseResult r = parse_req(c.wire, h);
  EXPECT_EQ(r.state, ParseState::kError) << c.name;
  EXPECT_EQ(r.error_status, c.status) << c.name << ": " << r.error;
  EXPECT_FALSE(r.error.empty());
  expect_incremental_matches(c.wire);
}

// The smuggling corpus: every message two HTTP/1.1 implementations could
// frame differently, and every syntax RFC 9112 lets recipients be lenient on.
INSTANTIATE_TEST_SUITE_P(
    Corpus, Http1RequestRejects,
    ::testing::Values(
        Rejected{"cl_te", post("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), 400},
        Rejected{"te_cl", post("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), 400},
        Rejected{"double_cl_equal", post("Content-Length: 5\r\nContent-Length: 5\r\n"), 400},
        Rejected{"double_cl_different", post("Content-Length: 5\r\nContent-Length: 6\r\n"), 400},
        Rejected{"cl_plus", post("Content-Length: +5\r\n"), 400},
        Rejected{"cl_minus", post("Content-Length: -1\r\n"), 400},
        Rejected{"cl_list", post("Content-Length: 1,1\r\n"), 400},
        Rejected{"cl_list_spaced", post("Content-Length: 1, 1\r\n"), 400},
        Rejected{"cl_inner_space", post("Content-Length: 1 5\r\n"), 400},
        Rejected{"cl_leading_vtab", post("Content-Length: \v5\r\n"), 400},
        Rejected{"cl_hex", post("Content-Length: 0x5\r\n"), 400},
        Rejected{"cl_empty", post("Content-Length: \r\n"), 400},
        Rejected{"cl_too_big", post("Content-Length: 9007199254740993\r\n"), 400},
        Rejected{"cl_overflow", post("Content-Length: 99999999999999999999999\r\n"), 400},
        Rejected{"te_chunked_chunked", post("Transfer-Encoding: chunked, chunked\r\n"), 400},
        Rejected{"te_gzip_chunked", post("Transfer-Encoding: gzip, chunked\r\n"), 400},
        Rejected{"te_xchunked", post("Transfer-Encoding: xchunked\r\n"), 501},
        Rejected{"te_gzip", post("Transfer-Encoding: gzip\r\n"), 501},
        Rejected{"te_trailing_junk", post("Transfer-Encoding: chunked x\r\n"), 400},
        Rejected{"te_param", post("Transfer-Encoding: chunked;q=1\r\n"), 400},
        Rejected{"te_quoted", post("Transfer-Encoding: \"chunked\"\r\n"), 400},
        Rejected{"te_twice", post("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), 400},
        Rejected{"te_http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        Rejected{"obs_fold_space", post("X-A: 1\r\n X-B: 2\r\n"), 400},
        Rejected{"obs_fold_tab", post("X-A: 1\r\n\tcontinued\r\n"), 400},
        Rejected{"obs_fold_first", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400},
        Rejected{"space_before_colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
        Rejected{"tab_before_colon", post("Content-Length\t: 5\r\n"), 400},
        Rejected{"no_colon", post("X-A\r\n"), 400}, Rejected{"empty_name", post(": a\r\n"), 400},
        Rejected{"bad_name_char", post("X(A): a\r\n"), 400},
        Rejected{"bare_lf_everywhere", "GET / HTTP/1.1\nHost: a\n\n", 400},
        Rejected{"bare_lf_header", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n", 400},
        Rejected{"bare_lf_end", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400},
        Rejected{"bare_cr", "GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400},
        Rejected{"nul_in_value", post(std::string("X-A: a\0b\r\n", 10)), 400},
        Rejected{"ctl_in_value",
                 post("X-A: a\x01"
                      "b\r\n"),
                 400},
        Rejected{"del_in_value", post("X-A: a\x7f\r\n"), 400},
        Rejected{"lowercase_method", "get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"method_symbol", "GE+T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"absolute_form", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"authority_form", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 400},
        Rejected{"connect_origin_form", "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"asterisk_form", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"target_non_ascii", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"target_ctl", "GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"target_fragment", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"double_space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"tab_separator", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"trailing_space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400},
        Rejected{"no_version", "GET /\r\nHost: a\r\n\r\n", 400},
        Rejected{"lowercase_version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"version_junk", "GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400},
        Rejected{"version_12", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505},
        Rejected{"version_20", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
        Rejected{"version_09", "GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505},
        Rejected{"h2_preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
        Rejected{"leading_empty_line", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
        Rejected{"missing_host", "GET / HTTP/1.1\r\n\r\n", 400},
        Rejected{"duplicate_host", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},
        Rejected{"duplicate_host_10", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400},
        Rejected{"empty_host", "GET / HTTP/1.1\r\nHost: \r\n\r\n", 400},
        Rejected{"host_userinfo", "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400},
        Rejected{"host_space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
        Rejected{"host_list", "GET / HTTP/1.1\r\nHost: a,b\r\n\r\n", 400},
        Rejected{"host_percent", "GET / HTTP/1.1\r\nHost: a%2eb\r\n\r\n", 400},
        Rejected{"host_path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
        Rejected{"host_empty_port", "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", 400},
        Rejected{"host_big_port", "GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", 400},
        Rejected{"host_two_ports", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", 400},
        Rejected{"host_bad_v6", "GET / HTTP/1.1\r\nHost: [::g]\r\n\r\n", 400},
        Rejected{"host_v6_zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 400},
        Rejected{"host_v6_unclosed", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400},
        Rejected{"host_v6_junk", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400},
        Rejected{"connection_not_token", post("Connection: keep alive\r\n"), 400},
        Rejected{"expect_other", post("Expect: something\r\n"), 417}),
    [](const ::testing::TestParamInfo<Rejected>& info) { return std::string(info.param.name); });

TEST(Http1Request, IncrementalMatchesWholeForValidRequests) {
  for (const std::string s :
       {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
        "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n"}) {
    RequestHead h;
    ASSERT_EQ(parse_req(s, h).state, ParseState::kDone) << s;
    expect_incremental_matches(s);
  }
}

TEST(Http1Response, ContentLength) {
  const std::string s = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
  ResponseHead h;
  const ParseResult r = parse_resp(s, h);
  ASSERT_EQ(r.state, ParseState::kDone) << r.error;
  EXPECT_EQ(r.consumed, s.size() - 5);
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.reason, "OK");
  EXPECT_EQ(h.version_minor, 1);
  EXPECT_EQ(h.framing, BodyFraming::kContentLength);
  EXPECT_EQ(h.content_length, 5u);
  EXPECT_TRUE(h.keep_alive);
  expect_incremental_matches(s, true);
}

TEST(Http1Response, NoBodyStatusesAndHead) {
  ResponseHead h;
  ASSERT_EQ(parse_resp("HTTP/1.1 204 No Content\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kNone);
  EXPECT_TRUE(h.keep_alive);
  ASSERT_EQ(parse_resp("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kNone);
  ASSERT_EQ(parse_resp("HTTP/1.1 100 Continue\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kNone);
  EXPECT_EQ(h.status, 100);
  ASSERT_EQ(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", h, true).state, ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kNone);
  ASSERT_EQ(parse_resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", h, true).state,
            ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kNone);
}

TEST(Http1Response, UntilCloseAndChunked) {
  ResponseHead h;
  ASSERT_EQ(parse_resp("HTTP/1.1 200\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kUntilClose);
  EXPECT_FALSE(h.keep_alive);
  EXPECT_EQ(h.reason, "");
  ASSERT_EQ(parse_resp("HTTP/1.1 404 \r\n\r\n", h).state, ParseState::kDone);
  EXPECT_EQ(h.status, 404);
  EXPECT_EQ(h.framing, BodyFraming::kUntilClose);
  ASSERT_EQ(parse_resp("HTTP/1.1 200 Fine, thanks\r\nTransfer-Encoding: chunked\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.framing, BodyFraming::kChunked);
  EXPECT_EQ(h.reason, "Fine, thanks");
  EXPECT_TRUE(h.keep_alive);
  ASSERT_EQ(parse_resp("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", h).state, ParseState::kDone);
  EXPECT_FALSE(h.keep_alive);
  ASSERT_EQ(parse_resp("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_TRUE(h.keep_alive);
  ASSERT_EQ(parse_resp("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_FALSE(h.keep_alive);
  // Identical duplicates are tolerated in responses (RFC 9110 8.6).
  ASSERT_EQ(parse_resp("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", h).state,
            ParseState::kDone);
  EXPECT_EQ(h.content_length, 3u);
}

class Http1ResponseRejects : public ::testing::TestWithParam<Rejected> {};

TEST_P(Http1ResponseRejects, With502) {
  const Rejected& c = GetParam();
  ResponseHead h;
  const ParseResult r = parse_resp(c.wire, h);
  EXPECT_EQ(r.state, ParseState::kError) << c.name;
  EXPECT_EQ(r.error_status, 502) << c.name << ": " << r.error;
  expect_incremental_matches(c.wire, true);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, Http1ResponseRejects,
    ::testing::Values(
        Rejected{"cl_te", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 502},
        Rejected{"cl_different", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 502},
        Rejected{"cl_list", "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", 502},
        Rejected{"cl_sign", "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n", 502},
        Rejected{"te_gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 502},
        Rejected{"te_list", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 502},
        Rejected{"te_http10", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 502},
        Rejected{"obs_fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n 2\r\n\r\n", 502},
        Rejected{"space_before_colon", "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\n", 502},
        Rejected{"bare_lf", "HTTP/1.1 200 OK\nContent-Length: 1\n\n", 502},
        Rejected{"nul_in_value", std::string("HTTP/1.1 200 OK\r\nX: \0\r\n\r\n", 25), 502},
        Rejected{"short_status", "HTTP/1.1 20 OK\r\n\r\n", 502},
        Rejected{"status_letters", "HTTP/1.1 2x0 OK\r\n\r\n", 502},
        Rejected{"status_600", "HTTP/1.1 600 OK\r\n\r\n", 502},
        Rejected{"status_099", "HTTP/1.1 099 OK\r\n\r\n", 502},
        Rejected{"no_space_reason", "HTTP/1.1 200OK\r\n\r\n", 502},
        Rejected{"version_2", "HTTP/2 200 OK\r\n\r\n", 502},
        Rejected{"version_20", "HTTP/2.0 200 OK\r\n\r\n", 502},
        Rejected{"ctl_in_reason", "HTTP/1.1 200 O\x01K\r\n\r\n", 502},
        Rejected{"not_http", "SSH-2.0-OpenSSH\r\n\r\n", 502}),
    [](const ::testing::TestParamInfo<Rejected>& info) { return std::string(info.param.name); });

TEST(Http1Response, SizeLimitIs502) {
  HttpLimits limits;
  limits.max_head_bytes = 64;
  ResponseHead h;
  const ParseResult r = parse_response_head("HTTP/1.1 200 OK\r\nX-Pad: " + std::string(100, 'p') + "\r\n\r\n",
                                            limits, false, h);
  EXPECT_EQ(r.state, ParseState::kError);
  EXPECT_EQ(r.error_status, 502);
}

}  // namespace
}  // namespace zn::http
