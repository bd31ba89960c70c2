#include "userspace/http/content_coding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

#include "support/deflated.h"

namespace zn::http {
namespace {

using test::deflated;
using test::inflated;

const std::string kText = "{\"note\":\"the planted AKIAZNCANARY00001 inside\"}";

TEST(ContentCoding, CodingsAreReadInOrderWithoutIdentity) {
  EXPECT_EQ(content_codings({{"Content-Encoding", " GZIP , identity,deflate"}, {"X", "br"}}),
            (std::vector<std::string>{"gzip", "deflate"}));
  EXPECT_EQ(content_codings({{"content-encoding", "gzip"}, {"Content-Encoding", "br"}}),
            (std::vector<std::string>{"gzip", "br"}));
  EXPECT_TRUE(content_codings({{"Content-Encoding", "identity, "}}).empty());
  EXPECT_TRUE(content_codings({{"Content-Type", "gzip"}}).empty());
}

// What the upstream will read, whatever spelling of deflate the guest chose.
TEST(ContentCoding, GzipAndDeflateInEverySpellingAreDecoded) {
  const std::string gz = deflated(kText, 31);
  for (const auto& [body, codings] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {gz, {"gzip"}},
           {gz, {"x-gzip"}},
           {deflated(kText, 15), {"deflate"}},
           {deflated(kText, -15), {"deflate"}},   // raw deflate, as some clients send
           {deflated(gz, 31), {"gzip", "gzip"}},  // applied twice
           {deflated(deflated(kText, 15), 31), {"deflate", "gzip"}},
           {gz + deflated(" more", 31), {"gzip"}},  // two gzip members
       }) {
    DecodedBody d = decode_content(body, codings, 1 << 20);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_NE(d.bytes.find("AKIAZNCANARY00001"), std::string::npos);
    EXPECT_EQ(d.bytes.substr(0, kText.size()), kText);
  }
  // Positive control: no coding, the body as it is.
  DecodedBody plain = decode_content(kText, {}, 1 << 20);
  ASSERT_TRUE(plain.ok);
  EXPECT_EQ(plain.bytes, kText);
}

TEST(ContentCoding, WhatCannotBeScreenedIsRefused) {
  // Codings the proxy does not decode: 415, whatever they hold.
  for (const char* c : {"br", "zstd", "compress", "x-compress", "made-up"}) {
    DecodedBody d = decode_content("\x1b\x2a\x00", {c}, 1 << 20);
    EXPECT_FALSE(d.ok) << c;
    EXPECT_EQ(d.status, 415) << c;
  }
  // A bomb: 32 MiB of zeros in a few tens of KiB.
  const std::string bomb = deflated(std::string(32 << 20, '\0'), 31);
  EXPECT_LT(bomb.size(), 100u << 10);
  DecodedBody d = decode_content(bomb, {"gzip"}, 16 << 20);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.status, 413);
  // The bound holds in an inner layer too.
  d = decode_content(deflated(bomb, 31), {"gzip", "gzip"}, 16 << 20);
  EXPECT_EQ(d.status, 413);
  // Corrupt, truncated, or a coding that does not match the bytes: 400.
  const std::string gz = deflated(kText, 31);
  std::string corrupt = gz;
  corrupt[corrupt.size() / 2] ^= 0x5a;
  for (const std::string& bad :
       {corrupt, gz.substr(0, gz.size() - 9), std::string("not gzip at all"), std::string()}) {
    d = decode_content(bad, {"gzip"}, 1 << 20);
    EXPECT_FALSE(d.ok);
    EXPECT_EQ(d.status, 400) << d.error;
  }
}

// A "deflate" body one reader takes as zlib and another as raw deflate
// (both readings exist: RFC 9110 says zlib, some clients and servers use
// raw): the zlib stream opens with a stored block whose bytes also start a
// raw stream, which carries the canary compressed where the zlib reading
// shows only filler. The screen cannot know which one the upstream reads:
// refused.
std::string zlib_and_raw(const std::string& raw_payload) {
  // 78 01: a zlib header, and as raw deflate a stored block (BFINAL 0) of
  // LEN 01 00, with the zlib stream's first byte 00 the high byte.
  std::string z = {'\x78', '\x01', '\x00'};
  // zlib: a stored block of 0xfffe bytes follows (fe ff / 01 00); raw: its
  // NLEN (fe ff), one stored byte (01), then at 00 another stored block of
  // LEN 0 (00 00 / ff ff), then the raw stream proper.
  z += std::string{'\xfe', '\xff', '\x01', '\x00', '\x00', '\x00', '\xff', '\xff'};
  std::string stored = z.substr(7);  // what the zlib stored block holds so far
  stored += raw_payload;
  stored.resize(0xfffe, 'f');
  std::string out = z.substr(0, 7) + stored;
  out += std::string{'\x01', '\x00', '\x00', '\xff', '\xff'};  // a last, empty stored block
  const uLong sum = adler32(adler32(0, nullptr, 0), reinterpret_cast<const Bytef*>(stored.data()),
                            static_cast<uInt>(stored.size()));
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((sum >> shift) & 0xff));
  return out;
}

