#include "userspace/http/body.h"

#include <gtest/gtest.h>

#include <string>

namespace zn::http {
namespace {

struct Decoded {
  std::string payload;
  size_t consumed = 0;
  bool done = false;
  bool error = false;
};

Decoded decode_all(BodyFraming framing, std::string_view wire, uint64_t content_length = 0,
                   const HttpLimits& limits = {}) {
  BodyDecoder d(framing, content_length, limits);
  Decoded r;
  const BodyDecoder::Step s = d.feed(wire, r.payload);
  r.consumed = s.consumed;
  r.done = s.done;
  r.error = s.error;
  EXPECT_EQ(s.done, d.done());
  if (s.error) {
    EXPECT_FALSE(s.error_reason.empty());
  }
  return r;
}

// The same input, one byte per feed() call (the caller only offers the bytes
// not yet consumed, as a connection reading into a buffer would).
Decoded decode_bytewise(BodyFraming framing, std::string_view wire, uint64_t content_length = 0,
                        const HttpLimits& limits = {}) {
  BodyDecoder d(framing, content_length, limits);
  Decoded r;
  for (size_t i = 0; i < wire.size() && !r.done && !r.error; ++i) {
    const BodyDecoder::Step s = d.feed(wire.substr(i, 1), r.payload);
    r.consumed += s.consumed;
    r.done = s.done;
    r.error = s.error;
  }
  return r;
}

// Every split point: first part, then the rest.
void expect_split_invariant(BodyFraming framing, std::string_view wire, uint64_t content_length = 0) {
  const Decoded whole = decode_all(framing, wire, content_length);
  for (size_t cut = 0; cut <= wire.size(); ++cut) {
    BodyDecoder d(framing, content_length, HttpLimits{});
    std::string payload;
    BodyDecoder::Step a = d.feed(wire.substr(0, cut), payload);
    size_t consumed = a.consumed;
    if (!a.done && !a.error) {
      ASSERT_EQ(a.consumed, cut);
      const BodyDecoder::Step b = d.feed(wire.substr(cut), payload);
      consumed += b.consumed;
      a = b;
    }
    EXPECT_EQ(a.error, whole.error) << "cut " << cut;
    EXPECT_EQ(a.done, whole.done) << "cut " << cut;
    if (!whole.error) {
      EXPECT_EQ(payload, whole.payload) << "cut " << cut;
      EXPECT_EQ(consumed, whole.consumed) << "cut " << cut;
    }
  }
  const Decoded bytewise = decode_bytewise(framing, wire, content_length);
  EXPECT_EQ(bytewise.error, whole.error);
  EXPECT_EQ(bytewise.done, whole.done);
  if (!whole.error) {
    EXPECT_EQ(bytewise.payload, whole.payload);
    EXPECT_EQ(bytewise.consumed, whole.consumed);
  }
}

TEST(Http1Body, NoneIsDoneImmediately) {
  BodyDecoder d(BodyFraming::kNone, 0, HttpLimits{});
  EXPECT_TRUE(d.done());
  std::string out;
  const BodyDecoder::Step s = d.feed("GET / HTTP/1.1\r\n", out);
  EXPECT_EQ(s.consumed, 0u);
  EXPECT_TRUE(s.done);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(BodyDecoder(BodyFraming::kContentLength, 0, HttpLimits{}).done());
}

TEST(Http1Body, ContentLengthStopsAtTheEnd) {
  const Decoded r = decode_all(BodyFraming::kContentLength, "helloGET /next", 5);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.payload, "hello");
  EXPECT_EQ(r.consumed, 5u);
  const Decoded partial = decode_all(BodyFraming::kContentLength, "hel", 5);
  EXPECT_FALSE(partial.done);
  EXPECT_EQ(partial.consumed, 3u);
  expect_split_invariant(BodyFraming::kContentLength, "helloGET /next", 5);
}

TEST(Http1Body, UntilCloseNeverEnds) {
  BodyDecoder d(BodyFraming::kUntilClose, 0, HttpLimits{});
  std::string out;
  BodyDecoder::Step s = d.feed("abc", out);
  EXPECT_EQ(s.consumed, 3u);
  EXPECT_FALSE(s.done);
  s = d.feed("0\r\n\r\n", out);
  EXPECT_FALSE(s.done);
  EXPECT_EQ(out, "abc0\r\n\r\n");
}

TEST(Http1Body, ChunkedStopsAtTheEnd) {
  const std::string body = "5\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n";
  const Decoded r = decode_all(BodyFraming::kChunked, body + "GET / HTTP/1.1\r\n");
  EXPECT_TRUE(r.done);
  EXPECT_FALSE(r.error);
  EXPECT_EQ(r.payload, "hello0123456789");
  EXPECT_EQ(r.consumed, body.size());
  expect_split_invariant(BodyFraming::kChunked, body + "GET / HTTP/1.1\r\n");
}

TEST(Http1Body, AfterDoneConsumesNothing) {
  BodyDecoder d(BodyFraming::kChunked, 0, HttpLimits{});
  std::string out;
  ASSERT_TRUE(d.feed("0\r\n\r\n", out).done);
  const BodyDecoder::Step s = d.feed("1\r\nx\r\n", out);
  EXPECT_EQ(s.consumed, 0u);
  EXPECT_TRUE(s.done);
  EXPECT_TRUE(out.empty());
}

TEST(Http1Body, ChunkedAcceptsExtensionsTrailersAndMaxDigits) {
  for (const std::string body : {
           "5;a\r\nhello\r\n0\r\n\r\n", "5;a=b;c=\"x y;\\\"z\"\r\nhello\r\n0;last\r\n\r\n",
           "5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Other:\r\n\r\n", "0000000000000005\r\nhello\r\n0\r\n\r\n",
           "5\r\nhe\r\no\r\n0\r\n\r\n",  // CRLF inside data is payload
       }) {
    const Decoded r = decode_all(BodyFraming::kChunked, body);
    EXPECT_TRUE(r.done) << body;
    EXPECT_FALSE(r.error) << body;
    EXPECT_EQ(r.payload.size(), 5u) << body;
    EXPECT_EQ(r.consumed, body.size()) << body;
    expect_split_invariant(BodyFraming::kChunked, body);
  }
}

TEST(Http1Body, HugeChunkSizeIsDataNotOverflow) {
  BodyDecoder d(BodyFraming::kChunked, 0, HttpLimits{});
  std::string out;
  const BodyDecoder::Step s = d.feed("FFFFFFFFFFFFFFFF\r\nabc", out);
  EXPECT_FALSE(s.error);
  EXPECT_FALSE(s.done);
  EXPECT_EQ(out, "abc");
}

TEST(Http1Body, ChunkLineLimitBoundary) {
  HttpLimits limits;
  limits.max_chunk_line = 32;
  const std::string ext_at_limit = ";e=" + std::string(limits.max_chunk_line - 4, 'v');  // "5" + ext = limit
  const Decoded ok =
      decode_all(BodyFraming::kChunked, "5" + ext_at_limit + "\r\nhello\r\n0\r\n\r\n", 0, limits);
  EXPECT_TRUE(ok.done);
  EXPECT_FALSE(ok.error);
  const Decoded over =
      decode_all(BodyFraming::kChunked, "5" + ext_at_limit + "v\r\nhello\r\n0\r\n\r\n", 0, limits);
  EXPECT_TRUE(over.error);
  // The limit holds before the line ends: no unbounded buffering.
  BodyDecoder d(BodyFraming::kChunked, 0, limits);
  std::string out;
  EXPECT_TRUE(d.feed("5;" + std::string(1000, 'x'), out).error);
}

TEST(Http1Body, TrailerLimitBoundary) {
  HttpLimits limits;
  const std::string field = "X-T: " + std::string(limits.max_trailer_bytes - 5 - 4, 't') + "\r\n";
  ASSERT_EQ(field.size() + 2, limits.max_trailer_bytes);
  const Decoded ok = decode_all(BodyFraming::kChunked, "0\r\n" + field + "\r\n", 0, limits);
  EXPECT_TRUE(ok.done);
  EXPECT_FALSE(ok.error);
  const Decoded over = decode_all(BodyFraming::kChunked, "0\r\nX" + field + "\r\n", 0, limits);
  EXPECT_TRUE(over.error);
}

// Trailer fields are kept, in order, whatever the split; last_chunk()
// writes them back.
TEST(Http1Body, TrailersAreKeptForTheCaller) {
  const std::string wire = "3\r\nabc\r\n0\r\ngrpc-status: 0\r\nGrpc-Message:  fine \r\n\r\n";
  for (size_t step : {size_t{1}, size_t{5}, wire.size()}) {
    BodyDecoder d(BodyFraming::kChunked, 0, HttpLimits{});
    std::string out;
    for (size_t at = 0; at < wire.size(); at += step) d.feed(wire.substr(at, step), out);
    ASSERT_TRUE(d.done()) << step;
    ASSERT_EQ(d.trailers().size(), 2u);
    EXPECT_EQ(d.trailers()[0].name, "grpc-status");
    EXPECT_EQ(d.trailers()[1].value, "fine");
    EXPECT_EQ(out, "abc");
  }
  EXPECT_EQ(last_chunk({}), kLastChunk);
  EXPECT_EQ(last_chunk({{"grpc-status", "0"}}), "0\r\ngrpc-status: 0\r\n\r\n");
}

struct BadBody {
  const char* name;
  std::string wire;
};

class Http1BodyRejects : public ::testing::TestWithParam<BadBody> {};

TEST_P(Http1BodyRejects, AllAtOnceAndBytewise) {
  const BadBody& c = GetParam();
  const Decoded whole = decode_all(BodyFraming::kChunked, c.wire);
  EXPECT_TRUE(whole.error) << c.name;
  EXPECT_FALSE(whole.done) << c.name;
  EXPECT_TRUE(decode_bytewise(BodyFraming::kChunked, c.wire).error) << c.name;
  // Errors are sticky.
  BodyDecoder d(BodyFraming::kChunked, 0, HttpLimits{});
  std::string out;
  d.feed(c.wire, out);
  const BodyDecoder::Step again = d.feed("0\r\n\r\n", out);
  EXPECT_TRUE(again.error);
  EXPECT_EQ(again.consumed, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, Http1BodyRejects,
    ::testing::Values(
        BadBody{"hex_prefix", "0x5\r\nhello\r\n0\r\n\r\n"}, BadBody{"negative", "-1\r\nx\r\n0\r\n\r\n"},
        BadBody{"plus", "+5\r\nhello\r\n0\r\n\r\n"}, BadBody{"leading_space", " 5\r\nhello\r\n0\r\n\r\n"},
        BadBody{"leading_tab", "\t5\r\nhello\r\n0\r\n\r\n"},
        BadBody{"trailing_space", "5 \r\nhello\r\n0\r\n\r\n"},
        BadBody{"empty_size", "\r\nhello\r\n0\r\n\r\n"}, BadBody{"not_hex", "g\r\nhello\r\n0\r\n\r\n"},
        BadBody{"seventeen_digits", "00000000000000005\r\nhello\r\n0\r\n\r\n"},
        BadBody{"overflow", "10000000000000000\r\nhello\r\n0\r\n\r\n"},
        BadBody{"overflow_all_f", "FFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n"},
        BadBody{"bare_lf_size", "5\nhello\r\n0\r\n\r\n"}, BadBody{"bare_lf_ext", "5;ext\nhello\r\n0\r\n\r\n"},
        BadBody{"bare_cr_size", "5\rhello\r\n0\r\n\r\n"},
        BadBody{"data_too_long", "5\r\nhelloX\r\n0\r\n\r\n"},
        BadBody{"data_bare_lf", "5\r\nhello\n0\r\n\r\n"},
        BadBody{"data_cr_cr_lf", "5\r\nhello\r\r\n0\r\n\r\n"}, BadBody{"data_no_crlf", "5\r\nhello0\r\n\r\n"},
        BadBody{"ext_space", "5 ;a\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_space_after", "5; a\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_no_name", "5;=x\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_empty_value", "5;a=\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_ctl", "5;a=b\x01\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_unterminated_quote", "5;a=\"b\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_ctl_in_quote", "5;a=\"b\x7f\"\r\nhello\r\n0\r\n\r\n"},
        BadBody{"ext_huge", "5;" + std::string(2000, 'e') + "\r\nhello\r\n0\r\n\r\n"},
        BadBody{"last_chunk_bare_lf", "0\n\r\n"}, BadBody{"trailer_bare_lf", "0\r\nX: a\n\r\n"},
        BadBody{"end_bare_lf", "0\r\n\n"}, BadBody{"trailer_obs_fold", "0\r\nX: a\r\n b\r\n\r\n"},
        BadBody{"trailer_no_colon", "0\r\nXa\r\n\r\n"},
        BadBody{"trailer_space_before_colon", "0\r\nX : a\r\n\r\n"},
        BadBody{"trailer_nul", std::string("0\r\nX: \0\r\n\r\n", 11)},
        BadBody{"trailer_huge", "0\r\nX: " + std::string(5000, 't') + "\r\n\r\n"}),
    [](const ::testing::TestParamInfo<BadBody>& info) { return std::string(info.param.name); });

TEST(Http1Body, ChunkFrame) {
  EXPECT_EQ(chunk_frame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(chunk_frame(std::string(255, 'x')), "ff\r\n" + std::string(255, 'x') + "\r\n");
  EXPECT_EQ(chunk_frame(""), "");  // never an accidental last-chunk
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(Http1Body, ChunkFrameRoundTrips) {
  std::string wire;
  std::string expected;
  for (size_t n : {1u, 15u, 16u, 4096u, 0u, 70000u}) {
    const std::string piece(n, static_cast<char>('a' + n % 26));
    wire += chunk_frame(piece);
    expected += piece;
  }
  wire += kLastChunk;
  const Decoded r = decode_all(BodyFraming::kChunked, wire);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(r.payload, expected);
  EXPECT_EQ(r.consumed, wire.size());
}

}  // namespace
}  // namespace zn::http
