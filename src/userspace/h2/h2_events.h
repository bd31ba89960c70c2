// What an HTTP/2 session tells its caller: per-stream events the caller
// drains after feed() and after take_output(). The session never decides
// policy; it turns bytes into these and lets the caller answer each stream.
//
// Header names arrive lower-case (HTTP/2 requires it). `detail` and
// `reason` strings never quote a header value: values may carry
// credentials.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "userspace/h2/h2_limits.h"
#include "userspace/http/message.h"

namespace zn::h2 {

using Field = http::Header;

// feed()'s outcome. Not ok: the connection is over (a flood limit, a
// protocol error, a GOAWAY that leaves nothing to read). Write what
// take_output() still returns (the GOAWAY), then close.
struct Result {
  bool ok = true;
  std::string error;  // why, for logs
  explicit operator bool() const { return ok; }
};

// A bound was reached. stream_id 0: the whole connection (GOAWAY sent,
// feed() fails). Otherwise that one stream was refused or reset and the
// connection goes on.
struct LimitTripped {
  Limit limit;
  std::string detail;
  int32_t stream_id = 0;
};

// A stream the caller saw ended abnormally: reset by the peer, by the
// session (a malformed trailer, a body longer than its Content-Length), or
// closed before the caller's side of it was complete.
struct StreamReset {
  int32_t stream_id = 0;
  uint32_t error_code = 0;  // RFC 9113 7 (NGHTTP2_CANCEL, ...)
};

// The peer sent GOAWAY: streams above last_stream_id were not processed.
struct GoAway {
  int32_t last_stream_id = 0;
  uint32_t error_code = 0;
};

// --- guest-facing (server) side ---

// A complete, valid request header block. The request's body follows as
// RequestData unless end_stream.
struct RequestHeaders {
  int32_t stream_id = 0;
  std::string method;
  std::string scheme;          // empty for CONNECT
  std::string authority;       // :authority, or Host when :authority is absent
  std::string path;            // empty for CONNECT
  std::string protocol;        // extended CONNECT (RFC 8441) only, e.g. "websocket"
  std::vector<Field> headers;  // regular fields, in order (Host removed, cookies not joined)
  bool end_stream = false;
};

// One DATA frame's payload.
struct RequestData {
  int32_t stream_id = 0;
  std::string bytes;
  bool end_stream = false;
};

// Trailer fields; they end the request.
struct RequestTrailers {
  int32_t stream_id = 0;
  std::vector<Field> headers;
};

// A request the session refused itself, before any RequestHeaders: reset
// (malformed: RFC 9113 8.1.1) or answered (405 to CONNECT). For the audit.
struct StreamRejected {
  int32_t stream_id = 0;
  std::string reason;
};

using ServerEvent = std::variant<RequestHeaders, RequestData, RequestTrailers, StreamRejected, StreamReset,
                                 LimitTripped, GoAway>;

// --- upstream-facing (client) side ---

// A response header block: informational (1xx, more follow) or final.
struct ResponseHeaders {
  int32_t stream_id = 0;
  int status = 0;
  std::vector<Field> headers;
  bool end_stream = false;
};

struct ResponseData {
  int32_t stream_id = 0;
  std::string bytes;
  bool end_stream = false;
};

struct ResponseTrailers {
  int32_t stream_id = 0;
  std::vector<Field> headers;
};

using ClientEvent =
    std::variant<ResponseHeaders, ResponseData, ResponseTrailers, StreamReset, LimitTripped, GoAway>;

}  // namespace zn::h2
