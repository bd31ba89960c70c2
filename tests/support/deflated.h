// Test bodies coded as a client would send them (zlib's deflate), and
// decoded as an upstream would read them.
#pragma once

#include <zlib.h>

#include <stdexcept>
#include <string>

namespace zn::test {

// window_bits: 15 zlib, 31 gzip, -15 raw deflate.
inline std::string deflated(const std::string& in, int window_bits) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, window_bits, 9, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&zs, in.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (r != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

// One stream of `in` read with `window_bits` (as above; 47: zlib or gzip),
// what follows it left alone, as a lenient reader does; "" if it does not
// read.
inline std::string inflated(const std::string& in, int window_bits) {
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) return "";
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  std::string out;
  char chunk[16384];
  int r = Z_OK;
  while (r == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    r = inflate(&zs, Z_NO_FLUSH);
    out.append(chunk, sizeof chunk - zs.avail_out);
    if (r == Z_BUF_ERROR && zs.avail_in == 0) break;
  }
  inflateEnd(&zs);
  return r == Z_STREAM_END ? out : "";
}

}  // namespace zn::test