TEST(ContentCoding, ADeflateBodyThatReadsTwoWaysIsRefused) {
  const std::string body = zlib_and_raw(deflated(kText, -15));
  // The construction holds: as zlib only filler, no canary; as raw (what
  // follows the raw stream left unread) the canary.
  const std::string as_zlib = inflated(body, 15), as_raw = inflated(body, -15);
  ASSERT_EQ(as_zlib.size(), 0xfffeu);
  EXPECT_EQ(as_zlib.find("AKIAZNCANARY00001"), std::string::npos);
  EXPECT_NE(as_raw.find("AKIAZNCANARY00001"), std::string::npos) << as_raw.size();
  DecodedBody d = decode_content(body, {"deflate"}, 1 << 20);
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.status, 400);
  EXPECT_NE(d.error.find("both zlib and raw"), std::string::npos) << d.error;
  // Under gzip too, and as the inner layer.
  d = decode_content(deflated(body, 31), {"deflate", "gzip"}, 1 << 20);
  EXPECT_EQ(d.status, 400);
  // Positive control: honest zlib and raw bodies read one way each.
  for (int bits : {15, -15}) {
    d = decode_content(deflated(kText, bits), {"deflate"}, 1 << 20);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_EQ(d.bytes, kText);
    EXPECT_EQ(d.layers, std::vector<DeflateFormat>{bits == 15 ? DeflateFormat::kZlib : DeflateFormat::kRaw});
  }
}

// Bytes a lenient reader would skip and a strict one refuse, or another
// format under a coding's name: one reading only, or none.
TEST(ContentCoding, TrailingBytesAndMislabelledStreamsAreRefused) {
  for (const auto& [body, coding] : std::vector<std::pair<std::string, std::string>>{
           {deflated(kText, 15) + "AKIAZNCANARY00001", "deflate"},
           {deflated(kText, -15) + deflated("AKIAZNCANARY00001", -15), "deflate"},
           {deflated(kText, 31) + "trailing", "gzip"},
           {deflated(kText, 15), "gzip"},     // zlib named gzip
           {deflated(kText, 31), "deflate"},  // gzip named deflate
       }) {
    DecodedBody d = decode_content(body, {coding}, 1 << 20);
    EXPECT_FALSE(d.ok) << coding << " " << body.size();
    EXPECT_EQ(d.status, 400) << d.error;
  }
  DecodedBody d = decode_content(deflated(kText, 31), {"gzip"}, 1 << 20);
  EXPECT_TRUE(d.ok);  // the positive control
  // More layers than any client stacks.
  std::string deep = kText;
  std::vector<std::string> codings;
  for (size_t i = 0; i <= kMaxCodingLayers; ++i) {
    deep = deflated(deep, 31);
    codings.push_back("gzip");
  }
  EXPECT_EQ(decode_content(deep, codings, 1 << 20).status, 415);
  codings.pop_back();
  EXPECT_TRUE(decode_content(inflated(deep, 31), codings, 1 << 20).ok);
}

// A body changed after decoding goes coded again in its own layers'
// formats, and reads back as the change.
TEST(ContentCoding, ABodyIsCodedAgainLayerByLayer) {
  for (const auto& [body, codings] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {deflated(kText, 31), {"gzip"}},
           {deflated(kText, 15), {"deflate"}},
           {deflated(kText, -15), {"deflate"}},
           {deflated(deflated(kText, -15), 31), {"deflate", "gzip"}},
           {deflated(deflated(kText, 31), 15), {"gzip", "deflate"}},
       }) {
    DecodedBody d = decode_content(body, codings, 1 << 20);
    ASSERT_TRUE(d.ok) << d.error;
    const std::string changed = d.bytes + " changed";
    const std::string again = encode_content(changed, d.layers);
    DecodedBody back = decode_content(again, codings, 1 << 20);
    ASSERT_TRUE(back.ok) << back.error;
    EXPECT_EQ(back.bytes, changed);
    EXPECT_EQ(back.layers, d.layers);
  }
  EXPECT_EQ(encode_content(kText, {}), kText);
}

// Random data cut anywhere still decodes or fails cleanly: never a crash,
// never more than the bound.
TEST(ContentCoding, ArbitraryBytesNeverPassTheBound) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string in(rng() % 512, '\0');
    for (char& c : in) c = static_cast<char>(rng());
    if (i % 2) in = deflated(in, 31).substr(0, rng() % (in.size() + 20));
    DecodedBody d = decode_content(in, {i % 3 ? "gzip" : "deflate"}, 4096);
    if (d.ok) {
      EXPECT_LE(d.bytes.size(), 4096u);
    }
  }
}

}  // namespace
}  // namespace zn::http
