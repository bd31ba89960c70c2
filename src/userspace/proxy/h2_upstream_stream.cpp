#include "userspace/proxy/h2_upstream_stream.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <variant>

#include "userspace/h2/stream_upstream.h"
#include "userspace/http/rewrite.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;

// The exchange's own forwarded head: well within these (a guest's head is
// bounded by the proxy's limits; the injection and Host add little).
http::HttpLimits own_head_limits() {
  http::HttpLimits l;
  l.max_head_bytes = 64 * 1024;
  l.max_headers = 256;
  return l;
}

// The upstream's window opens only as the exchange takes the response
// (release_window): what this stream holds is bounded by the window, not by
// what the upstream cares to send.
h2::ClientOptions client_options() {
  h2::ClientOptions o;
  o.manual_window_updates = true;
  return o;
}

// While the exchange is still writing the request body, the upstream may
// answer (and stream) already: up to this much of the answer is taken in
// meanwhile, then its window stays shut until the exchange reads.
constexpr size_t kMaxHeldResponse = 1024 * 1024;

}  // namespace

H2UpstreamStream::H2UpstreamStream(std::unique_ptr<ByteStream> transport)
    : transport_(std::move(transport)), session_(client_options()) {}

void H2UpstreamStream::fail(const std::string& why) {
  if (failed_.empty()) failed_ = why;
  throw std::runtime_error("HTTP/2 upstream: " + failed_);
}

void H2UpstreamStream::release_window() {
  if (unconsumed_ == 0) return;
  session_.consume(stream_, unconsumed_);
  unconsumed_ = 0;
}

awaitable<void> H2UpstreamStream::flush() {
  for (;;) {
    std::string out = session_.take_output();
    take_events();
    if (out.empty()) co_return;
    co_await transport_->write_all(out);
  }
}

awaitable<bool> H2UpstreamStream::pump() {
  char buf[kReadChunk];
  const size_t n = co_await transport_->read_some(buf, sizeof(buf));
  if (n == 0) co_return false;
  const h2::Result fed = session_.feed(std::span(reinterpret_cast<const uint8_t*>(buf), n));
  take_events();
  if (!fed && failed_.empty()) failed_ = "protocol error: " + fed.error;
  co_return true;
}

void H2UpstreamStream::take_events() {
  for (h2::ClientEvent& event : session_.take_events()) {
    std::visit(
        [this](auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, h2::ResponseHeaders>) {
            if (e.stream_id != stream_ || e.status < 200) return;  // interim answers are not relayed
            h2::UpstreamResponse r = h2::from_h2_response(e, request_.method);
            if (r.error != nullptr) {
              failed_ = std::string("response: ") + r.error;
              session_.reset_stream(stream_, 0x1);
              return;
            }
            response_head_seen_ = true;
            response_chunked_ = r.head.framing == http::BodyFraming::kUntilClose;
            body_left_ = r.head.framing == http::BodyFraming::kContentLength ? r.head.content_length : 0;
            response_ += "HTTP/1.1 " + std::to_string(r.head.status) + " ";
            response_.append(http::reason_phrase(r.head.status)).append("\r\n");
            for (const http::Header& h : r.head.headers) {
              if (http::iequals(h.name, "content-length") || http::iequals(h.name, "transfer-encoding"))
                continue;
              response_.append(h.name).append(": ").append(h.value).append("\r\n");
            }
            if (r.head.framing == http::BodyFraming::kContentLength || request_.method == "HEAD" ||
                r.head.status == 304) {
              // A bodiless answer keeps its length as metadata.
              if (const std::string* length = r.head.find("content-length"))
                response_.append("content-length: ").append(*length).append("\r\n");
              else if (r.head.framing == http::BodyFraming::kContentLength)
                response_.append("content-length: ")
                    .append(std::to_string(r.head.content_length))
                    .append("\r\n");
            } else if (response_chunked_) {
              response_.append("transfer-encoding: chunked\r\n");
            }
            response_.append("\r\n");
            if (e.end_stream) {
              if (response_chunked_) response_.append(http::kLastChunk);
              response_done_ = true;
            }
          } else if constexpr (std::is_same_v<E, h2::ResponseData>) {
            if (e.stream_id != stream_ || !response_head_seen_) {
              session_.consume(e.stream_id, e.bytes.size());  // the connection's window is shared
              return;
            }
            unconsumed_ += e.bytes.size();
            if (!e.bytes.empty()) response_ += response_chunked_ ? http::chunk_frame(e.bytes) : e.bytes;
            body_left_ -= std::min<uint64_t>(body_left_, e.bytes.size());
            if (e.end_stream) {
              if (response_chunked_) response_.append(http::kLastChunk);
              response_done_ = true;
            }
          } else if constexpr (std::is_same_v<E, h2::ResponseTrailers>) {
            if (e.stream_id != stream_ || !response_head_seen_ || response_done_) return;
            // The exchange filters and scrubs them; a body framed by its
            // length cannot carry them in HTTP/1.1 (dropped).
            if (response_chunked_) response_.append(http::last_chunk(e.headers));
            response_done_ = true;
          } else if constexpr (std::is_same_v<E, h2::StreamReset>) {
            if (e.stream_id == stream_ && !response_done_) failed_ = "the upstream reset the stream";
          } else if constexpr (std::is_same_v<E, h2::LimitTripped>) {
            if (e.stream_id == 0 || e.stream_id == stream_)
              failed_ = "limit: " + std::string(h2::limit_name(e.limit));
          } else if constexpr (std::is_same_v<E, h2::GoAway>) {
            // The stream in flight may still be answered; no new one starts
            // (submit_request refuses), so the exchange retries elsewhere.
          }
        },
        event);
  }
}

