// One HTTP/2 stream of an intercepted connection, seen by the HTTP/1.1
// exchange (intercept.h) as a connection of its own carrying one request
// (issue 17). The exchange's every rule applies to the stream unchanged:
// policy, tripwires, identity, scrubbing, rate, approval, audit. The stream
// cannot reach an upstream any other way.
//
// In: the request as HTTP/1.1 bytes the bridge generated from the stream's
// checked fields (never the guest's bytes: there is no framing of the
// guest's to smuggle through), then its body as DATA arrives, chunked when
// it has no length. Out: what the exchange writes, parsed back into a
// response head and body pieces for the stream's HEADERS and DATA.
//
// Every wait is on the connection's I/O loop (one thread: the bridge and the
// exchange take turns, never at once) and honours the caller's
// cancellation, so the exchange's deadlines work as on a socket.
#pragma once

#include <asio.hpp>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "userspace/http/body.h"
#include "userspace/http/message.h"
#include "userspace/proxy/byte_stream.h"

namespace zn::proxy {

class StreamPipe : public ByteStream {
 public:
  // Where the exchange's answer goes: the bridge, which writes it on the
  // stream.
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual void on_response_head(const http::ResponseHead& head, bool has_body) = 0;
    virtual void on_response_data(std::string_view bytes, bool end) = 0;
    // The body ended with trailer fields (a chunked response's, filtered
    // and scrubbed by the exchange): they end the stream.
    virtual void on_response_trailers(const std::vector<http::Header>& trailers) = 0;
    // Response bytes the stream holds unsent (the guest's window): past
    // kMaxUnsent the exchange waits, as on a socket the guest does not read.
    virtual size_t unsent() const = 0;
    // Body bytes of the request the exchange has taken (flow control: the
    // guest may send as much again).
    virtual void on_request_consumed(size_t payload_bytes) = 0;
  };
  static constexpr size_t kMaxUnsent = 256 * 1024;

  // `guest_socket`: the connection's, for what needs a socket (nothing the
  // exchange does on a stream reads or writes it). `head_request`: the
  // request is a HEAD (its response has no body).
  StreamPipe(asio::ip::tcp::socket& guest_socket, Sink& sink, bool head_request,
             const http::HttpLimits& limits);

  // The request is a WebSocket (extended CONNECT, RFC 8441): a 101 the
  // exchange writes starts a tunnel (on_response_head with the 101, then
  // every byte written is on_response_data, close_write its end), and the
  // exchange's relay reads and writes the pipe at once.
  void set_tunnel() { tunnel_ = true; }

  // The bridge's side. `payload_bytes`: how many of `bytes` are the
  // guest's DATA (reported to the sink once the exchange has read them).
  void push(std::string bytes, size_t payload_bytes = 0);
  void end_request();  // nothing follows: reads end once what was pushed is taken
  void abort();        // the stream is gone: waits end, reads and writes throw
  void wake();         // the guest took response bytes: a held-back writer goes on
  bool response_started() const { return state_ != State::kHead; }
  bool response_complete() const { return state_ == State::kDone; }
  // Drops what was pushed and not taken; the payload bytes among it (the
  // bridge gives them back to the connection's window when the stream goes).
  size_t drop_pending();

  asio::awaitable<size_t> read_some(char* data, size_t size) override;
  asio::awaitable<void> write_all(std::string_view data) override;
  asio::awaitable<void> close_write() override;
  asio::ip::tcp::socket& socket() override { return socket_; }
  bool has_buffered() const override { return !in_.empty() || ended_ || aborted_; }
  asio::awaitable<bool> wait_readable(std::chrono::steady_clock::duration timeout) override;
  bool end_means_peer_gone() const override { return false; }  // the request's end

 private:
  enum class State { kHead, kBody, kTunnel, kDone };
  struct Segment {
    std::string bytes;
    size_t taken = 0;
    size_t payload = 0;
  };
  void notify();
  // Turns what the exchange wrote into sink calls; throws on a response it
  // could not have written (a bug, not input).
  void parse_response();

  asio::ip::tcp::socket& socket_;
  Sink& sink_;
  bool head_request_;
  http::HttpLimits limits_;
  std::deque<Segment> in_;
  bool ended_ = false;
  bool aborted_ = false;
  // Waits (wait_for_signal) until wake(), push(), end_request() or
  // abort(). A reader and a writer may wait at once (a tunnel's relay):
  // each on its own timer, every notify() wakes both to look again.
  std::optional<asio::steady_timer> read_signal_, write_signal_;
  bool tunnel_ = false;
  std::string out_;
  State state_ = State::kHead;
  http::ResponseHead response_;
  std::optional<http::BodyDecoder> decoder_;
};

}  // namespace zn::proxy
