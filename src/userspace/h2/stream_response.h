// A response the HTTP/1.1 pipeline produced (an HTTP/1.1 upstream's, or one
// from an HTTP/2 upstream read by stream_upstream.h) as the answer on a
// guest's HTTP/2 stream: the fields H2ServerSession::submit_response()
// takes, and whether DATA follows.
#pragma once

#include <string_view>
#include <vector>

#include "userspace/h2/h2_events.h"
#include "userspace/http/message.h"

namespace zn::h2 {

struct StreamResponse {
  int status = 0;
  // Lower-case names; no hop-by-hop or connection-specific field (those
  // Connection names included), no Transfer-Encoding; one Content-Length,
  // regenerated, when the upstream's body was framed by its length, or the
  // upstream's own as metadata on a bodiless answer to HEAD or a 304.
  std::vector<Field> headers;
  // nullptr, or why the response cannot go on HTTP/2: a field that cannot
  // be sent (fields.h), or a 1xx (101 Switching Protocols has no HTTP/2
  // form; interim responses are not relayed). The guest gets 502.
  const char* error = nullptr;
};

// The upstream's response (its head as http::parse_response_head() or
// from_h2_response() left it) for the guest's stream.
StreamResponse to_h2_response_fields(const http::ResponseHead& response);

// Whether DATA frames follow the response's HEADERS on the guest's stream:
// never for HEAD, a 1xx, 204 or 304 (RFC 9110 6.4.1), nor when the body is
// known to be empty (no framing, or a Content-Length of 0). False: the
// HEADERS frame ends the stream.
bool h2_has_body(const http::ResponseHead& response, std::string_view request_method);

}  // namespace zn::h2
