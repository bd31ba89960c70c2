// A stream's unsent body (body_buffer.h), kept in chunks: bytes come out
// as they went in, whatever the split of the appends and of the takes.
#include "userspace/h2/body_buffer.h"

#include <gtest/gtest.h>

#include <string>

namespace zn::h2 {
namespace {

std::string pattern(size_t n, size_t from = 0) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (from + i) % 23);
  return s;
}

std::string take(BodyBuffer& b, size_t n) {
  std::string out(n, '\0');
  out.resize(b.take(reinterpret_cast<uint8_t*>(out.data()), n));
  return out;
}

TEST(BodyBufferTest, BytesComeOutAsTheyWentInWhateverTheSplit) {
  BodyBuffer b;
  const std::string all = pattern(100000);
  // Appends of 1 byte up to past a chunk, taken in frames of other sizes.
  size_t at = 0;
  for (size_t n : {1u, 7u, 16383u, 16384u, 16385u, 3u, 40000u}) {
    const size_t k = std::min<size_t>(n, all.size() - at);
    b.append(std::string_view(all).substr(at, k));
    at += k;
  }
  b.append(std::string_view(all).substr(at));
  EXPECT_EQ(b.size(), all.size());
  std::string out;
  for (size_t n : {5u, 16384u, 1u, 9000u}) out += take(b, n);
  while (!b.empty()) out += take(b, 16384);
  EXPECT_EQ(out, all);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(take(b, 10), "");
}

// Taken as it comes: a writer's appends interleaved with the frames sent.
TEST(BodyBufferTest, TakingAndAppendingInterleave) {
  BodyBuffer b;
  std::string in, out;
  for (size_t round = 0; round < 200; ++round) {
    const std::string piece = pattern(round * 97 % 20000, in.size());
    in += piece;
    b.append(piece);
    out += take(b, round * 31 % 17000);
    EXPECT_EQ(b.size(), in.size() - out.size());
  }
  while (!b.empty()) out += take(b, 16384);
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace zn::h2
