// An HTTP/1.1 upstream connection as an upstream leg (upstream_leg.h): the
// request written as text with regenerated framing (http/rewrite.h), the
// response parsed as strictly as a guest's request, one exchange after
// another while both ends keep the connection. After a 101 to a WebSocket
// handshake it is the relay's byte tunnel.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "userspace/http/body.h"
#include "userspace/http/message.h"
#include "userspace/proxy/proxy_io.h"
#include "userspace/proxy/upstream_leg.h"

namespace zn::proxy {

class H1UpstreamLeg final : public UpstreamLeg {
 public:
  // `stream`: connected (and for TLS, handshaken) to the upstream.
  H1UpstreamLeg(std::unique_ptr<ByteStream> stream, const http::HttpLimits& limits);

  asio::awaitable<bool> send_head(const OutgoingRequest& request) override;
  asio::awaitable<void> send_body(std::string_view bytes, bool last) override;
  asio::awaitable<bool> response_head(http::ResponseHead& head) override;
  asio::awaitable<bool> response_body(std::string& out) override;
  std::vector<http::Header> trailers() override;
  bool reusable() const override;
  ByteStream* tunnel(std::string& pending) override;

 private:
  std::unique_ptr<ByteStream> stream_;
  http::HttpLimits limits_;
  bool chunked_request_ = false;  // the body being sent goes in chunks
  bool head_request_ = false;     // the response has no body whatever its fields say
  bool upgrade_ = false;
  bool keep_alive_ = true;  // neither end asked to close after this response
  std::optional<http::BodyDecoder> body_;
  bool until_close_ = false;  // the response's body ends with the connection
  bool body_done_ = false;
  std::string buffered_;  // read and not yet taken
  char buf_[kReadChunk];
};

}  // namespace zn::proxy
