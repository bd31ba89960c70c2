// The upstream's side of an exchange as messages (issue 31), the mirror of
// the guest's (guest_leg.h): the request goes as the head the chain left
// and its body as payload bytes; the response comes back as a head, body
// payload and trailer fields. The codec is the leg's:
//   - H1UpstreamLeg (h1_upstream_leg.h): HTTP/1.1 text on a connection, one
//     request after another (keep-alive), a WebSocket's tunnel after a 101;
//   - H2UpstreamLeg (h2_upstream_leg.h): a stream of an upstream connection
//     that chose HTTP/2 (shared by the exchanges of one session, host and
//     identity), the request as fields and DATA, its answer taken from the
//     codec's events: never HTTP/1.1 text on the way.
// The exchange bounds every call with its own deadline (the idle timeout);
// the legs honour the caller's cancellation.
#pragma once

#include <asio.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/injection.h"
#include "userspace/http/message.h"
#include "userspace/http/target.h"
#include "userspace/proxy/byte_stream.h"

namespace zn::proxy {

// The request as it goes upstream: the same arguments as
// http::forwarded_request() (hop-by-hop fields dropped, the rule's fields
// stripped, the identity injected).
struct OutgoingRequest {
  const http::RequestHead& head;  // its framing says how the body goes (none, a length, chunked)
  const http::NormalisedTarget& target;
  const std::string& host;                     // as authorised
  const http::Injection* injection = nullptr;  // the rule's identity, if any
  bool scanned = false;                        // the connection's responses are scrubbed
  bool upgrade = false;                        // a WebSocket handshake (HTTP/1.1 only)
};

class UpstreamLeg {
 public:
  virtual ~UpstreamLeg() = default;

  // Sends the request's head (nothing of the credential is kept after).
  // false when it could not be written: a reused connection that closed
  // while idle (the caller may retry on a fresh one). Throws when the
  // request cannot go this way at all.
  virtual asio::awaitable<bool> send_head(const OutgoingRequest& request) = 0;
  // The body's next payload bytes (the leg frames them); `last` ends it.
  virtual asio::awaitable<void> send_body(std::string_view bytes, bool last) = 0;
  // The response's head, interim answers (1xx) skipped; a 101 only ends the
  // head of an upgrade. false: the upstream closed before a byte of it.
  // Throws on a malformed head.
  virtual asio::awaitable<bool> response_head(http::ResponseHead& head) = 0;
  // Appends the body's next payload bytes to `out` (what is here, else the
  // next read's); true at its end. Throws when it is malformed or cut short.
  virtual asio::awaitable<bool> response_body(std::string& out) = 0;
  // The body's trailer fields, once response_body said it ended.
  virtual std::vector<http::Header> trailers() = 0;
  // After the response ended: whether the connection can carry another
  // request (nothing left unread, no close asked).
  virtual bool reusable() const = 0;
  // A stream of a connection other exchanges share (HTTP/2): never kept in
  // the idle pool, since its connection stays open for them anyway.
  virtual bool shared() const { return false; }

  // After a 101 to an upgrade: the connection as bytes, and what the
  // upstream sent behind its head (moved into `pending`). nullptr for a leg
  // that cannot carry one.
  virtual ByteStream* tunnel(std::string& pending) = 0;
};

}  // namespace zn::proxy
