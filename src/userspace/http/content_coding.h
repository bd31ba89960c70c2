// A request body's content codings (RFC 9110 8.4), read so that the proxy
// can screen what the upstream will decode: a canary or placeholder
// gzip-compressed by the guest is still the canary once the upstream
// inflates it. gzip and deflate (zlib, or raw deflate as some clients send
// it) are decoded, bounded in output; any other coding (br, zstd, compress,
// a name of the guest's own) cannot be screened and is refused.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/message.h"

namespace zn::http {

// The codings of a head's Content-Encoding fields, in the order applied,
// lower-cased, "identity" and empty members left out.
std::vector<std::string> content_codings(const std::vector<Header>& headers);

// The stream format a layer was read as, so that it can be written again
// the same way.
enum class DeflateFormat { kGzip, kZlib, kRaw };

struct DecodedBody {
  bool ok = false;
  int status = 0;     // when not ok: 415 (a coding that cannot be read), 413 (past the bound), 400 (corrupt)
  std::string error;  // when not ok: why, for the audit
  std::string bytes;  // when ok: the body as the upstream will read it
  // When ok: each layer's format, outermost (last applied) first.
  std::vector<DeflateFormat> layers;
};

// `body` with `codings` undone, last applied first; past `max_decoded`
// bytes (in any layer) it stops and says so: a small body may inflate to
// gigabytes. A "deflate" layer is zlib by RFC 9110, raw deflate by some
// clients and servers: one that reads as both (a zlib stream whose bytes
// are also a complete raw stream, with other contents) is refused, since
// the screen could read one body and the upstream another. So are bytes
// after the end of a stream, and more than kMaxCodingLayers layers.
inline constexpr size_t kMaxCodingLayers = 4;
DecodedBody decode_content(std::string_view body, const std::vector<std::string>& codings,
                           size_t max_decoded);

// `bytes` coded again layer by layer as `layers` says (innermost first
// applied, so the outermost last), at the fastest level: the body the
// upstream gets after a change to its decoded bytes.
std::string encode_content(std::string_view bytes, const std::vector<DeflateFormat>& layers);

}  // namespace zn::http
