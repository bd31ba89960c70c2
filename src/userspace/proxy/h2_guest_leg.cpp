#include "userspace/proxy/h2_guest_leg.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "userspace/h2/stream_request.h"
#include "userspace/h2/stream_response.h"

namespace zn::proxy {

using asio::awaitable;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void gone() { throw std::system_error(std::make_error_code(std::errc::connection_reset)); }

}  // namespace

H2GuestLeg::H2GuestLeg(h2::H2ServerSession& session, int32_t stream_id, std::function<void()> kick,
                       asio::ip::tcp::socket& socket, http::RequestHead head,
                       std::chrono::milliseconds idle_timeout, const Watchdog& dog, UnsentBudget& budget)
    : session_(session),
      id_(stream_id),
      kick_(std::move(kick)),
      socket_(socket),
      text_(h2::request_text(head)),
      method_(head.method),
      content_length_(head.content_length),
      has_length_(head.framing == http::BodyFraming::kContentLength),
      idle_(idle_timeout),
      dog_(dog),
      budget_(budget) {
  head_.emplace(std::move(head));
}

H2GuestLeg::~H2GuestLeg() { enter(State::kDone); }

void H2GuestLeg::enter(State state) {
  const auto relays = [](State s) { return s == State::kBody || s == State::kTunnel; };
  if (relays(state) && !relays(state_)) budget_.join();
  if (!relays(state) && relays(state_)) budget_.leave();
  state_ = state;
}

bool H2GuestLeg::room() { return budget_.room(session_.buffered(id_), session_.buffered_total()); }

awaitable<void> H2GuestLeg::wait_room() {
  if (!aborted_ && !room()) {
    budget_.hold_back();
    struct LetGo {
      UnsentBudget& budget;
      ~LetGo() { budget.let_go(); }
    } let_go{budget_};
    while (!aborted_ && !room()) co_await wait_for_signal(write_signal_);
  }
  if (aborted_) gone();
}

void H2GuestLeg::notify() {
  if (read_signal_) read_signal_->cancel();
  if (write_signal_) write_signal_->cancel();
}

void H2GuestLeg::push(std::string data) {
  if (aborted_ || ended_) {
    session_.consume(id_, data.size());
    return;
  }
  if (data.empty()) return;
  received_ += data.size();
  in_.push_back(std::move(data));
  notify();
}

void H2GuestLeg::end_request() {
  ended_ = true;
  notify();
}

void H2GuestLeg::abort() {
  aborted_ = true;
  notify();
}

void H2GuestLeg::wake() { notify(); }

size_t H2GuestLeg::drop_pending() {
  size_t n = 0;
  for (const std::string& s : in_) n += s.size();
  n -= front_taken_;
  in_.clear();
  front_taken_ = 0;
  return n;
}

size_t H2GuestLeg::take(char* data, size_t size) {
  std::string& s = in_.front();
  const size_t n = std::min(size, s.size() - front_taken_);
  std::memcpy(data, s.data() + front_taken_, n);
  front_taken_ += n;
  if (front_taken_ == s.size()) {
    in_.pop_front();
    front_taken_ = 0;
  }
  // Taken: the guest may send as much again.
  session_.consume(id_, n);
  kick_();
  return n;
}

void H2GuestLeg::take_all(std::string& out) {
  size_t n = 0;
  while (!in_.empty()) {
    std::string& s = in_.front();
    out.append(s, front_taken_);
    n += s.size() - front_taken_;
    in_.pop_front();
    front_taken_ = 0;
  }
  if (n) {
    session_.consume(id_, n);
    kick_();
  }
}

awaitable<void> H2GuestLeg::wait_for_data() {
  while (in_.empty() && !ended_ && !aborted_) co_await wait_for_signal(read_signal_);
  if (aborted_) gone();
}

awaitable<HeadIn> H2GuestLeg::next_head(http::RequestHead& head) {
  HeadIn out;
  if (!head_) co_return out;  // a stream carries one request
  head = std::move(*head_);
  head_.reset();
  out.state = HeadIn::State::kHead;
  out.parse.state = http::ParseState::kDone;
  out.parse.consumed = text_.size();
  co_return out;
}

awaitable<std::string> H2GuestLeg::preview_body(const http::RequestHead& head, size_t n,
                                                Clock::duration patience) {
  if (head.framing == http::BodyFraming::kNone) co_return std::string();
  const size_t want = has_length_ ? std::min<uint64_t>(n, content_length_) : 1;
  auto pushed = [&] {
    std::string out;
    for (const std::string& s : in_) {
      if (out.size() >= n) break;
      out.append(s, &s == &in_.front() ? front_taken_ : 0);
    }
    if (out.size() > n) out.resize(n);
    return out;
  };
  if (!head.expect_continue && received_ < want && !ended_ && !aborted_) {
    // The body's first DATA may come right behind the head: waited for briefly.
    auto wait = [&]() -> awaitable<void> {
      while (received_ < want && !ended_ && !aborted_) co_await wait_for_signal(read_signal_);
    };
    try {
      co_await dog_.guard(wait(), patience);
    } catch (const std::system_error&) {
    }
  }
  co_return pushed();
}