void H2UpstreamStream::start_request() {
  const http::ParseResult head = http::parse_request_head(request_in_, own_head_limits(), request_);
  if (head.state == http::ParseState::kNeedMore) return;
  if (head.state == http::ParseState::kError) fail("the request to send is malformed: " + head.error);
  request_in_.erase(0, head.consumed);
  if (request_.upgrade) fail("an upgrade cannot go over HTTP/2");
  release_window();  // the last stream's: the connection's window is shared
  std::vector<h2::Field> fields;
  fields.reserve(request_.headers.size());
  for (const http::Header& h : request_.headers) {
    // Its framing is the stream's; a length stays as metadata.
    if (http::iequals(h.name, "transfer-encoding")) continue;
    fields.push_back({h.name, h.value});
  }
  const bool has_body =
      request_.framing == http::BodyFraming::kChunked ||
      (request_.framing == http::BodyFraming::kContentLength && request_.content_length > 0);
  stream_ =
      session_.submit_request(request_.method, "https", request_.host, request_.target, fields, has_body);
  for (h2::Field& f : fields) explicit_bzero(f.value.data(), f.value.size());  // may hold the identity
  if (stream_ < 0) fail("the request cannot be sent (" + std::to_string(stream_) + ")");
  response_.clear();
  response_head_seen_ = response_chunked_ = response_done_ = false;
  request_state_ = has_body ? Request::kBody : Request::kDone;
  if (has_body) request_body_.emplace(request_.framing, request_.content_length, own_head_limits());
}

awaitable<void> H2UpstreamStream::write_all(std::string_view data) {
  if (!failed_.empty()) fail(failed_);
  if (request_state_ == Request::kDone) {
    // A new request: the previous response must have been read whole.
    if (stream_ >= 0 && !response_done_) fail("a request before the last response ended");
    request_state_ = Request::kHead;
    request_in_.clear();
  }
  request_in_.append(data);
  if (request_state_ == Request::kHead) start_request();
  if (request_state_ == Request::kBody) {
    std::string piece;
    const http::BodyDecoder::Step step = request_body_->feed(request_in_, piece);
    request_in_.erase(0, step.consumed);
    if (step.error) fail("the request body to send is malformed: " + step.error_reason);
    if (!piece.empty() || step.done) session_.send_data(stream_, piece, step.done);
    explicit_bzero(piece.data(), piece.size());  // a swapped body holds a credential
    if (step.done) request_state_ = Request::kDone;
  }
  co_await flush();
  // The upstream's window is shut: wait for it as for a full socket (its
  // WINDOW_UPDATE comes with whatever else it sends).
  while (session_.buffered(stream_) > kMaxUnsent) {
    if (response_.size() < kMaxHeldResponse) {
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

awaitable<size_t> H2UpstreamStream::read_some(char* data, size_t size) {
  for (;;) {
    // The last of a body framed by its length is here, its stream's end
    // not yet: taken first (it is right behind), so that once the exchange
    // has read the response the connection is between streams (ready for
    // the next request, quiet in the pool).
    while (response_head_seen_ && !response_chunked_ && body_left_ == 0 && !response_done_ &&
           failed_.empty()) {
      release_window();
      co_await flush();
      const bool more = co_await pump();
      if (!more) break;
    }
    if (!response_.empty()) {
      const size_t n = std::min(size, response_.size());
      std::memcpy(data, response_.data(), n);
      response_.erase(0, n);
      co_return n;
    }
    if (!failed_.empty()) fail(failed_);
    if (response_done_) {
      // The exchange read the whole response and wants more: the
      // connection has nothing else for it (as a server that closed).
      co_return 0;
    }
    // Everything handed on was taken: the upstream may send as much again
    // (and our acknowledgements go with it).
    release_window();
    co_await flush();
    const bool more = co_await pump();
    if (!more) co_return 0;
  }
}

awaitable<void> H2UpstreamStream::close_write() {
  session_.goaway(0);
  try {
    co_await flush();
  } catch (const std::exception&) {
  }
  co_await transport_->close_write();
}

}  // namespace zn::proxy
