// libFuzzer target: arbitrary bytes into the zn::http parsers (request head,
// then the rest as its body; response head; chunked body; target
// normalisation).
//
// Build (clang only):
//   cmake -S . -B build-fuzz -DZN_FUZZ=ON -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build-fuzz --target http1_fuzz
// Run:
//   mkdir -p /tmp/http1_corpus && ./build-fuzz/fuzz/http1_fuzz -max_total_time=60 /tmp/http1_corpus
//
// Besides "no crash / no sanitizer report", it checks the properties the
// proxy relies on: a head's verdict does not depend on how the bytes were
// split across reads, decoded bodies re-frame to themselves, and normalised
// paths have no dot segments or encoded slashes left.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/http/body.h"
#include "userspace/http/message.h"
#include "userspace/http/target.h"

namespace {

using namespace zn::http;

// Incremental checks are quadratic; keep them to inputs where that is cheap.
constexpr size_t kMaxIncremental = 256;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same_headers(const std::vector<Header>& a, const std::vector<Header>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  return true;
}

bool same_request(const RequestHead& a, const RequestHead& b) {
  return a.method == b.method && a.target == b.target && a.version_minor == b.version_minor &&
         same_headers(a.headers, b.headers) && a.framing == b.framing &&
         a.content_length == b.content_length && a.host == b.host && a.keep_alive == b.keep_alive &&
         a.expect_continue == b.expect_continue && a.upgrade == b.upgrade;
}

void check_result(const ParseResult& r, size_t size, bool response) {
  check(r.consumed <= size);
  if (r.state == ParseState::kDone) check(r.consumed >= 4);
  if (r.state == ParseState::kError) {
    check(!r.error.empty());
    if (response) {
      check(r.error_status == 502);
    } else {
      const int s = r.error_status;
      check(s == 400 || s == 417 || s == 431 || s == 501 || s == 505);
    }
  }
}

// Every prefix of the input reaches kNeedMore or the whole input's verdict.
void check_request_incremental(std::string_view in, const HttpLimits& limits, const ParseResult& whole,
                               const RequestHead& whole_head) {
  for (size_t n = 0; n < in.size(); ++n) {
    RequestHead h;
    const ParseResult r = parse_request_head(in.substr(0, n), limits, h);
    if (whole.state == ParseState::kDone) {
      if (n < whole.consumed) {
        check(r.state == ParseState::kNeedMore);
      } else {
        check(r.state == ParseState::kDone && r.consumed == whole.consumed && same_request(h, whole_head));
      }
    } else if (whole.state == ParseState::kError) {
      check(r.state == ParseState::kNeedMore ||
            (r.state == ParseState::kError && r.error_status == whole.error_status));
    } else {
      check(r.state == ParseState::kNeedMore);
    }
  }
}

struct Decoded {
  std::string payload;
  size_t consumed = 0;
  bool done = false;
  bool error = false;
};

Decoded decode(BodyFraming framing, uint64_t length, std::string_view in, bool bytewise) {
  BodyDecoder d(framing, length, HttpLimits{});
  Decoded r;
  if (!bytewise) {
    const BodyDecoder::Step s = d.feed(in, r.payload);
    r = {r.payload, s.consumed, s.done, s.error};
  } else {
    for (size_t i = 0; i < in.size() && !r.done && !r.error; ++i) {
      const BodyDecoder::Step s = d.feed(in.substr(i, 1), r.payload);
      r.consumed += s.consumed;
      r.done = s.done;
      r.error = s.error;
    }
    if (in.empty()) r.done = d.done();
  }
  check(r.done == d.done());
  check(r.consumed <= in.size());
  check(r.payload.size() <= r.consumed);
  // Without an end or error the decoder must have taken everything offered.
  if (!r.done && !r.error) check(r.consumed == in.size());
  return r;
}

void check_body(BodyFraming framing, uint64_t length, std::string_view in) {
  const Decoded whole = decode(framing, length, in, false);
  if (in.size() <= kMaxIncremental) {
    const Decoded bytes = decode(framing, length, in, true);
    check(bytes.error == whole.error && bytes.done == whole.done);
    if (!whole.error) check(bytes.payload == whole.payload && bytes.consumed == whole.consumed);
  }
  if (framing == BodyFraming::kChunked && whole.done) {
    // What the proxy forwards decodes to what it received.
    const std::string reframed = chunk_frame(whole.payload) + std::string(kLastChunk);
    const Decoded again = decode(BodyFraming::kChunked, 0, reframed, false);
    check(again.done && again.payload == whole.payload && again.consumed == reframed.size());
  }
}

bool has_dot_segment(std::string_view path) {
  for (std::string_view seg : {"/./", "/../"})
    if (path.find(seg) != std::string_view::npos) return true;
  return path.ends_with("/.") || path.ends_with("/..");
}

void check_target(std::string_view target) {
  const auto t = normalise_target(target);
  if (!t) return;
  check(!t->path.empty() && t->path[0] == '/');
  check(!has_dot_segment(t->path));
  check(t->path.find("%2F") == std::string::npos && t->path.find("%2f") == std::string::npos);
  check(t->path.find('\\') == std::string::npos && t->path.find('?') == std::string::npos);
  for (char c : t->path) check(static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f);
  const size_t q = target.find('?');
  check(t->has_query == (q != std::string_view::npos));
  if (t->has_query) check(t->query == target.substr(q + 1));
  // Normalising is idempotent: the forwarded path reads the same upstream.
  const auto again = normalise_target(t->path);
  check(again && again->path == t->path && !again->has_query);
}

void fuzz_request(std::string_view in, const HttpLimits& limits) {
  RequestHead head;
  const ParseResult r = parse_request_head(in, limits, head);
  check_result(r, in.size(), false);
  if (r.state == ParseState::kDone) {
    check(r.consumed <= limits.max_head_bytes);
    check(head.headers.size() <= limits.max_headers);
    check(!head.target.empty() && head.target[0] == '/');
    check(head.version_minor == 1 ? !head.host.empty() : true);
    check(head.framing != BodyFraming::kUntilClose);
    check_body(head.framing, head.content_length, in.substr(r.consumed));
    check_target(head.target);
  }
  if (in.size() <= kMaxIncremental) check_request_incremental(in, limits, r, head);
}

void fuzz_response(std::string_view in, bool request_was_head) {
  ResponseHead head;
  const ParseResult r = parse_response_head(in, HttpLimits{}, request_was_head, head);
  check_result(r, in.size(), true);
  if (r.state != ParseState::kDone) return;
  check(head.status >= 100 && head.status <= 599);
  if (request_was_head) check(head.framing == BodyFraming::kNone);
  if (head.framing == BodyFraming::kUntilClose) check(!head.keep_alive);
  if (head.framing != BodyFraming::kUntilClose)
    check_body(head.framing, head.content_length, in.substr(r.consumed));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  fuzz_request(in, HttpLimits{});
  HttpLimits small;  // reach the limit paths with short inputs too
  small.max_head_bytes = 64;
  small.max_headers = 3;
  small.max_chunk_line = 16;
  small.max_trailer_bytes = 32;
  fuzz_request(in, small);
  fuzz_response(in, false);
  fuzz_response(in, true);
  check_body(BodyFraming::kChunked, 0, in);
  check_target(in);
  return 0;
}
