// A request the HTTP/1.1 pipeline decided, sent to an HTTP/2 upstream, and
// that upstream's answer read back as the HTTP/1.1 response the pipeline
// relays. The request takes exactly the rewrite an HTTP/1.1 upstream gets
// (http::forwarded_request(): hop-by-hop fields dropped, the rule's fields
// stripped, the identity injected as header or query parameter); only the
// writing differs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "userspace/h2/h2_events.h"
#include "userspace/http/injection.h"
#include "userspace/http/message.h"
#include "userspace/http/target.h"

namespace zn::h2 {

// What H2ClientSession::submit_request() takes.
struct UpstreamRequest {
  std::string method;
  std::string scheme;     // "https"
  std::string authority;  // the host as authorised
  std::string path;       // the forwarded origin-form target, query included
  // Lower-case names, no Host (it is the authority), no framing field but a
  // Content-Length when the body's length is known.
  std::vector<Field> headers;
  bool has_body = false;  // DATA follows the HEADERS
  // nullptr, or why the request cannot be sent (nothing was): a field that
  // is not valid HTTP/2 (an injection header name that is not a token), or
  // an upgrade (WebSocket to an HTTP/2 upstream needs extended CONNECT,
  // not done yet).
  const char* error = nullptr;

  // With an injection, `path` or a header value holds the credential.
  void wipe();
};

// The request for an HTTP/2 upstream, from the same arguments as
// http::forwarded_request_head().
UpstreamRequest to_h2_request_fields(const http::RequestHead& request, const http::NormalisedTarget& target,
                                     std::string_view host, const http::Injection* injection,
                                     bool scanned_response = false);

struct UpstreamResponse {
  http::ResponseHead head;
  // nullptr, or why the answer cannot be relayed (the guest gets 502): a
  // field HTTP/1.1 could not carry, a connection-specific field, a bad or
  // conflicting Content-Length, a :status out of range.
  const char* error = nullptr;
};

// The upstream's response header block as the pipeline's ResponseHead,
// checked as http::parse_response_head() checks an HTTP/1.1 head.
// `request_method` is the forwarded request's (HEAD has no body).
//
// Framing: none for HEAD, 1xx, 204, 304; kContentLength when the upstream
// gave a length, or of 0 when the HEADERS end the stream; otherwise
// kUntilClose, which here means until the stream's END_STREAM: the stream
// closes, not the connection (keep_alive stays true). Like a close-delimited
// HTTP/1.1 body, the pipeline re-chunks it for an HTTP/1.1 guest.
UpstreamResponse from_h2_response(const ResponseHeaders& response, std::string_view request_method);

}  // namespace zn::h2
