// What the intercepting proxy sends on, built fresh from parsed heads rather
// than copied: framing is regenerated (never the guest's own Content-Length
// or Transfer-Encoding), hop-by-hop headers are dropped, and the rule's
// identity replaces whatever credential the guest supplied.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/message.h"
#include "userspace/http/target.h"
#include "userspace/http/injection.h"

namespace zn::http {

// The request as forwarded, before it is written in either protocol:
// `target` is the origin-form target from the normalised one (with the
// injected query parameter), `headers` the guest's fields that go on (no
// hop-by-hop field but "TE: trailers", which an HTTP/2 upstream (gRPC)
// needs, none named by Connection, none the injection owns, none whose name
// is not letters, digits and '-' (a backend may read "X_Api_Key" as
// "X-Api-Key"); with `scanned_response` no Range, If-Range or
// Request-Range: the guest must not choose where a scrubbed response is
// cut) then
// the injected header and "Accept-Encoding: identity" when asked for. No
// Host and no framing: HTTP/1.1 and HTTP/2 each write those their own way.
// With an injection it holds the credential: cleanse it after use.
struct ForwardedRequest {
  std::string target;
  std::vector<Header> headers;
};
ForwardedRequest forwarded_request(const RequestHead& request, const NormalisedTarget& target,
                                   const Injection* injection, bool scanned_response = false);

// The request head for the upstream: forwarded_request() as HTTP/1.1, Host
// as authorised, body framing from the parsed framing. With an injection,
// or `scanned_response` (a secret was injected earlier on this connection),
// the guest's Accept-Encoding is replaced by `identity`: the response must
// come back scannable for the secret's reflection.
std::string forwarded_request_head(const RequestHead& request, const NormalisedTarget& target,
                                   std::string_view host, const Injection* injection,
                                   bool scanned_response = false);

// `query` (without '?') with every parameter named `name` removed (names
// compared percent-decoded, '+' as space: how the upstream will read them)
// and `name=value` appended, value percent-encoded (RFC 3986 unreserved kept).
std::string query_with_parameter(std::string_view query, std::string_view name, std::string_view value);

// How a server reads a query or a form: %XX decoded, '+' as a space; an
// escape that is not two hex digits is kept as it is.
std::string form_decode(std::string_view s);

// Percent-encodes all but RFC 3986 unreserved characters.
std::string percent_encode(std::string_view value);

// Whether a response is a part of its representation (206, a
// Content-Range other than a 416's, multipart/byteranges): never passed on
// a connection whose responses are scrubbed, as a secret cut in pieces is
// not recognisable in any one of them.
bool is_partial_response(const ResponseHead& response);

// Whether a response's Content-Encoding leaves its body as sent (absent, or
// only "identity"): the only bodies the reflection scrubber can scan.
bool identity_content_encoding(const ResponseHead& response);

// The end-to-end fields of an upstream's response: hop-by-hop fields, those
// named by Connection and the framing dropped, except the Content-Length of
// a bodiless response (HEAD, 304), which is metadata.
std::vector<Header> forwarded_response_fields(const ResponseHead& response);

// An upstream's trailer fields that may go on to the guest: none that
// frames, routes, authenticates or controls the response (RFC 9110 6.5.1),
// nor any hop-by-hop field. (gRPC's grpc-status and grpc-message pass.)
std::vector<Header> forwarded_trailer_fields(const std::vector<Header>& trailers);

// The response head for the guest (forwarded_response_fields() as
// HTTP/1.1). `chunked`: the body is re-chunked (the
// upstream sent chunked or close-delimited); otherwise the upstream's length,
// if any, is kept. `close`: the proxy closes after this response.
std::string forwarded_response_head(const ResponseHead& response, bool chunked, bool close);

// A complete response the proxy itself answers with (403, 421, 429, 400,
// 431, 502, ...), always closing the connection; with a Retry-After
// field when `retry_after` is more than zero.
std::string proxy_response(int status, std::string_view body,
                           std::chrono::seconds retry_after = std::chrono::seconds(0));

// A complete response the proxy serves on the broker's behalf (the
// capability gateway): framed by its length; `close` ends the connection.
std::string local_response(int status, std::string_view content_type, std::string_view body, bool close);

std::string_view reason_phrase(int status);

}  // namespace zn::http
