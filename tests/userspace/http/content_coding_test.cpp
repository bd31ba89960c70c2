#include "userspace/http/content_coding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

namespace zn::http {
namespace {

// window_bits: 15 zlib, 31 gzip, -15 raw deflate.
std::string deflated(const std::string& in, int window_bits) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

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
