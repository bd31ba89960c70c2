#include "userspace/proxy/h1_upstream_leg.h"

#include <openssl/crypto.h>

#include <stdexcept>

#include "userspace/http/rewrite.h"
#include "userspace/websocket/handshake.h"

namespace zn::proxy {

using asio::awaitable;

H1UpstreamLeg::H1UpstreamLeg(std::unique_ptr<ByteStream> stream, const http::HttpLimits& limits)
    : stream_(std::move(stream)), limits_(limits) {}

awaitable<bool> H1UpstreamLeg::send_head(const OutgoingRequest& r) {
  std::string out;
  if (r.upgrade) {
    // The guest's checked handshake: its fields as any request's (the
    // identity injected), no extension offer.
    http::ForwardedRequest forwarded = http::forwarded_request(r.head, r.target, r.injection, r.scanned);
    out = websocket::upgrade_request_head(forwarded, r.host);
    for (http::Header& h : forwarded.headers) OPENSSL_cleanse(h.value.data(), h.value.size());
    OPENSSL_cleanse(forwarded.target.data(), forwarded.target.size());
  } else {
    out = http::forwarded_request_head(r.head, r.target, r.host, r.injection, r.scanned);
  }
  chunked_request_ = r.head.framing == http::BodyFraming::kChunked;
  head_request_ = r.head.method == "HEAD";
  upgrade_ = r.upgrade;
  // The guest's Connection: close is about the guest's connection: the
  // request goes upstream as HTTP/1.1 without it (a hop-by-hop field), so
  // the upstream's connection stays open and can serve the session's next
  // guest connection (a client that opens one connection per request paid
  // a new upstream TCP and TLS handshake each time).
  keep_alive_ = true;
  body_.reset();
  body_done_ = false;
  bool sent = true;
  try {
    co_await stream_->write_all(out);
  } catch (const std::exception&) {
    sent = false;
  }
  OPENSSL_cleanse(out.data(), out.size());  // may hold the identity
  co_return sent;
}

awaitable<void> H1UpstreamLeg::send_body(std::string_view bytes, bool last) {
  if (!chunked_request_) {
    if (!bytes.empty()) co_await stream_->write_all(bytes);
    co_return;
  }
  std::string out;
  if (!bytes.empty()) out = http::chunk_frame(bytes);
  if (last) out.append(http::kLastChunk);
  if (!out.empty()) co_await stream_->write_all(out);
  OPENSSL_cleanse(out.data(), out.size());  // a swapped body holds a credential
}

awaitable<bool> H1UpstreamLeg::response_head(http::ResponseHead& head) {
  for (;;) {
    const http::ParseResult r = http::parse_response_head(buffered_, limits_, head_request_, head);
    if (r.state == http::ParseState::kDone) {
      buffered_.erase(0, r.consumed);
      // Interim responses (100, 103) are not relayed; a 101 only ends the
      // head of an upgrade (checked by the caller).
      if (head.status == 101 && upgrade_) co_return true;
      if (head.status == 101) throw std::runtime_error("upstream switched protocols");
      if (head.status < 200) {
        head = {};
        continue;
      }
      keep_alive_ = keep_alive_ && head.keep_alive && head.framing != http::BodyFraming::kUntilClose;
      body_.emplace(head.framing, head.content_length, limits_);
      until_close_ = head.framing == http::BodyFraming::kUntilClose;
      body_done_ = body_->done();  // none, or a length of 0
      co_return true;
    }
    if (r.state == http::ParseState::kError)
      throw std::runtime_error("malformed upstream response: " + r.error);
    const size_t n = co_await stream_->read_some(buf_, sizeof(buf_));
    if (n == 0) {
      if (buffered_.empty()) co_return false;
      throw std::runtime_error("upstream response head truncated");
    }
    buffered_.append(buf_, n);
  }
}

awaitable<bool> H1UpstreamLeg::response_body(std::string& out) {
  if (!body_) throw std::logic_error("response_body before response_head");
  for (;;) {
    const size_t before = out.size();
    const http::BodyDecoder::Step step = body_->feed(buffered_, out);
    buffered_.erase(0, step.consumed);
    if (step.error) throw std::runtime_error("malformed upstream body: " + step.error_reason);
    if (step.done) {
      body_done_ = true;
      co_return true;
    }
    if (out.size() > before) co_return false;
    const size_t n = co_await stream_->read_some(buf_, sizeof(buf_));
    if (n == 0) {
      if (!until_close_) throw std::runtime_error("upstream body truncated");
      body_done_ = true;
      keep_alive_ = false;
      co_return true;
    }
    buffered_.append(buf_, n);
  }
}

std::vector<http::Header> H1UpstreamLeg::trailers() {
  return body_ ? body_->trailers() : std::vector<http::Header>{};
}

bool H1UpstreamLeg::reusable() const { return keep_alive_ && !upgrade_ && body_done_ && buffered_.empty(); }

ByteStream* H1UpstreamLeg::tunnel(std::string& pending) {
  pending = std::move(buffered_);
  buffered_.clear();
  keep_alive_ = false;
  return stream_.get();
}

}  // namespace zn::proxy
