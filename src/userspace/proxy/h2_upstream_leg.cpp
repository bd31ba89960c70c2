#include "userspace/proxy/h2_upstream_leg.h"

#include <algorithm>
#include <stdexcept>
#include <variant>

#include "userspace/h2/stream_upstream.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;

constexpr uint32_t kRefusedStream = 0x7;  // RFC 9113 8.7: not processed, safe to send again

}  // namespace

H2UpstreamLeg::H2UpstreamLeg(std::shared_ptr<H2UpstreamConnection> connection)
    : connection_(std::move(connection)) {}

H2UpstreamLeg::~H2UpstreamLeg() { leave_stream(); }

void H2UpstreamLeg::fail(const std::string& why) {
  if (failed_.empty()) failed_ = why;
  throw std::runtime_error("HTTP/2 upstream: " + failed_);
}

void H2UpstreamLeg::leave_stream() {
  if (stream_ < 0) return;
  connection_->close_stream(stream_, done_, unconsumed_);
  stream_ = -1;
  unconsumed_ = 0;
}

void H2UpstreamLeg::wake() {
  if (signal_) signal_->cancel();
}

awaitable<void> H2UpstreamLeg::wait() { co_await wait_for_signal(signal_); }

void H2UpstreamLeg::deliver(h2::ClientEvent& event) {
  std::visit(
      [this](auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, h2::ResponseHeaders>) {
          if (e.status < 200 || head_seen_) return;  // interim answers are not relayed
          h2::UpstreamResponse r = h2::from_h2_response(e, method_);
          if (r.error != nullptr) {
            failed_ = std::string("response: ") + r.error;
            return;
          }
          head_seen_ = true;
          head_ = std::move(r.head);
          done_ = e.end_stream;
        } else if constexpr (std::is_same_v<E, h2::ResponseData>) {
          if (!head_seen_) {
            connection_->consume(stream_, e.bytes.size());
            return;
          }
          unconsumed_ += e.bytes.size();
          data_.append(e.bytes);
          done_ = done_ || e.end_stream;
        } else if constexpr (std::is_same_v<E, h2::ResponseTrailers>) {
          if (!head_seen_ || done_) return;
          trailers_ = std::move(e.headers);  // filtered and scrubbed by the exchange
          done_ = true;
        } else if constexpr (std::is_same_v<E, h2::StreamReset>) {
          if (done_) return;
          if (!head_seen_ && e.error_code == kRefusedStream)
            refused_ = true;
          else
            failed_ = "the upstream reset the stream";
        } else if constexpr (std::is_same_v<E, h2::LimitTripped>) {
          failed_ = "limit: " + std::string(h2::limit_name(e.limit));
        }
      },
      event);
  wake();
}

void H2UpstreamLeg::connection_ended(const std::string& why) {
  gone_ = true;
  stream_ = -1;  // the connection forgot it
  if (!done_ && failed_.empty()) failed_ = why;
  wake();
}

awaitable<bool> H2UpstreamLeg::send_head(const OutgoingRequest& r) {
  if (r.upgrade) fail("an upgrade cannot go over HTTP/2");
  if (stream_ >= 0 && !done_) fail("a request before the last response ended");
  leave_stream();
  if (gone_ || !connection_->open_for_more()) co_return false;  // a fresh connection may take it
  h2::UpstreamRequest fields = h2::to_h2_request_fields(r.head, r.target, r.host, r.injection, r.scanned);
  if (fields.error != nullptr) fail(std::string("the request cannot be sent: ") + fields.error);
  method_ = r.head.method;
  head_.reset();
  head_seen_ = refused_ = done_ = false;
  failed_.clear();
  data_ = {};
  trailers_.clear();
  stream_ = connection_->open_stream(fields, *this);
  fields.wipe();  // may hold the identity
  co_return stream_ >= 0;
}

awaitable<void> H2UpstreamLeg::send_body(std::string_view bytes, bool last) {
  if (!failed_.empty()) fail(failed_);
  if (stream_ < 0) fail("the stream is gone");
  if (!bytes.empty() || last) connection_->send_data(stream_, bytes, last);
  // The upstream's window is shut: wait for it as for a full socket.
  while (failed_.empty() && stream_ >= 0 && connection_->unsent(stream_) > kMaxUnsent) co_await wait();
  if (!failed_.empty()) fail(failed_);
}

awaitable<bool> H2UpstreamLeg::response_head(http::ResponseHead& head) {
  for (;;) {
    if (head_) {
      head = std::move(*head_);
      head_.reset();
      if (done_ && data_.empty()) leave_stream();
      co_return true;
    }
    // Never processed, or the connection went before any answer: as a
    // connection that closed (the exchange retries a bodiless request).
    if (refused_ || (gone_ && !head_seen_)) co_return false;
    if (!failed_.empty()) fail(failed_);
    co_await wait();
  }
}

awaitable<bool> H2UpstreamLeg::response_body(std::string& out) {
  for (;;) {
    if (!data_.empty()) {
      // A read's worth at a time, as from an HTTP/1.1 upstream: the exchange
      // asks for more only when its guest has room (unsent_budget.h); the
      // rest waits here, within the stream's window.
      const size_t at = out.size();
      out.resize(at + std::min(data_.size(), kReadChunk));
      const size_t n = data_.take(reinterpret_cast<uint8_t*>(out.data() + at), out.size() - at);
      if (done_ && data_.empty()) {
        leave_stream();
        co_return true;
      }
      // Taken: the upstream may send as much again.
      if (stream_ >= 0) connection_->consume(stream_, n);
      unconsumed_ -= n;
      co_return false;
    }
    if (done_) {
      leave_stream();
      co_return true;
    }
    if (!failed_.empty()) fail(failed_);
    co_await wait();
  }
}

bool H2UpstreamLeg::reusable() const {
  return failed_.empty() && !gone_ && done_ && connection_->open_for_more();
}

}  // namespace zn::proxy
