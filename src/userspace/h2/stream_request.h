// An HTTP/2 request stream as the HTTP/1.1 request the proxy's per-request
// pipeline decides (policy, tripwires, identity, rewrite), and every rule
// that is HTTP/2's own: :authority against the SNI, pseudo-headers, what
// RFC 9113 8.2 makes malformed, cookies joined, the framing a stream implies.
//
// A stream this refuses never reaches policy: the proxy answers it with
// `status` (or resets it) and the other streams go on. nghttp2 (HTTP
// messaging on) and fields.h already refuse much of this before a
// RequestHeaders exists; every rule is checked again here so that the
// mapping is safe on its own, whoever built the RequestHeaders.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "userspace/h2/h2_events.h"
#include "userspace/http/message.h"

namespace zn::h2 {

struct StreamRequestResult {
  http::RequestHead head;
  // 0: `head` is the request. Otherwise the status to answer the stream
  // with (400, 405, 417, 421, 431, 501) and why, for the audit; `reason`
  // never quotes a field value (values may carry credentials).
  int status = 0;
  std::string reason;
  // Extended CONNECT with :protocol "websocket" (RFC 8441). `head` is then
  // the GET with Upgrade that the same WebSocket would be over HTTP/1.1
  // (head.upgrade set, Upgrade and Connection fields added, no body
  // framing: DATA frames carry the WebSocket's frames, not a request body),
  // so one policy rule decides both. Only Sec-WebSocket-Key is missing (an
  // HTTP/2 client sends none): the caller makes one.
  bool websocket = false;
  explicit operator bool() const { return status == 0; }
};

// The request of one stream for the HTTP/1.1 pipeline, decided on a TLS
// connection whose ClientHello named `sni` and that the guest opened to
// `port`.
//
// head: method, target = :path (origin-form, checked as the HTTP/1.1
// request line is), version 1.1, host = the authority as sent and a Host
// field first in `headers` (as an HTTP/1.1 head has it), then the regular
// fields in order with every cookie field joined into one at the first's
// place ("; ", RFC 9113 8.2.3); framing from Content-Length (one valid
// value), else chunked when DATA follows, else none; keep_alive;
// expect_continue from "expect: 100-continue".
//
// The authority is :authority, or the Host field when there is none (as
// the codec reads it); a Host beside :authority must agree with it (else
// 400), and only one Host is allowed. It must name the SNI: its host part
// equal to `sni` ignoring ASCII case, its port, if any, written as `port`.
// Anything else is 421, including a trailing dot (one spelling per host:
// the SNI never carries it, and servers disagree on whether "a.example." is
// "a.example"), an IP literal (an SNI never is one) and another port. An
// authority that is not a valid uri-host[:port] (userinfo,
// percent-encoding) is 400.
//
// The limits are those of an HTTP/1.1 head, counted as this request would
// be written in HTTP/1.1 ("name: value" CRLF per field, the Host field and
// the request line included): more than max_headers fields or more than
// max_head_bytes bytes is 431.
StreamRequestResult to_request_head(const RequestHeaders& request, std::string_view sni,
                                    const http::HttpLimits& limits, uint16_t port = 443);

// `head` (from to_request_head) as the HTTP/1.1 text a guest would have
// sent: request line, its fields, Transfer-Encoding for a chunked body, the
// empty line. What the proxy's exchange parses again, as strictly as any
// guest's head.
std::string request_text(const http::RequestHead& head);

}  // namespace zn::h2