awaitable<bool> H2GuestLeg::read_body(const http::RequestHead& head, std::string& out) {
  if (head.framing == http::BodyFraming::kNone) co_return true;
  co_await dog_.guard(wait_for_data(), Clock::duration(idle_));
  take_all(out);
  // The codec checks DATA against content-length too; the body is never
  // read past it here either way.
  if (has_length_ && received_ > content_length_) throw BadRequestBody("more DATA than the content-length");
  if (!ended_) co_return false;
  if (has_length_ && received_ != content_length_) throw BadRequestBody("less DATA than the content-length");
  co_return true;
}

awaitable<bool> H2GuestLeg::wait_readable(Clock::duration timeout) {
  if (has_buffered()) co_return true;
  try {
    co_await dog_.guard(wait_for_data(), timeout);
  } catch (const std::system_error& e) {
    if (e.code() == std::errc::timed_out) co_return false;
  }
  co_return true;
}

bool H2GuestLeg::response_head(const http::ResponseHead& head, bool) {
  if (aborted_) gone();
  h2::StreamResponse r = h2::to_h2_response_fields(head);
  if (r.error) {
    // Nothing of it can go on HTTP/2: the stream ends with 502 instead.
    session_.submit_response(id_, 502, {}, false);
    enter(State::kDone);
  } else {
    body_ = h2::h2_has_body(head, method_);
    const bool ok = session_.submit_response(id_, r.status, r.headers, body_);
    enter(ok && body_ ? State::kBody : State::kDone);
  }
  kick_();
  return false;  // the stream's end is the response's
}

void H2GuestLeg::response_data(std::string_view bytes) {
  if (state_ != State::kBody || bytes.empty()) return;
  session_.send_data(id_, bytes, false);
  given_ += bytes.size();
}

void H2GuestLeg::response_end(const std::vector<http::Header>& trailers) {
  if (state_ != State::kBody) return;
  // A field HTTP/2 cannot carry ends the body without them.
  if (trailers.empty() || !session_.send_trailers(id_, trailers)) session_.send_data(id_, {}, true);
  enter(State::kDone);
  kick_();
}

awaitable<size_t> H2GuestLeg::flush() {
  if (aborted_) gone();
  kick_();
  // A guest that does not take the stream's response holds the writer, as
  // a full socket would (bounded by the idle timeout): the upstream is not
  // read meanwhile.
  co_await dog_.guard(wait_room(), Clock::duration(idle_));
  co_return std::exchange(given_, 0);
}

awaitable<void> H2GuestLeg::answer(const ProxyAnswer& a, const http::RequestHead* head, bool) {
  if (aborted_ || state_ != State::kHead) co_return;
  const bool bodiless_status = a.status == 204 || a.status == 304;
  std::vector<h2::Field> fields;
  if (!bodiless_status) {
    if (!a.content_type.empty()) fields.push_back({"content-type", a.content_type});
    fields.push_back({"content-length", std::to_string(a.body.size())});
  }
  fields.push_back({"server", "zeroness"});
  if (a.local) fields.push_back({"cache-control", "no-store"});
  const bool body = !bodiless_status && !a.body.empty() && !(head && head->method == "HEAD");
  if (session_.submit_response(id_, a.status, fields, body) && body) session_.send_data(id_, a.body, true);
  enter(State::kDone);
  kick_();
}

awaitable<ByteStream*> H2GuestLeg::open_tunnel(const http::ResponseHead& head, std::string& pending) {
  if (aborted_) gone();
  // RFC 8441: a 2xx opens the tunnel; the stream stays open both ways.
  http::ResponseHead opened = head;
  opened.status = 200;
  opened.framing = http::BodyFraming::kUntilClose;
  std::erase_if(opened.headers, [](const http::Header& h) {
    return http::iequals(h.name, "sec-websocket-accept") || http::iequals(h.name, "upgrade") ||
           http::iequals(h.name, "connection");
  });
  h2::StreamResponse r = h2::to_h2_response_fields(opened);
  session_.submit_response(id_, 200, r.error ? std::vector<h2::Field>{} : r.headers, true);
  enter(State::kTunnel);
  kick_();
  pending.clear();  // what the guest sent is read from the stream itself
  co_return static_cast<ByteStream*>(this);
}

awaitable<size_t> H2GuestLeg::read_some(char* data, size_t size) {
  co_await wait_for_data();
  if (in_.empty()) co_return 0;  // ended: the guest's side of the tunnel is closed
  co_return take(data, size);
}

awaitable<void> H2GuestLeg::write_all(std::string_view data) {
  if (aborted_) gone();
  if (state_ == State::kTunnel && !data.empty()) session_.send_data(id_, data, false);
  kick_();
  co_await wait_room();
}

awaitable<void> H2GuestLeg::close_write() {
  if (state_ == State::kTunnel) {
    session_.send_data(id_, {}, true);
    enter(State::kDone);
    kick_();
  }
  co_return;
}

}  // namespace zn::proxy
