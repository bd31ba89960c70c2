#include "userspace/proxy/stream_pipe.h"

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;

[[noreturn]] void gone() { throw std::system_error(std::make_error_code(std::errc::connection_reset)); }

}  // namespace

StreamPipe::StreamPipe(asio::ip::tcp::socket& guest_socket, Sink& sink, bool head_request,
                       const http::HttpLimits& limits)
    : socket_(guest_socket), sink_(sink), head_request_(head_request), limits_(limits) {}

void StreamPipe::notify() {
  if (read_signal_) read_signal_->cancel();
  if (write_signal_) write_signal_->cancel();
}

void StreamPipe::push(std::string bytes, size_t payload_bytes) {
  if (aborted_ || ended_ || bytes.empty()) return;
  in_.push_back({std::move(bytes), 0, payload_bytes});
  notify();
}

void StreamPipe::end_request() {
  ended_ = true;
  notify();
}

void StreamPipe::abort() {
  aborted_ = true;
  notify();
}

void StreamPipe::wake() { notify(); }

size_t StreamPipe::drop_pending() {
  size_t n = 0;
  for (const Segment& s : in_) n += s.payload;
  in_.clear();
  return n;
}

awaitable<size_t> StreamPipe::read_some(char* data, size_t size) {
  while (in_.empty() && !ended_ && !aborted_) co_await wait_for_signal(read_signal_);
  if (aborted_) gone();
  if (in_.empty()) co_return 0;  // ended: the request is complete
  Segment& s = in_.front();
  const size_t n = std::min(size, s.bytes.size() - s.taken);
  std::memcpy(data, s.bytes.data() + s.taken, n);
  s.taken += n;
  if (s.taken == s.bytes.size()) {
    const size_t payload = s.payload;
    in_.pop_front();
    if (payload) sink_.on_request_consumed(payload);
  }
  co_return n;
}

awaitable<bool> StreamPipe::wait_readable(std::chrono::steady_clock::duration timeout) {
  using namespace asio::experimental::awaitable_operators;
  if (has_buffered()) co_return true;
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto woken = [this]() -> awaitable<void> {
    while (!has_buffered()) co_await wait_for_signal(read_signal_);
  };
  auto r = co_await (woken() || timer.async_wait(asio::experimental::as_tuple(use_awaitable)));
  co_return r.index() == 0;
}

awaitable<void> StreamPipe::write_all(std::string_view data) {
  if (aborted_) gone();
  out_.append(data);
  parse_response();
  // A guest that does not take the stream's response holds the exchange,
  // as a full socket would (the exchange's deadline ends it).
  while (!aborted_ && sink_.unsent() > kMaxUnsent) co_await wait_for_signal(write_signal_);
  if (aborted_) gone();
}

awaitable<void> StreamPipe::close_write() {
  // A body that ends where the exchange stops writing (close-delimited), or
  // the end of a tunnel.
  if (state_ == State::kTunnel ||
      (state_ == State::kBody && response_.framing == http::BodyFraming::kUntilClose)) {
    state_ = State::kDone;
    sink_.on_response_data({}, true);
  }
  co_return;
}

void StreamPipe::parse_response() {
  for (;;) {
    if (state_ == State::kHead) {
      http::ResponseHead head;
      const http::ParseResult r = http::parse_response_head(out_, limits_, head_request_, head);
      if (r.state == http::ParseState::kNeedMore) return;
      if (r.state == http::ParseState::kError)
        throw std::runtime_error("the exchange wrote a malformed response: " + r.error);
      out_.erase(0, r.consumed);
      // A WebSocket's upstream switched (the exchange checked its 101):
      // everything after the head is the tunnel's.
      if (head.status == 101 && tunnel_) {
        response_ = std::move(head);
        state_ = State::kTunnel;
        sink_.on_response_head(response_, true);
        continue;
      }
      // 100 Continue and the like: HTTP/2 needs none (the body flows as the
      // window allows).
      if (head.status < 200) continue;
      response_ = std::move(head);
      const bool has_body =
          response_.framing != http::BodyFraming::kNone &&
          !(response_.framing == http::BodyFraming::kContentLength && response_.content_length == 0);
      state_ = has_body ? State::kBody : State::kDone;
      if (has_body) decoder_.emplace(response_.framing, response_.content_length, limits_);
      sink_.on_response_head(response_, has_body);
      continue;
    }
    if (state_ == State::kTunnel) {
      if (!out_.empty()) sink_.on_response_data(out_, false);
      out_.clear();
      return;
    }
    if (state_ == State::kBody) {
      std::string piece;
      const http::BodyDecoder::Step step = decoder_->feed(out_, piece);
      out_.erase(0, step.consumed);
      if (step.error) throw std::runtime_error("the exchange wrote a malformed body: " + step.error_reason);
      if (step.done) state_ = State::kDone;
      const bool trailers = step.done && !decoder_->trailers().empty();
      if (!piece.empty() || (step.done && !trailers)) sink_.on_response_data(piece, step.done && !trailers);
      if (trailers) sink_.on_response_trailers(decoder_->trailers());
      if (!step.done) return;
      continue;
    }
    out_.clear();  // nothing follows a complete response on a stream
    return;
  }
}

}  // namespace zn::proxy
