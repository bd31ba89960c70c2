// The guest's side of an exchange as messages (issue 31): a request head, its
// body as decoded bytes, and a response as a head, body bytes and trailer
// fields. The exchange (intercept.cpp) decides, screens, forwards and
// scrubs in these terms only; the codec at the edge is the leg's:
//   - H1GuestLeg (h1_guest_leg.h): HTTP/1.1 on the guest's connection, one
//     request after another (keep-alive), parsed and framed as text;
//   - H2GuestLeg (h2_guest_leg.h): one HTTP/2 stream, its request taken
//     from the codec's fields and DATA, its answer handed to the codec as
//     fields and DATA: never HTTP/1.1 text on the way.
// Every wait is bounded by the leg's deadlines and honours the caller's
// cancellation.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/message.h"
#include "userspace/proxy/byte_stream.h"

namespace zn::proxy {

// The guest's request body turned out malformed (a bad chunk, more than its
// length): the guest gets a 400.
struct BadRequestBody : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// How reading the next request's head ended.
struct HeadIn {
  enum class State {
    kHead,     // `head` holds it
    kEnd,      // no more requests (the guest closed, idled out or failed; a stream's one request was read)
    kBad,      // malformed: answer parse.error_status
    kTooSlow,  // a started head did not complete in time: answer 408
  };
  State state = State::kEnd;
  http::ParseResult parse;  // kBad: its error and status
};

// What the guest is told, where the proxy answers instead of an upstream.
struct ProxyAnswer {
  int status = 403;
  std::string content_type;  // "" for none (204, 304)
  std::string body;
  bool local = false;  // the broker's own service answered (no-store), not a refusal
};

class GuestLeg {
 public:
  virtual ~GuestLeg() = default;

  // ---- The request ----
  // The next request's head. A keep-alive wait is bounded by the idle
  // timeout, a started head by the header timeout.
  virtual asio::awaitable<HeadIn> next_head(http::RequestHead& head) = 0;
  // The head's bytes as the tripwire screen reads them: as the guest sent
  // them (HTTP/1.1), or its fields written out as HTTP/1.1 lines (HTTP/2),
  // in input()[0, head_bytes()). The string lives as long as the leg.
  virtual const std::string& input() const = 0;
  virtual size_t head_bytes() const = 0;
  // The chain is done with the head's bytes: what follows is the body.
  virtual void release_head() = 0;
  // The decoded body's first bytes (at most `n`), without taking them:
  // waited for up to `patience`, never when the guest waits for "100
  // Continue" first.
  virtual asio::awaitable<std::string> preview_body(const http::RequestHead& head, size_t n,
                                                    std::chrono::steady_clock::duration patience) = 0;
  // Appends the body's next decoded bytes to `out` (waiting for some, up to
  // the idle timeout); true once the body is complete. Throws
  // BadRequestBody when it is malformed, another exception when the guest
  // went or stalled inside it.
  virtual asio::awaitable<bool> read_body(const http::RequestHead& head, std::string& out) = 0;

  // ---- While a request is held for approval ----
  // Whether the guest's going can be seen by reading (a connection's end);
  // an HTTP/2 stream's reset comes as the exchange's cancellation instead.
  virtual bool watches_end() const = 0;
  virtual asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout) = 0;
  // Reads what the guest sent meanwhile and keeps it for the exchange;
  // false when the guest went. held(): how much is kept.
  virtual asio::awaitable<bool> read_ahead() = 0;
  virtual size_t held() const = 0;

  // ---- The response ----
  // "100 Continue" to a guest that asked for it (HTTP/1.1; HTTP/2 needs none).
  virtual asio::awaitable<void> send_continue() = 0;
  // The upstream's head as the guest gets it: its fields forwarded
  // (http::forwarded_response_fields) and scrubbed; framing and length as
  // the upstream's (kChunked and kUntilClose: a body of unknown length).
  // Gathered, written by flush(). Returns whether the guest's connection
  // ends after this response (`close` asked it, or HTTP/1.0 cannot frame
  // the body otherwise).
  virtual bool response_head(const http::ResponseHead& head, bool close) = 0;
  virtual void response_data(std::string_view bytes) = 0;
  // The body's end, with the upstream's trailer fields (forwarded and
  // scrubbed; may be empty).
  virtual void response_end(const std::vector<http::Header>& trailers) = 0;
  // Writes what was gathered; waits while the guest takes nothing (bounded
  // by the idle timeout). Returns the bytes written.
  virtual asio::awaitable<size_t> flush() = 0;
  // Whether any of a response reached the guest (a failure after it cannot
  // be answered with a status any more).
  virtual bool response_started() const = 0;
  // The proxy's own answer. A refusal ends the connection (nothing
  // pipelined behind a refused request is read as a request); a local
  // answer keeps it unless `close`.
  virtual asio::awaitable<void> answer(const ProxyAnswer& answer, const http::RequestHead* head,
                                       bool close) = 0;
  // The end of what the proxy sends on this connection (HTTP/1.1's
  // Connection: close); nothing on a stream, which its response ended.
  virtual asio::awaitable<void> close() = 0;

  // ---- WebSocket ----
  // The upstream switched (its 101 checked): `head` (fields forwarded and
  // scrubbed) goes to the guest, and from here the leg is a byte tunnel.
  // Returns the tunnel and moves into `pending` what the guest sent after
  // its handshake.
  virtual asio::awaitable<ByteStream*> open_tunnel(const http::ResponseHead& head, std::string& pending) = 0;

  // ---- Who failed ----
  // Whether a read or write of the guest failed or met its end since the
  // last forget(): a forwarded request that fails then is the guest's
  // cancel, never the upstream's failure.
  virtual bool failed() const = 0;
  virtual void forget() = 0;
};

}  // namespace zn::proxy
