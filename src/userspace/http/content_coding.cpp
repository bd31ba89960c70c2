#include "userspace/http/content_coding.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>

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

// kTrailing: a complete zlib or raw deflate stream with bytes after it
// (what a lenient reader takes as that stream).
enum class Inflated { kOk, kTooBig, kCorrupt, kTrailing };

// windowBits: 15 + 16 reads gzip, 15 zlib, -15 raw deflate. Concatenated
// gzip members are read in turn.
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
      // Another gzip member follows (RFC 1952 allows several); a zlib or
      // raw stream is one.
      if (window_bits != 15 + 16) {
        result = Inflated::kTrailing;
        break;
      }
      if (inflateReset(&zs) != Z_OK) {
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
  if (codings.size() > kMaxCodingLayers) {
    d.status = 415;
    d.error = "request body has more than " + std::to_string(kMaxCodingLayers) + " content-codings";
    return d;
  }
  std::string current(body);
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
    const std::string& c = *it;
    std::string next;
    Inflated r;
    DeflateFormat format = DeflateFormat::kZlib;
    if (c == "gzip" || c == "x-gzip") {
      format = DeflateFormat::kGzip;
      r = inflate_all(current, 15 + 16, max_decoded, next);
    } else if (c == "deflate") {
      // RFC 9110 says zlib; some clients send raw deflate, and a reader
      // that expects it may take a zlib stream's bytes as a raw one.
      std::string raw;
      const Inflated as_raw = inflate_all(current, -15, max_decoded, raw);
      r = inflate_all(current, 15, max_decoded, next);
      if (as_raw == Inflated::kTooBig) {
        r = as_raw;  // either reading unscreened is one too many
      } else if (r == Inflated::kOk && (as_raw == Inflated::kOk || as_raw == Inflated::kTrailing)) {
        d.status = 400;
        d.error = "request body reads as both zlib and raw deflate";
        return d;
      } else if (r != Inflated::kOk && r != Inflated::kTooBig && as_raw == Inflated::kOk) {
        r = as_raw;
        next.swap(raw);
        format = DeflateFormat::kRaw;
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
    if (r == Inflated::kCorrupt || r == Inflated::kTrailing) {
      d.status = 400;
      d.error = "request body is not valid " + c;
      return d;
    }
    current.swap(next);
    d.layers.push_back(format);
  }
  d.ok = true;
  d.bytes = std::move(current);
  return d;
}

std::string encode_content(std::string_view bytes, const std::vector<DeflateFormat>& layers) {
  std::string current(bytes);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const int window_bits = *it == DeflateFormat::kGzip ? 15 + 16 : *it == DeflateFormat::kZlib ? 15 : -15;
    z_stream zs{};
    if (deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::bad_alloc();
    std::string out(deflateBound(&zs, static_cast<uLong>(current.size())) + 32, '\0');
    zs.next_in = reinterpret_cast<Bytef*>(current.data());
    zs.avail_in = static_cast<uInt>(current.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int r = deflate(&zs, Z_FINISH);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    if (r != Z_STREAM_END) throw std::runtime_error("deflate did not finish within its bound");
    explicit_bzero(current.data(), current.size());
    current.swap(out);
  }
  return current;
}

}  // namespace zn::http
