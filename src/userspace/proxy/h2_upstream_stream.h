// An upstream that chose HTTP/2 (ALPN "h2", issue 17), seen by the exchange
// (intercept.h) as the HTTP/1.1 connection it writes each request to and
// reads each response from. Every request the exchange sends is one stream:
// its own forwarded head and framing are read back (they are the exchange's
// bytes, already decided, injected and screened) into the stream's HEADERS
// and DATA; the stream's response becomes HTTP/1.1 text (chunked when the
// upstream gave no length) that the exchange parses as strictly as an
// HTTP/1.1 upstream's, scrubbing included. So policy, identity and
// scrubbing need nothing of HTTP/2; only the writing differs.
//
// One request at a time, as the exchange sends them; the connection goes
// back to the upstream pool between requests like an HTTP/1.1 one. An
// upgrade (WebSocket) cannot go to it: the exchange opens those on a
// connection offering HTTP/1.1 only.
#pragma once

#include <asio.hpp>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "userspace/h2/client_session.h"
#include "userspace/http/body.h"
#include "userspace/http/message.h"
#include "userspace/proxy/byte_stream.h"

namespace zn::proxy {

class H2UpstreamStream : public ByteStream {
 public:
  // `transport`: the upstream's TLS stream, its handshake done and "h2"
  // selected. Nothing is written until the first request.
  explicit H2UpstreamStream(std::unique_ptr<ByteStream> transport);

  asio::awaitable<size_t> read_some(char* data, size_t size) override;
  asio::awaitable<void> write_all(std::string_view data) override;
  asio::awaitable<void> close_write() override;
  asio::ip::tcp::socket& socket() override { return transport_->socket(); }
  bool has_buffered() const override { return !response_.empty() || transport_->has_buffered(); }

  // Body bytes written and not yet sent (the upstream's window is shut):
  // past this the exchange's write waits, as on a full socket.
  static constexpr size_t kMaxUnsent = 256 * 1024;

 private:
  enum class Request { kHead, kBody, kDone };
  // Writes what the session has to send.
  asio::awaitable<void> flush();
  // One read of the transport fed to the session; false at its end.
  asio::awaitable<bool> pump();
  void take_events();
  // Gives the upstream back the window of the DATA taken so far.
  void release_window();
  void start_request();
  [[noreturn]] void fail(const std::string& why);

  std::unique_ptr<ByteStream> transport_;
  h2::H2ClientSession session_;
  std::string failed_;  // why the connection can no longer be used
  // The request being written.
  Request request_state_ = Request::kDone;
  std::string request_in_;
  http::RequestHead request_;
  std::optional<http::BodyDecoder> request_body_;
  int32_t stream_ = -1;
  // Its response, as HTTP/1.1 text not yet read by the exchange.
  std::string response_;
  bool response_head_seen_ = false;
  bool response_chunked_ = false;
  bool response_done_ = false;
  uint64_t body_left_ = 0;  // of a body framed by its length, not yet received
  size_t unconsumed_ = 0;   // DATA bytes of the stream whose window is not given back yet
};

}  // namespace zn::proxy
