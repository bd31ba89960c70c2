// An upstream that chose HTTP/2 (ALPN "h2") as an upstream leg
// (upstream_leg.h): each request is one stream, its head the fields
// http::forwarded_request() makes (h2/stream_upstream.h: the same rewrite an
// HTTP/1.1 upstream gets, the identity injected), its body DATA; the answer
// is taken from the codec's events, checked as strictly as an HTTP/1.1
// upstream's head (h2::from_h2_response). Never HTTP/1.1 text on the way.
//
// One request at a time, as the exchange sends them; the connection goes
// back to the upstream pool between requests like an HTTP/1.1 one. An
// upgrade (WebSocket) cannot go to it: the exchange opens those on a
// connection offering HTTP/1.1 only.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "userspace/h2/client_session.h"
#include "userspace/proxy/proxy_io.h"
#include "userspace/proxy/upstream_leg.h"

namespace zn::proxy {

class H2UpstreamLeg final : public UpstreamLeg {
 public:
  // `transport`: the upstream's TLS stream, its handshake done and "h2"
  // selected. Nothing is written until the first request.
  explicit H2UpstreamLeg(std::unique_ptr<ByteStream> transport);

  asio::awaitable<bool> send_head(const OutgoingRequest& request) override;
  asio::awaitable<void> send_body(std::string_view bytes, bool last) override;
  asio::awaitable<bool> response_head(http::ResponseHead& head) override;
  asio::awaitable<bool> response_body(std::string& out) override;
  std::vector<http::Header> trailers() override { return std::move(trailers_); }
  bool reusable() const override;
  ByteStream* tunnel(std::string&) override { return nullptr; }

  // Body bytes written and not yet sent (the upstream's window is shut):
  // past this send_body waits, as on a full socket.
  static constexpr size_t kMaxUnsent = 256 * 1024;

 private:
  // Writes what the session has to send.
  asio::awaitable<void> flush();
  // One read of the transport fed to the session; false at its end.
  asio::awaitable<bool> pump();
  void take_events();
  // Gives the upstream back the window of the DATA taken so far.
  void release_window();
  [[noreturn]] void fail(const std::string& why);

  std::unique_ptr<ByteStream> transport_;
  h2::H2ClientSession session_;
  std::string failed_;   // why the connection can no longer be used
  bool goaway_ = false;  // the upstream takes no new stream
  // The stream in flight and its answer.
  int32_t stream_ = -1;
  std::string method_;
  std::optional<http::ResponseHead> head_;  // taken by response_head
  bool head_seen_ = false;
  bool refused_ = false;  // reset unprocessed (REFUSED_STREAM): safe to send again
  std::string data_;      // payload received and not yet taken
  std::vector<http::Header> trailers_;
  bool done_ = false;      // END_STREAM received
  size_t unconsumed_ = 0;  // DATA bytes taken whose window is not given back yet
  char buf_[kReadChunk];
};

}  // namespace zn::proxy
