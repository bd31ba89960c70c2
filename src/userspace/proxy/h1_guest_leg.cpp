#include "userspace/proxy/h1_guest_leg.h"
#include "userspace/proxy/lingering_close.h"

#include <algorithm>
#include <exception>
#include <system_error>

#include "userspace/http/rewrite.h"
#include "userspace/websocket/handshake.h"

namespace zn::proxy {

using asio::awaitable;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

awaitable<size_t> H1GuestLeg::Tracked::read_some(char* data, size_t size) {
  size_t n = 0;
  try {
    n = co_await s_.read_some(data, size);
  } catch (...) {
    failed_ = true;
    throw;
  }
  if (n == 0) failed_ = true;
  co_return n;
}

awaitable<void> H1GuestLeg::Tracked::write_all(std::string_view data) {
  try {
    co_await s_.write_all(data);
  } catch (...) {
    failed_ = true;
    throw;
  }
}

H1GuestLeg::H1GuestLeg(ByteStream& guest, const http::HttpLimits& limits, H1Timeouts timeouts,
                       const Watchdog& dog)
    : stream_(guest), limits_(limits), timeouts_(timeouts), dog_(dog) {}

awaitable<bool> H1GuestLeg::read_more() {
  const size_t n = co_await dog_.guard(stream_.read_some(buf_, kReadChunk), timeouts_.idle);
  if (n == 0) co_return false;
  in_.append(buf_, n);
  co_return true;
}

awaitable<HeadIn> H1GuestLeg::next_head(http::RequestHead& head) {
  decoder_.reset();
  pending_.clear();
  started_ = false;
  chunked_ = false;
  head_bytes_ = 0;
  HeadIn out;
  std::optional<Clock::time_point> deadline;
  if (!in_.empty()) deadline = Clock::now() + timeouts_.header;
  for (;;) {
    out.parse = http::parse_request_head(in_, limits_, head);
    if (out.parse.state == http::ParseState::kDone) {
      out.state = HeadIn::State::kHead;
      head_bytes_ = out.parse.consumed;
      guest_11_ = head.version_minor == 1;
      co_return out;
    }
    if (out.parse.state == http::ParseState::kError) {
      out.state = HeadIn::State::kBad;
      co_return out;
    }
    // Waiting for a new request is keep-alive idling; a started head must
    // finish quickly (slowloris).
    const auto wait = deadline ? *deadline - Clock::now() : Clock::duration(timeouts_.idle);
    size_t n = 0;
    bool expired = false, failed = false;
    try {
      n = co_await dog_.guard(stream_.read_some(buf_, kReadChunk), std::max<Clock::duration>(wait, 1ms));
    } catch (const std::system_error& e) {
      expired = e.code() == std::errc::timed_out;
      failed = true;
    } catch (const std::exception&) {
      failed = true;
    }
    if (expired && deadline) {
      out.state = HeadIn::State::kTooSlow;
      co_return out;
    }
    if (failed || n == 0) {
      out.state = HeadIn::State::kEnd;
      co_return out;
    }
    if (!deadline) deadline = Clock::now() + timeouts_.header;
    in_.append(buf_, n);
  }
}

void H1GuestLeg::release_head() {
  in_.erase(0, head_bytes_);
  head_bytes_ = 0;
}

namespace {

// The first bytes of the decoded body in `after_head` (a fresh decoder: the
// body's own reading starts over).
std::string decoded_prefix(const http::RequestHead& req, std::string_view after_head, size_t n,
                           const http::HttpLimits& limits) {
  if (req.framing == http::BodyFraming::kNone || after_head.empty()) return {};
  http::BodyDecoder decoder(req.framing, req.content_length, limits);
  std::string out;
  decoder.feed(after_head.substr(0, n * 2), out);
  if (out.size() > n) out.resize(n);
  return out;
}

}  // namespace

awaitable<std::string> H1GuestLeg::preview_body(const http::RequestHead& req, size_t n,
                                                Clock::duration patience) {
  if (req.framing == http::BodyFraming::kNone) co_return std::string();
  const size_t want =
      req.framing == http::BodyFraming::kContentLength ? std::min<uint64_t>(n, req.content_length) : 1;
  std::string preview = decoded_prefix(req, std::string_view(in_).substr(head_bytes_), n, limits_);
  const auto until = Clock::now() + patience;
  while (preview.size() < want && !req.expect_continue) {
    // Waiting for readability, never cancelling a read: a read cut off by
    // a timer could drop bytes it already took.
    if (!stream_.has_buffered()) {
      const auto left = until - Clock::now();
      if (left <= Clock::duration::zero()) break;
      const bool readable = co_await stream_.wait_readable(left);
      if (!readable) break;
    }
    // Readable: a read that times out now is a stalled guest, and ends the
    // connection as it would in the body read proper.
    const bool more = co_await read_more();
    if (!more) break;
    preview = decoded_prefix(req, std::string_view(in_).substr(head_bytes_), n, limits_);
  }
  co_return preview;
}

awaitable<bool> H1GuestLeg::read_body(const http::RequestHead& req, std::string& out) {
  if (req.framing == http::BodyFraming::kNone) co_return true;
  if (!decoder_) decoder_.emplace(req.framing, req.content_length, limits_);
  for (;;) {
    const size_t before = out.size();
    http::BodyDecoder::Step step = decoder_->feed(std::string_view(in_).substr(head_bytes_), out);
    in_.erase(head_bytes_, step.consumed);
    if (step.error) throw BadRequestBody("malformed request body: " + step.error_reason);
    if (step.done) co_return true;
    if (out.size() > before) co_return false;
    const bool more = co_await read_more();
    if (!more) throw std::runtime_error("guest ended inside a request body");
  }
}

awaitable<bool> H1GuestLeg::wait_readable(Clock::duration timeout) { return stream_.wait_readable(timeout); }

awaitable<bool> H1GuestLeg::read_ahead() {
  try {
    const bool more = co_await read_more();
    co_return more;
  } catch (const std::exception&) {
    co_return false;
  }
}

awaitable<void> H1GuestLeg::send_continue() {
  co_await dog_.guard(stream_.write_all("HTTP/1.1 100 Continue\r\n\r\n"), timeouts_.idle);
}

bool H1GuestLeg::response_head(const http::ResponseHead& head, bool close) {
  const bool unframed =
      head.framing == http::BodyFraming::kChunked || head.framing == http::BodyFraming::kUntilClose;
  chunked_ = unframed && guest_11_;
  // HTTP/1.0 cannot frame a body of unknown length but by closing.
  close = close || (unframed && !guest_11_);
  pending_ += http::forwarded_response_head(head, chunked_, close);
  return close;
}

void H1GuestLeg::response_data(std::string_view bytes) {
  if (bytes.empty()) return;
  if (chunked_)
    pending_ += http::chunk_frame(bytes);
  else
    pending_ += bytes;
}

void H1GuestLeg::response_end(const std::vector<http::Header>& trailers) {
  if (chunked_) pending_ += http::last_chunk(trailers);
}

awaitable<size_t> H1GuestLeg::flush() {
  if (pending_.empty()) co_return 0;
  started_ = true;
  // A guest that stops reading holds the exchange no longer than an idle one.
  co_await dog_.guard(stream_.write_all(pending_), timeouts_.idle);
  const size_t n = pending_.size();
  pending_.clear();
  co_return n;
}

awaitable<void> H1GuestLeg::answer(const ProxyAnswer& a, const http::RequestHead* head, bool close) {
  if (a.local) {
    std::string out = http::local_response(a.status, a.content_type, a.body, close);
    // A HEAD response says the length it would have had, without the body.
    if (head && head->method == "HEAD" && a.status != 204 && a.status != 304)
      out.resize(out.size() - a.body.size());
    started_ = true;
    co_await dog_.guard(stream_.write_all(out), timeouts_.idle);
    if (close) co_await stream_.close_write();
    co_return;
  }
  // A refusal ends the connection. The guest's unread bytes are drained
  // briefly so the kernel does not reset the connection before the guest
  // reads the answer.
  try {
    const std::string out = http::proxy_response(a.status, a.body);
    started_ = true;
    co_await dog_.guard(stream_.write_all(out), 5s);
    co_await stream_.close_write();
    auto read_for = [this](std::chrono::steady_clock::duration left) {
      return dog_.guard(stream_.read_some(buf_, kReadChunk), left);
    };
    co_await drain_lingering(read_for);
  } catch (const std::exception&) {
  }
}

awaitable<void> H1GuestLeg::close() { co_await stream_.close_write(); }

awaitable<ByteStream*> H1GuestLeg::open_tunnel(const http::ResponseHead& head, std::string& pending) {
  const std::string out = websocket::switching_head(head.headers);
  started_ = true;
  co_await dog_.guard(stream_.write_all(out), timeouts_.idle);
  pending = std::move(in_);
  in_.clear();
  co_return &stream_;
}

}  // namespace zn::proxy
