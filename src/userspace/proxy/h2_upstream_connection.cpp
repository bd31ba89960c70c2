#include "userspace/proxy/h2_upstream_connection.h"

#include <algorithm>
#include <span>
#include <variant>

#include "userspace/proxy/h2_upstream_leg.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;

constexpr uint32_t kCancelStream = 0x8;

h2::ClientOptions upstream_client_options() {
  h2::ClientOptions o;
  o.manual_window_updates = true;
  o.stream_window = H2UpstreamConnection::kStreamWindow;
  o.connection_window = H2UpstreamConnection::kConnectionWindow;
  return o;
}

int32_t stream_of(const h2::ClientEvent& event) {
  return std::visit(
      [](const auto& e) -> int32_t {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, h2::GoAway>)
          return 0;
        else
          return e.stream_id;
      },
      event);
}

}  // namespace

H2UpstreamConnection::H2UpstreamConnection(std::unique_ptr<asio::ip::tcp::socket> socket,
                                           std::unique_ptr<ByteStream> transport, std::string connected,
                                           std::chrono::milliseconds io_timeout,
                                           std::chrono::milliseconds idle)
    : socket_(std::move(socket)),
      transport_(std::move(transport)),
      executor_(socket_->get_executor()),
      connected_(std::move(connected)),
      io_timeout_(io_timeout),
      idle_(idle),
      dog_(executor_),
      session_(upstream_client_options()) {}

H2UpstreamConnection::~H2UpstreamConnection() {
  transport_.reset();
  asio::error_code ignored;
  socket_->close(ignored);
}

void H2UpstreamConnection::start() {
  if (started_) return;
  started_ = true;
  dog_.spawn(executor_, run(shared_from_this()));
}

bool H2UpstreamConnection::open_for_more() {
  if (!ended_.empty() || !failed_.empty() || goaway_ || !session_.request_allowed()) return false;
  const uint32_t bound = std::min(kMaxStreams, session_.peer_max_concurrent_streams());
  return streams_.size() < bound;
}

int32_t H2UpstreamConnection::open_stream(const h2::UpstreamRequest& r, H2UpstreamLeg& leg) {
  if (!open_for_more()) return -1;
  const int32_t id = session_.submit_request(r.method, r.scheme, r.authority, r.path, r.headers, r.has_body);
  if (id < 0) return id;
  streams_[id] = &leg;
  kick();
  return id;
}

void H2UpstreamConnection::close_stream(int32_t id, bool ended, size_t unconsumed) {
  if (streams_.erase(id) == 0) return;
  if (!ended) session_.reset_stream(id, kCancelStream);
  if (unconsumed > 0) session_.consume(id, unconsumed);  // the connection's window is shared
  kick();
}

void H2UpstreamConnection::send_data(int32_t id, std::string_view bytes, bool last) {
  session_.send_data(id, bytes, last);
  kick();
}

void H2UpstreamConnection::consume(int32_t id, size_t bytes) {
  session_.consume(id, bytes);
  kick();
}

void H2UpstreamConnection::kick() {
  kicked_ = true;
  if (kick_) kick_->cancel();
}

awaitable<void> H2UpstreamConnection::write_pending() {
  for (;;) {
    std::string out = session_.take_output();
    dispatch();  // a stream closes once its last frame is out
    if (out.empty()) break;
    co_await dog_.guard(transport_->write_all(out), io_timeout_);
  }
  // The upstream's window may have opened: senders held back go on.
  for (auto& [id, leg] : streams_) leg->wake();
}

void H2UpstreamConnection::dispatch() {
  for (h2::ClientEvent& event : session_.take_events()) {
    if (const auto* g = std::get_if<h2::GoAway>(&event)) {
      // Streams past its last id are closed by the codec (REFUSED_STREAM:
      // their legs retry elsewhere); the others may still be answered.
      (void)g;
      goaway_ = true;
      continue;
    }
    if (const auto* l = std::get_if<h2::LimitTripped>(&event); l && l->stream_id == 0) {
      failed_ = "limit: " + std::string(h2::limit_name(l->limit));
      continue;
    }
    const int32_t id = stream_of(event);
    auto it = streams_.find(id);
    if (it == streams_.end()) {
      // Its leg is gone: its DATA still counted against the connection's window.
      if (auto* d = std::get_if<h2::ResponseData>(&event)) session_.consume(id, d->bytes.size());
      continue;
    }
    it->second->deliver(event);
  }
}

awaitable<void> H2UpstreamConnection::run(std::shared_ptr<H2UpstreamConnection> self) {
  kick_.emplace(executor_);
  std::string why = "the upstream closed";
  try {
    co_await serve();
    if (!failed_.empty()) why = failed_;
    if (goaway_) why = "the upstream went away (GOAWAY)";
  } catch (const std::exception& e) {
    why = e.what();
  }
  end(why);
  try {
    session_.goaway(0);
    co_await write_pending();
    co_await dog_.guard(transport_->close_write(), io_timeout_);
  } catch (const std::exception&) {
  }
  asio::error_code ignored;
  socket_->close(ignored);
  (void)self;  // held to here: the legs may be gone
}

awaitable<void> H2UpstreamConnection::serve() {
  for (;;) {
    kicked_ = false;
    co_await write_pending();
    if (!failed_.empty() || session_.finished() || (goaway_ && streams_.empty())) co_return;
    // With streams open, their exchanges' deadlines bound the wait; with
    // none, the connection's idle bound.
    const auto patience =
        streams_.empty() ? std::chrono::steady_clock::duration(idle_) : std::chrono::hours(24);
    if (kicked_) continue;  // a leg changed the session
    const Woke woke = co_await wait_readable_or_signal(*transport_, *kick_, patience);
    if (woke == Woke::kSignalled) continue;
    if (woke == Woke::kTimedOut) {
      if (streams_.empty()) co_return;  // idle
      continue;
    }
    const size_t n = co_await dog_.guard(transport_->read_some(buf_, sizeof(buf_)), io_timeout_);
    if (n == 0) co_return;
    const h2::Result fed = session_.feed(std::span(reinterpret_cast<const uint8_t*>(buf_), n));
    dispatch();
    if (!fed && failed_.empty()) failed_ = "protocol error: " + fed.error;
  }
}

void H2UpstreamConnection::end(const std::string& why) {
  ended_ = why.empty() ? "ended" : why;
  // Each leg hears it; it leaves by close_stream (which then finds nothing).
  std::map<int32_t, H2UpstreamLeg*> streams;
  streams.swap(streams_);
  for (auto& [id, leg] : streams) leg->connection_ended(ended_);
}

}  // namespace zn::proxy
