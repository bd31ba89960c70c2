// One exchange's requests as streams of a shared HTTP/2 upstream connection
// (h2_upstream_connection.h), as an upstream leg (upstream_leg.h): each
// request's head is the fields http::forwarded_request() makes
// (h2/stream_upstream.h: the same rewrite an HTTP/1.1 upstream gets, the
// identity injected), its body DATA; the answer is taken from the codec's
// events for its stream, checked as strictly as an HTTP/1.1 upstream's head
// (h2::from_h2_response). Never HTTP/1.1 text on the way.
//
// One request at a time per leg, as the exchange sends them; the connection
// carries other legs' streams meanwhile. An upgrade (WebSocket) cannot go to
// it: the exchange opens those on a connection offering HTTP/1.1 only.
#pragma once

#include <asio.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "userspace/h2/body_buffer.h"
#include "userspace/h2/h2_events.h"
#include "userspace/proxy/h2_upstream_connection.h"
#include "userspace/proxy/upstream_leg.h"

namespace zn::proxy {

class H2UpstreamLeg final : public UpstreamLeg {
 public:
  // Body bytes a stream may hold unsent (the upstream's window is shut):
  // past this send_body waits, as on a full socket.
  static constexpr size_t kMaxUnsent = 256 * 1024;

  explicit H2UpstreamLeg(std::shared_ptr<H2UpstreamConnection> connection);
  ~H2UpstreamLeg() override;
  H2UpstreamLeg(const H2UpstreamLeg&) = delete;
  H2UpstreamLeg& operator=(const H2UpstreamLeg&) = delete;

  asio::awaitable<bool> send_head(const OutgoingRequest& request) override;
  asio::awaitable<void> send_body(std::string_view bytes, bool last) override;
  asio::awaitable<bool> response_head(http::ResponseHead& head) override;
  asio::awaitable<bool> response_body(std::string& out) override;
  std::vector<http::Header> trailers() override { return std::move(trailers_); }
  bool reusable() const override;
  bool shared() const override { return true; }
  ByteStream* tunnel(std::string&) override { return nullptr; }

  // ---- The connection's side ----
  void deliver(h2::ClientEvent& event);           // an event of this leg's stream
  void connection_ended(const std::string& why);  // its streams are gone
  void wake();                                    // output was written: a held-back sender goes on

 private:
  asio::awaitable<void> wait();
  // Leaves the stream (its response ended, or it is abandoned).
  void leave_stream();
  [[noreturn]] void fail(const std::string& why);

  std::shared_ptr<H2UpstreamConnection> connection_;
  std::optional<asio::steady_timer> signal_;
  int32_t stream_ = -1;  // -1: none open
  std::string method_;
  std::string failed_;                      // why this leg's request failed
  bool gone_ = false;                       // the connection ended
  std::optional<http::ResponseHead> head_;  // until response_head takes it
  bool head_seen_ = false;
  bool refused_ = false;  // reset unprocessed (REFUSED_STREAM): as a connection that closed
  h2::BodyBuffer data_;   // payload received and not yet taken
  std::vector<http::Header> trailers_;
  bool done_ = false;      // END_STREAM received
  size_t unconsumed_ = 0;  // DATA received whose window is not given back yet
};

}  // namespace zn::proxy
