// Which bytes of a buffer belong to a set, 32 at a time: the secret
// scrubber's prefilter (secret_scrubber.cpp), which runs its automaton only
// where a byte pair of some pattern or a byte that is not plain in a
// canonical view occurs.
//
// The set test is Hyperscan's "truffle": two 16-byte tables indexed by the
// low nibble (one for bytes below 0x80, one for the rest) give a bit per
// value of bits 4-6, so any set of the 256 bytes is tested exactly with a
// few shuffles (AVX2 when the CPU has it, checked once; a table otherwise).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zn::proxy {

class ByteSet {
 public:
  void add(unsigned char c);
  bool has(unsigned char c) const { return (bits_[c >> 6] >> (c & 63)) & 1; }

  // Bit i of marks[i / 64] is set when data[i] is in the set, for i < n;
  // marks holds (n + 63) / 64 words, the last one's unused bits clear.
  void mark(const unsigned char* data, size_t n, uint64_t* marks) const;

  const uint8_t* low_clear() const { return low_clear_; }
  const uint8_t* low_set() const { return low_set_; }

 private:
  uint64_t bits_[4] = {};
  alignas(16) uint8_t low_clear_[16] = {};  // bytes < 0x80: bit (c >> 4) of entry c & 15
  alignas(16) uint8_t low_set_[16] = {};    // bytes >= 0x80: bit ((c >> 4) & 7) of entry c & 15
};

// The first index i in [at, n) whose bit is set in marks, or n.
inline size_t next_mark(const uint64_t* marks, size_t at, size_t n) {
  if (at >= n) return n;
  size_t w = at / 64;
  uint64_t word = marks[w] & (~uint64_t{0} << (at % 64));
  const size_t words = (n + 63) / 64;
  while (word == 0) {
    if (++w == words) return n;
    word = marks[w];
  }
  const size_t i = w * 64 + static_cast<size_t>(__builtin_ctzll(word));
  return i < n ? i : n;
}

}  // namespace zn::proxy
