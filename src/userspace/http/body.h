// Incremental HTTP/1.1 message-body decoding (RFC 9112 6-7) for the proxy.
//
// The proxy never forwards the guest's framing: it decodes the body here and
// re-frames what it sends (chunk_frame / kLastChunk, or a Content-Length it
// writes itself). The decoder is therefore as strict as the head parser: a
// chunked body another implementation could split differently (bare LF,
// whitespace or "0x" in the size, junk after the data, ...) is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/message.h"

namespace zn::http {

class BodyDecoder {
 public:
  // content_length is used with kContentLength only. kNone (and a zero
  // Content-Length) is done from the start.
  BodyDecoder(BodyFraming framing, uint64_t content_length, const HttpLimits& limits);

  struct Step {
    size_t consumed = 0;  // bytes of `in` that belonged to the body
    bool done = false;    // the body is complete; in[consumed..] is the next message
    bool error = false;   // malformed; the connection must be closed
    std::string error_reason;
  };

  // Consumes from `in` up to the end of the body, appending the decoded
  // payload to `out`. Input may be split anywhere, down to single bytes.
  // After done or error, further calls consume nothing and repeat the state.
  // kUntilClose never completes: the caller ends the body at EOF.
  Step feed(std::string_view in, std::string& out);

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  // A chunked body's trailer fields, checked like header fields, once
  // done. The proxy never forwards a guest's; an upstream's go on filtered
  // (forwarded_trailer_fields) and scrubbed.
  const std::vector<Header>& trailers() const { return trailers_; }

 private:
  enum class State { kData, kSizeLine, kDataCr, kDataLf, kTrailer, kUntilClose, kDone, kError };

  void fail(const char* reason);
  bool end_size_line();
  bool end_trailer_line();

  State state_;
  HttpLimits limits_;
  uint64_t remaining_ = 0;  // payload bytes left in the Content-Length body or current chunk
  bool chunked_ = false;
  std::string line_;          // the chunk-size or trailer line being assembled (CR included)
  size_t trailer_bytes_ = 0;  // trailer section bytes seen so far
  const char* error_ = nullptr;
  std::vector<Header> trailers_;
};

// One chunk carrying `data`: HEXSIZE CRLF data CRLF. Empty data gives an
// empty string, since a zero-size chunk would end the body.
std::string chunk_frame(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
// The last chunk carrying `trailers` (kLastChunk when there are none).
std::string last_chunk(const std::vector<Header>& trailers);

}  // namespace zn::http
