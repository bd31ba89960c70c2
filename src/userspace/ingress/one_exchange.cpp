#include "userspace/ingress/one_exchange.h"

#include "userspace/http/rewrite.h"

namespace zn::ingress {
namespace {

// Hop-by-hop fields that say whether the connection goes on.
bool connection_field(std::string_view line) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view name = line.substr(0, colon);
  return http::iequals(name, "Connection") || http::iequals(name, "Keep-Alive") ||
         http::iequals(name, "Proxy-Connection");
}

}  // namespace

std::string rewrite_head(std::string_view head, std::string_view extra,
                         std::optional<std::string_view> connection) {
  size_t at = head.find("\r\n");
  if (at == std::string_view::npos) return std::string(head);
  std::string out(head.substr(0, at + 2));
  out += extra;
  at += 2;
  // The parser accepted the head: CRLF-ended field lines (no obs-fold), then
  // the empty line.
  for (;;) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos || end == at) break;
    const std::string_view line = head.substr(at, end - at);
    if (!connection || !connection_field(line)) {
      out += line;
      out += "\r\n";
    }
    at = end + 2;
  }
  if (connection) {
    out += "Connection: ";
    out += *connection;
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

RequestBodyRelay::RequestBodyRelay(const http::RequestHead& head, const http::HttpLimits& limits)
    : decoder_(head.framing, head.content_length, limits),
      chunked_(head.framing == http::BodyFraming::kChunked),
      done_(decoder_.done()) {}

RequestBodyRelay::Step RequestBodyRelay::feed(std::string_view in) {
  Step step;
  if (done_) {
    step.done = true;
    return step;
  }
  std::string payload;
  const http::BodyDecoder::Step s = decoder_.feed(in, payload);
  step.consumed = s.consumed;
  step.error = s.error;
  step.error_reason = s.error_reason;
  if (s.error) return step;
  if (chunked_) {
    if (!payload.empty()) step.out = http::chunk_frame(payload);
    if (s.done) step.out += http::kLastChunk;
  } else {
    step.out = std::move(payload);
  }
  step.done = done_ = s.done;
  return step;
}

}  // namespace zn::ingress
