// One HTTP/2 connection to an upstream, shared by every exchange of one
// session, host, port and identity on one I/O loop (issue 31): each request
// is a stream of it (an H2UpstreamLeg), as many at once as the upstream's
// SETTINGS_MAX_CONCURRENT_STREAMS allows and at most kMaxStreams, instead of
// an upstream connection per guest stream.
//
// One coroutine (run) owns the transport: it writes what the session has to
// send whenever a leg kicks it, reads what the upstream sends and hands each
// stream's events to its leg. Legs only touch the session on the same loop
// and wake the owner, as the guest side's streams do (h2_intercept.cpp).
// The connection ends when the upstream ends it (GOAWAY, close, a protocol
// error or a bound), and after `idle` with no stream open; each leg still
// holding a stream hears why.
//
// Each stream's window is kStreamWindow and given back only as its exchange
// takes the bytes (manual window updates): a guest that does not read holds
// its own stream back, and the connection's window (room for every stream's)
// keeps it from holding the others.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "userspace/h2/client_session.h"
#include "userspace/h2/stream_upstream.h"
#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/proxy_io.h"
#include "userspace/proxy/session_sockets.h"
#include "userspace/proxy/watchdog.h"

namespace zn::proxy {

class H2UpstreamLeg;

class H2UpstreamConnection : public std::enable_shared_from_this<H2UpstreamConnection> {
 public:
  static constexpr uint32_t kMaxStreams = 64;
  static constexpr uint32_t kStreamWindow = 256 * 1024;
  static constexpr uint32_t kConnectionWindow = kMaxStreams * kStreamWindow;

  // `transport`: over *socket, its TLS handshake done and "h2" chosen.
  // `connected`: "198.18.0.10:443". `io_timeout` bounds a write the upstream
  // does not take; `idle` how long the connection stays with no stream.
  H2UpstreamConnection(std::unique_ptr<asio::ip::tcp::socket> socket, std::unique_ptr<ByteStream> transport,
                       std::string connected, std::chrono::milliseconds io_timeout,
                       std::chrono::milliseconds idle);
  ~H2UpstreamConnection();

  // Starts the owner on the socket's loop. Once.
  void start();
  const asio::any_io_executor& executor() const { return executor_; }
  const std::string& connected() const { return connected_; }
  // The socket's place in its session's cap, released with the connection.
  void hold(SessionSockets::Slot slot) { slot_ = std::move(slot); }

  // ---- For legs, on the connection's loop ----
  // Whether another stream may start now: running, no GOAWAY either way,
  // under both bounds on streams at once.
  bool open_for_more();
  // Opens a stream whose events go to `leg`: its id, or a negative number
  // (nothing was sent).
  int32_t open_stream(const h2::UpstreamRequest& request, H2UpstreamLeg& leg);
  // The leg is done with its stream: forgotten, reset (CANCEL) unless its
  // response ended, and `unconsumed` bytes of window given back.
  void close_stream(int32_t id, bool ended, size_t unconsumed);
  // The stream's body bytes; `last` ends the request.
  void send_data(int32_t id, std::string_view bytes, bool last);
  size_t unsent(int32_t id) const { return session_.buffered(id); }
  // The leg took `bytes` of its stream's DATA: the upstream may send as much again.
  void consume(int32_t id, size_t bytes);
  // The session has something to send: the owner writes it out.
  void kick();
  // Why the connection ended ("" while it runs).
  const std::string& ended() const { return ended_; }

 private:
  asio::awaitable<void> run(std::shared_ptr<H2UpstreamConnection> self);
  asio::awaitable<void> serve();
  asio::awaitable<void> write_pending();
  void dispatch();
  void end(const std::string& why);

  SessionSockets::Slot slot_;  // released after the socket closes
  std::unique_ptr<asio::ip::tcp::socket> socket_;
  std::unique_ptr<ByteStream> transport_;  // over *socket_; destroyed first
  asio::any_io_executor executor_;
  std::string connected_;
  std::chrono::milliseconds io_timeout_, idle_;
  Watchdog dog_;  // of the owner's thread (run)
  h2::H2ClientSession session_;
  std::map<int32_t, H2UpstreamLeg*> streams_;
  std::optional<asio::steady_timer> kick_;
  bool kicked_ = false;
  bool started_ = false;
  bool goaway_ = false;  // the upstream takes no new stream
  std::string failed_;   // a protocol error or a bound: the connection ends
  std::string ended_;
  char buf_[kReadChunk];
};

}  // namespace zn::proxy
