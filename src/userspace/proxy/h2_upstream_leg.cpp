#include "userspace/proxy/h2_upstream_leg.h"

#include <span>
#include <stdexcept>
#include <variant>

#include "userspace/h2/stream_upstream.h"

namespace zn::proxy {
namespace {

using asio::awaitable;

// The upstream's window opens only as the exchange takes the response
// (release_window): what this stream holds is bounded by the window, not by
// what the upstream cares to send.
h2::ClientOptions client_options() {
  h2::ClientOptions o;
  o.manual_window_updates = true;
  return o;
}

// While the exchange is still sending the request body, the upstream may
// answer (and stream) already: up to this much of the answer is taken in
// meanwhile, then its window stays shut until the exchange reads.
constexpr size_t kMaxHeldResponse = 1024 * 1024;

constexpr uint32_t kRefusedStream = 0x7;  // RFC 9113 8.7: not processed, safe to retry

}  // namespace

H2UpstreamLeg::H2UpstreamLeg(std::unique_ptr<ByteStream> transport)
    : transport_(std::move(transport)), session_(client_options()) {}

void H2UpstreamLeg::fail(const std::string& why) {
  if (failed_.empty()) failed_ = why;
  throw std::runtime_error("HTTP/2 upstream: " + failed_);
}

void H2UpstreamLeg::release_window() {
  if (unconsumed_ == 0 || stream_ < 0) return;
  session_.consume(stream_, unconsumed_);
  unconsumed_ = 0;
}

awaitable<void> H2UpstreamLeg::flush() {
  for (;;) {
    std::string out = session_.take_output();
    take_events();
    if (out.empty()) co_return;
    co_await transport_->write_all(out);
  }
}

awaitable<bool> H2UpstreamLeg::pump() {
  const size_t n = co_await transport_->read_some(buf_, sizeof(buf_));
  if (n == 0) co_return false;
  const h2::Result fed = session_.feed(std::span(reinterpret_cast<const uint8_t*>(buf_), n));
  take_events();
  if (!fed && failed_.empty()) failed_ = "protocol error: " + fed.error;
  co_return true;
}

void H2UpstreamLeg::take_events() {
  for (h2::ClientEvent& event : session_.take_events()) {
    std::visit(
        [this](auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, h2::ResponseHeaders>) {
            if (e.stream_id != stream_ || e.status < 200 || head_seen_)
              return;  // interim answers are not relayed
            h2::UpstreamResponse r = h2::from_h2_response(e, method_);
            if (r.error != nullptr) {
              failed_ = std::string("response: ") + r.error;
              session_.reset_stream(stream_, 0x1);
              return;
            }
            head_seen_ = true;
            head_ = std::move(r.head);
            done_ = e.end_stream;
          } else if constexpr (std::is_same_v<E, h2::ResponseData>) {
            if (e.stream_id != stream_ || !head_seen_) {
              session_.consume(e.stream_id, e.bytes.size());  // the connection's window is shared
              return;
            }
            unconsumed_ += e.bytes.size();
            data_.append(e.bytes);
            done_ = done_ || e.end_stream;
          } else if constexpr (std::is_same_v<E, h2::ResponseTrailers>) {
            if (e.stream_id != stream_ || !head_seen_ || done_) return;
            trailers_ = std::move(e.headers);  // filtered and scrubbed by the exchange
            done_ = true;
          } else if constexpr (std::is_same_v<E, h2::StreamReset>) {
            if (e.stream_id != stream_ || done_) return;
            if (!head_seen_ && e.error_code == kRefusedStream)
              refused_ = true;
            else
              failed_ = "the upstream reset the stream";
          } else if constexpr (std::is_same_v<E, h2::LimitTripped>) {
            if (e.stream_id == 0 || e.stream_id == stream_)
              failed_ = "limit: " + std::string(h2::limit_name(e.limit));
          } else if constexpr (std::is_same_v<E, h2::GoAway>) {
            // The stream in flight may still be answered; no new one starts.
            goaway_ = true;
          }
        },
        event);
  }
}

awaitable<bool> H2UpstreamLeg::send_head(const OutgoingRequest& r) {
  if (r.upgrade) fail("an upgrade cannot go over HTTP/2");
  if (stream_ >= 0 && !done_) fail("a request before the last response ended");
  if (!failed_.empty() || goaway_) co_return false;  // a fresh connection may take it
  h2::UpstreamRequest fields = h2::to_h2_request_fields(r.head, r.target, r.host, r.injection, r.scanned);
  if (fields.error != nullptr) fail(std::string("the request cannot be sent: ") + fields.error);
  release_window();  // the last stream's: the connection's window is shared
  stream_ = session_.submit_request(fields.method, fields.scheme, fields.authority, fields.path,
                                    fields.headers, fields.has_body);
  fields.wipe();  // may hold the identity
  if (stream_ < 0) co_return false;
  method_ = r.head.method;
  head_.reset();
  head_seen_ = refused_ = done_ = false;
  data_.clear();
  trailers_.clear();
  bool sent = true;
  try {
    co_await flush();
  } catch (const std::exception&) {
    sent = false;
  }
  co_return sent;
}

awaitable<void> H2UpstreamLeg::send_body(std::string_view bytes, bool last) {
  if (!failed_.empty()) fail(failed_);
  if (!bytes.empty() || last) session_.send_data(stream_, bytes, last);
  co_await flush();
  // The upstream's window is shut: wait for it as for a full socket (its
  // WINDOW_UPDATE comes with whatever else it sends).
  while (session_.buffered(stream_) > kMaxUnsent) {
    if (data_.size() < kMaxHeldResponse) {
      release_window();
      co_await flush();
    }
    const bool more = co_await pump();
    if (!more) fail("the upstream closed");
    if (!failed_.empty()) fail(failed_);
    co_await flush();
  }
  if (!failed_.empty()) fail(failed_);
}

awaitable<bool> H2UpstreamLeg::response_head(http::ResponseHead& head) {
  for (;;) {
    if (head_) {
      head = std::move(*head_);
      head_.reset();
      co_return true;
    }
    if (refused_) co_return false;  // never processed: as a connection that closed
    if (!failed_.empty()) fail(failed_);
    co_await flush();
    const bool more = co_await pump();
    if (!more) co_return false;
  }
}

awaitable<bool> H2UpstreamLeg::response_body(std::string& out) {
  for (;;) {
    if (!data_.empty()) {
      out.append(data_);
      data_.clear();
      co_return done_;
    }
    if (done_) co_return true;
    if (!failed_.empty()) fail(failed_);
    // Everything handed on was taken: the upstream may send as much again
    // (and our acknowledgements go with it).
    release_window();
    co_await flush();
    const bool more = co_await pump();
    if (!more) fail("the upstream closed inside a response");
  }
}

bool H2UpstreamLeg::reusable() const { return failed_.empty() && !goaway_ && done_ && !session_.finished(); }

}  // namespace zn::proxy
