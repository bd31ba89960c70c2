#include "userspace/proxy/byte_set_scan.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zn::proxy {

void ByteSet::add(unsigned char c) {
  bits_[c >> 6] |= uint64_t{1} << (c & 63);
  const auto bit = static_cast<uint8_t>(1u << ((c >> 4) & 7));
  if (c & 0x80) {
    low_set_[c & 15] |= bit;
  } else {
    low_clear_[c & 15] |= bit;
  }
}

namespace {

void mark_table(const ByteSet& set, const unsigned char* data, size_t n, uint64_t* marks, size_t from) {
  for (size_t i = from; i < n; ++i)
    if (set.has(data[i])) marks[i / 64] |= uint64_t{1} << (i % 64);
}

}  // namespace

#if defined(__x86_64__)
namespace {

struct Truffle {
  __m256i clear, high, bit_of, top, seven, zero;
};

// Bit j set when byte j of the 32 at p is in the set.
__attribute__((target("avx2"))) inline uint32_t truffle_hits(const Truffle& t, const unsigned char* p) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  // pshufb gives 0 where the index has bit 7 set: each table answers for its
  // half of the bytes.
  const __m256i found = _mm256_or_si256(_mm256_shuffle_epi8(t.clear, v),
                                        _mm256_shuffle_epi8(t.high, _mm256_xor_si256(v, t.top)));
  const __m256i sel = _mm256_shuffle_epi8(t.bit_of, _mm256_and_si256(_mm256_srli_epi16(v, 4), t.seven));
  const __m256i miss = _mm256_cmpeq_epi8(_mm256_and_si256(found, sel), t.zero);
  return ~static_cast<uint32_t>(_mm256_movemask_epi8(miss));
}

__attribute__((target("avx2"))) size_t mark_avx2(const ByteSet& set, const unsigned char* data, size_t n,
                                                 uint64_t* marks) {
  Truffle t;
  t.clear = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(set.low_clear())));
  t.high = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(set.low_set())));
  t.bit_of = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32,
                              64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  t.top = _mm256_set1_epi8(-128);
  t.seven = _mm256_set1_epi8(7);
  t.zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    marks[i / 64] = uint64_t{truffle_hits(t, data + i)} | uint64_t{truffle_hits(t, data + i + 32)} << 32;
  return i;
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

}  // namespace
#endif

void ByteSet::mark(const unsigned char* data, size_t n, uint64_t* marks) const {
  if (n == 0) return;  // marks may be an empty vector's null data
  std::memset(marks, 0, (n + 63) / 64 * sizeof(uint64_t));
  size_t done = 0;
#if defined(__x86_64__)
  if (has_avx2()) done = mark_avx2(*this, data, n, marks);
#endif
  mark_table(*this, data, n, marks, done);
}

}  // namespace zn::proxy
