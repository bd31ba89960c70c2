// libFuzzer target: arbitrary bytes as a request body under a chosen stack
// of content codings (zn::http::decode_content, what the proxy screens a
// coded body with), and the re-coding of a changed body (encode_content,
// what goes upstream after a placeholder swap).
//
// Build and run: as client_hello_fuzz.cpp says, with --target
// content_coding_fuzz and corpus fuzz/corpus/content_coding.
//
// Besides "no crash / no sanitizer report", it checks what the screen
// relies on: a decoded body never passes the bound, has one format per
// layer, and what encode_content makes of it reads back, under the same
// codings, as the same bytes and formats.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/content_coding.h"

namespace {

using namespace zn::http;

constexpr size_t kMaxDecoded = 1 << 16;

// The first byte picks the stack (in the order applied, as a
// Content-Encoding field lists it).
const std::vector<std::vector<std::string>> kStacks = {
    {"gzip"},
    {"deflate"},
    {"x-gzip"},
    {"gzip", "gzip"},
    {"deflate", "gzip"},
    {"gzip", "deflate"},
    {"deflate", "deflate"},
    {"br"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string>& codings = kStacks[data[0] % kStacks.size()];
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const DecodedBody d = decode_content(body, codings, kMaxDecoded);
  if (!d.ok) {
    if (d.status != 400 && d.status != 413 && d.status != 415) std::abort();
    return 0;
  }
  if (d.bytes.size() > kMaxDecoded || d.layers.size() != codings.size()) std::abort();
  const std::string changed = d.bytes + "+";
  const DecodedBody back = decode_content(encode_content(changed, d.layers), codings, kMaxDecoded + 1);
  if (!back.ok || back.bytes != changed || back.layers != d.layers) std::abort();
  return 0;
}
