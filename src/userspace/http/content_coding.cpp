#include "userspace/http/content_coding.h"

#include <zlib.h>

#include <algorithm>

namespace zn::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); });
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

enum class Inflated { kOk, kTooBig, kCorrupt };

// windowBits: 15 + 32 reads a zlib or a gzip stream (header detected);
// -15 reads raw deflate. Concatenated gzip members are read in turn.
Inflated inflate_all(std::string_view in, int window_bits, size_t max_out, std::string& out) {
  z_stream zs{};
  if (inflateInit2(&zs, window_bits) != Z_OK) return Inflated::kCorrupt;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  char chunk[16384];
  Inflated result = Inflated::kOk;
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof chunk;
    const int r = inflate(&zs, Z_NO_FLUSH);
    const size_t produced = sizeof chunk - zs.avail_out;
    if (out.size() + produced > max_out) {
      result = Inflated::kTooBig;
      break;
    }
    out.append(chunk, produced);
    if (r == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // Another gzip member follows (RFC 1952 allows several).
      if (window_bits < 0 || inflateReset(&zs) != Z_OK) {
        result = Inflated::kCorrupt;
        break;
      }
      continue;
    }
    if (r != Z_OK && !(r == Z_BUF_ERROR && produced > 0)) {
      result = Inflated::kCorrupt;
      break;
    }
    if (zs.avail_in == 0 && produced == 0) {
      result = Inflated::kCorrupt;  // truncated: more input was needed
      break;
    }
  }
  inflateEnd(&zs);
  return result;
}

}  // namespace

std::vector<std::string> content_codings(const std::vector<Header>& headers) {
  std::vector<std::string> out;
  for (const Header& h : headers) {
    if (!iequals(h.name, "content-encoding")) continue;
    std::string_view v = h.value;
    for (;;) {
      const size_t comma = v.find(',');
      const std::string_view token = trimmed(v.substr(0, comma));
      if (!token.empty() && !iequals(token, "identity")) out.push_back(lower(token));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return out;
}

DecodedBody decode_content(std::string_view body, const std::vector<std::string>& codings,
                           size_t max_decoded) {
  DecodedBody d;
  std::string current(body);
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
    const std::string& c = *it;
    std::string next;
    Inflated r;
    if (c == "gzip" || c == "x-gzip") {
      r = inflate_all(current, 15 + 32, max_decoded, next);
    } else if (c == "deflate") {
      // RFC 9110 says zlib; some clients send raw deflate.
      r = inflate_all(current, 15 + 32, max_decoded, next);
      if (r == Inflated::kCorrupt) {
        next.clear();
        r = inflate_all(current, -15, max_decoded, next);
      }
    } else {
      d.status = 415;
      d.error = "request content-coding '" + c + "' cannot be screened";
      return d;
    }
    if (r == Inflated::kTooBig) {
      d.status = 413;
      d.error = "request body decodes past " + std::to_string(max_decoded) + " bytes";
      return d;
    }
    if (r == Inflated::kCorrupt) {
      d.status = 400;
      d.error = "request body is not valid " + c;
      return d;
    }
    current.swap(next);
  }
  d.ok = true;
  d.bytes = std::move(current);
  return d;
}

}  // namespace zn::http
