// The WebSocket opening handshake (RFC 6455 section 4) as the intercepting
// proxy checks it: the guest's upgrade request, before the broker decides it
// like any request, and the upstream's 101, before a byte is relayed. Both
// must be exactly a WebSocket handshake: an upgrade to anything else (h2c)
// stays refused, and a 101 the proxy cannot tie to the guest's key is never
// passed on.
#pragma once

#include <string>
#include <string_view>

#include "userspace/http/message.h"
#include "userspace/http/rewrite.h"

namespace zn::websocket {

// The request asks to upgrade to WebSocket (an Upgrade field naming it),
// well-formed or not.
bool asks_for_websocket(const http::RequestHead& request);

// "" when `request` is a valid opening handshake: GET, HTTP/1.1, no body, one
// Upgrade field "websocket", Connection with "upgrade", one
// Sec-WebSocket-Key (16 bytes in base64), one Sec-WebSocket-Version 13.
// Otherwise why not (never a field's value).
std::string request_error(const http::RequestHead& request);

// A fresh Sec-WebSocket-Key (16 random bytes in base64), for a handshake
// the proxy makes itself (a WebSocket over HTTP/2 has none). Throws if the
// random source fails.
std::string make_key();

// base64(SHA-1(key + the RFC's GUID)): the Sec-WebSocket-Accept for `key`.
std::string accept_for(std::string_view key);

// "" when `response` switches this handshake to WebSocket: 101, Upgrade
// "websocket", Connection with "upgrade", the Sec-WebSocket-Accept for `key`
// and no Sec-WebSocket-Extensions (none was offered). Otherwise why not.
std::string response_error(const http::ResponseHead& response, std::string_view key);

// Fields of the request the proxy never forwards: an extension (permessage-
// deflate) would compress the payload past the proxy's screening and
// scrubbing.
bool dropped_request_field(std::string_view name);

// The upgrade request for the upstream: `forwarded` (http::forwarded_request
// of the guest's checked handshake, the identity in it) as an HTTP/1.1 GET
// with Host, less any extension offer, with Connection and Upgrade again
// (forwarded_request drops them as hop-by-hop). Holds the credential when
// `forwarded` does: cleanse it after use.
std::string upgrade_request_head(const http::ForwardedRequest& forwarded, std::string_view host);

// The 101 for the guest, from the upstream's end-to-end fields
// (http::forwarded_response_fields), with Upgrade and Connection again.
std::string switching_head(const std::vector<http::Header>& fields);

}  // namespace zn::websocket
