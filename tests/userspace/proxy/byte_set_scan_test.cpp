#include "userspace/proxy/byte_set_scan.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace zn::proxy {
namespace {

// Every byte of random buffers, of every length around the 64-byte blocks
// (the vector body and the table's tail), marked exactly when it is in a
// random set (sparse, dense, and the high bytes); next_mark finds them all.
TEST(ByteSetScan, MarksExactlyTheBytesOfTheSet) {
  std::mt19937 rng(7);
  for (int round = 0; round < 60; ++round) {
    ByteSet set;
    std::vector<bool> in(256, false);
    const unsigned density = 1 + rng() % 255;
    for (int c = 0; c < 256; ++c) {
      if (rng() % 256 < density) {
        set.add(static_cast<unsigned char>(c));
        in[c] = true;
      }
    }
    for (int c = 0; c < 256; ++c) ASSERT_EQ(set.has(static_cast<unsigned char>(c)), in[c]) << c;
    for (size_t n : {size_t{0}, size_t{1}, size_t{31}, size_t{63}, size_t{64}, size_t{65}, size_t{127},
                     size_t{128}, size_t{200}, size_t{4096 + 17}}) {
      std::vector<unsigned char> data(n);
      for (auto& b : data) b = static_cast<unsigned char>(rng());
      std::vector<uint64_t> marks((n + 63) / 64 + 1, ~uint64_t{0});
      set.mark(data.data(), n, marks.data());
      std::vector<size_t> expected, found;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ((marks[i / 64] >> (i % 64)) & 1, in[data[i]] ? 1u : 0u) << "byte " << i << " of " << n;
        if (in[data[i]]) expected.push_back(i);
      }
      if (n % 64 != 0) {
        EXPECT_EQ(marks[n / 64] >> (n % 64), 0u) << "bits past the end";
      }
      for (size_t i = next_mark(marks.data(), 0, n); i < n; i = next_mark(marks.data(), i + 1, n))
        found.push_back(i);
      EXPECT_EQ(found, expected);
    }
  }
}

TEST(ByteSetScan, AnEmptySetMarksNothingAndAFullOneEverything) {
  ByteSet none, all;
  for (int c = 0; c < 256; ++c) all.add(static_cast<unsigned char>(c));
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i));
  const auto* d = reinterpret_cast<const unsigned char*>(data.data());
  std::vector<uint64_t> marks(5);
  none.mark(d, data.size(), marks.data());
  EXPECT_EQ(next_mark(marks.data(), 0, data.size()), data.size());
  all.mark(d, data.size(), marks.data());
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(next_mark(marks.data(), i, data.size()), i);
}

}  // namespace
}  // namespace zn::proxy
