#include "userspace/proxy/h2_intercept.h"
#include "userspace/proxy/lingering_close.h"

#include <asio/experimental/as_tuple.hpp>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "userspace/h2/server_session.h"
#include "userspace/h2/stream_request.h"
#include "userspace/proxy/h2_guest_leg.h"
#include "userspace/websocket/handshake.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kInternalError = 0x2;
constexpr uint32_t kCancel = 0x8;
constexpr uint32_t kEnhanceYourCalm = 0xb;

// One stream: the watchdog of its exchange's thread (its deadlines, and
// how to end it), and its guest leg.
struct StreamBridge {
  explicit StreamBridge(const asio::any_io_executor& executor) : dog(executor) {}
  Watchdog dog;
  std::unique_ptr<H2GuestLeg> leg;
};

class H2Connection {
 public:
  H2Connection(ByteStream& guest, const UpstreamDecision& connection, InterceptContext& ctx,
               const Watchdog& dog, UnsentBudget& budget)
      : session(options(budget.bounds().streams)),
        guest_(guest),
        conn_(connection),
        ctx_(ctx),
        dog_(dog),
        budget_(budget) {}

  awaitable<void> run() {
    ctx_.counters.h2_connections++;
    kick_.emplace(co_await asio::this_coro::executor);
    try {
      co_await serve();
    } catch (const std::exception&) {
    }
    co_await stop_streams();
    try {
      co_await write_pending();
      co_await guest_.close_write();
      if (failed_) co_await linger();
    } catch (const std::exception&) {
    }
  }

  // A stream's exchange changed the session: the owner writes it out.
  void kick() {
    kicked_ = true;
    if (kick_) kick_->cancel();
  }

  h2::H2ServerSession session;

 private:
  // Reads and writes until the connection is over.
  awaitable<void> serve() {
    bool over = false;
    while (!over) {
      kicked_ = false;
      bool wrote = true;
      try {
        co_await write_pending();
      } catch (const std::exception&) {
        wrote = false;  // the guest stopped reading, or went
      }
      if (!wrote || failed_ || session.finished() || (goaway_ && streams_.empty())) break;
      if (kicked_) continue;  // a stream has output
      const Woke woke = co_await wait_readable_or_signal(guest_, *kick_, ctx_.idle_timeout);
      if (woke == Woke::kSignalled) continue;
      if (woke == Woke::kTimedOut) {
        if (streams_.empty()) break;  // idle: no request in flight
        continue;
      }
      size_t n = 0;
      try {
        n = co_await dog_.guard(guest_.read_some(buf_, kReadChunk), ctx_.idle_timeout);
      } catch (const std::exception&) {
        over = true;
      }
      if (n == 0) break;
      const h2::Result fed = session.feed(std::span(reinterpret_cast<const uint8_t*>(buf_), n));
      handle_events();
      if (!fed) failed_ = true;  // its GOAWAY is written next, then the connection goes
    }
  }

  // After a GOAWAY for an error (a flood, a protocol error) the guest may
  // still be sending: closing with its bytes unread would reset the
  // connection, and a reset makes the guest's kernel drop the GOAWAY
  // before the guest reads it. What still comes is read and dropped for a
  // moment (nginx's lingering close), bounded in time and bytes.
  awaitable<void> linger() {
    auto read_for = [this](Clock::duration left) {
      return dog_.guard(guest_.socket().async_read_some(asio::buffer(buf_, kReadChunk), use_awaitable), left);
    };
    co_await drain_lingering(read_for);
  }

  // `streams`: the most at once, which the budget keeps room for.
  static h2::ServerOptions options(size_t streams) {
    h2::ServerOptions o;
    o.limits.max_concurrent_streams = static_cast<uint32_t>(streams);
    // A body the exchange has not taken yet holds the guest back (its
    // stream only): the window opens as the exchange reads.
    o.manual_window_updates = true;
    // WebSocket over HTTP/2 (RFC 8441): decided by the exchange like an
    // HTTP/1.1 handshake.
    o.enable_extended_connect = true;
    return o;
  }

  awaitable<void> wait_kick() {
    if (kicked_) co_return;
    kick_->expires_at(Clock::time_point::max());
    co_await kick_->async_wait(asio::experimental::as_tuple(use_awaitable));
  }

  awaitable<void> write_pending() {
    for (;;) {
      std::string out = session.take_output();
      handle_events();  // a stream closes once its last frame is out
      if (out.empty()) break;
      co_await dog_.guard(guest_.write_all(out), ctx_.idle_timeout);
    }
    // The guest's window may have opened: writers held back go on.
    for (auto& [id, s] : streams_) s->leg->wake();
  }

  void handle_events() {
    for (h2::ServerEvent& e : session.take_events()) std::visit([this](auto& event) { on(event); }, e);
  }

  void on(h2::RequestHeaders& h) {
    ctx_.counters.h2_streams++;
    if (goaway_) {
      session.refuse_stream(h.stream_id);
      return;
    }
    h2::StreamRequestResult r = h2::to_request_head(h, conn_.host, ctx_.limits, conn_.port);
    // The HTTP/1.1 handshake the same WebSocket would be, which the
    // exchange checks and decides as one; its upstream answers the key made
    // here (an HTTP/2 client sends none).
    if (r && r.websocket) r.head.headers.push_back({"sec-websocket-key", websocket::make_key()});
    if (!r) {
      ctx_.counters.denied++;
      answer(h.stream_id, r.status,
             r.status == 421 ? "zeroness: misdirected request (not the TLS name)\n"
                             : "zeroness: refused (" + r.reason + ")\n");
      report_refusal(h.method, h.path, r.status, r.reason);
      return;
    }
    const asio::any_io_executor executor = guest_.socket().get_executor();
    auto s = std::make_shared<StreamBridge>(executor);
    s->leg = std::make_unique<H2GuestLeg>(
        session, h.stream_id, [this] { kick(); }, guest_.socket(), std::move(r.head), ctx_.idle_timeout,
        s->dog, budget_);
    if (h.end_stream) s->leg->end_request();
    streams_[h.stream_id] = s;
    s->dog.spawn(executor, run_stream(s));
  }

  void on(h2::RequestData& d) {
    auto it = streams_.find(d.stream_id);
    if (it == streams_.end() || it->second->leg->response_complete()) {
      // Its exchange is done (answered before the body ended): the bytes
      // are dropped, and given back to the connection's window.
      session.consume(d.stream_id, d.bytes.size());
      return;
    }
    H2GuestLeg& leg = *it->second->leg;
    leg.push(std::move(d.bytes));
    if (d.end_stream) leg.end_request();
  }

  void on(h2::RequestTrailers& t) {
    // Trailer fields are not passed on (the exchange reads none from a
    // guest either); they end the request.
    if (auto it = streams_.find(t.stream_id); it != streams_.end()) it->second->leg->end_request();
  }

  void on(h2::StreamRejected& r) {
    ctx_.counters.denied++;
    report_refusal("", "", 0, "http2: " + r.reason);
  }

  void on(h2::StreamReset& r) {
    auto it = streams_.find(r.stream_id);
    if (it == streams_.end()) return;
    // A stream whose exchange was running, ended by the guest: against the
    // session's bound over all its connections too.
    if (ctx_.session_resets && !failed_ && !ctx_.session_resets->take(conn_.session)) {
      ctx_.counters.h2_limit_trips++;
      report_refusal("", "", 0, "http2 limit: session_resets");
      session.goaway(kEnhanceYourCalm);
      failed_ = true;
    }
    // The guest gave up on it: the exchange ends now, and what it had not
    // read of the body goes back to the window.
    StreamBridge& s = *it->second;
    session.consume(r.stream_id, s.leg->drop_pending());
    s.leg->abort();
    s.dog.cancel();
  }

  void on(h2::LimitTripped& l) {
    ctx_.counters.h2_limit_trips++;
    report_refusal("", "", 0, "http2 limit: " + std::string(h2::limit_name(l.limit)));
    if (l.stream_id == 0) failed_ = true;
  }

  void on(h2::GoAway&) { goaway_ = true; }

  // The exchange for one stream; the stream is reset if it ends without
  // a whole response (an upstream that failed mid-body, a cancellation).
  awaitable<void> run_stream(std::shared_ptr<StreamBridge> s) {
    try {
      co_await serve_exchange(*s->leg, conn_, ctx_, s->dog);
    } catch (const std::exception&) {
    }
    const int32_t id = s->leg->id();
    if (!s->leg->response_complete())
      session.reset_stream(id, s->leg->response_started() ? kInternalError : kCancel);
    session.consume(id, s->leg->drop_pending());
    s->leg->abort();
    streams_.erase(id);
    // Gone now, out of the budget too, while the connection surely is.
    s->leg.reset();
    kick();
  }

  // Every exchange still running is ended, and waited for: they use this
  // connection, its decision and its context.
  awaitable<void> stop_streams() {
    for (auto& [id, s] : streams_) {
      s->leg->abort();
      s->dog.cancel();
    }
    while (!streams_.empty()) {
      kicked_ = false;
      co_await wait_kick();
    }
  }

  // The proxy's own answer on a stream, with a body saying why.
  void answer(int32_t id, int status, const std::string& text) {
    if (session.submit_response(id, status, {{"content-type", "text/plain; charset=utf-8"}}, true))
      session.send_data(id, text, true);
  }

  void report_refusal(const std::string& method, const std::string& path, int status,
                      const std::string& why) {
    RequestSummary summary;
    summary.session = conn_.session;
    summary.host = conn_.host;
    summary.method = method;
    summary.path = path;
    summary.status = status;
    summary.error = why;
    try {
      ctx_.policy.on_request_done(summary);
    } catch (const std::exception&) {
    }
  }

  ByteStream& guest_;
  const UpstreamDecision& conn_;
  InterceptContext& ctx_;
  const Watchdog& dog_;   // the connection's thread's
  UnsentBudget& budget_;  // what its streams may hold unsent
  std::map<int32_t, std::shared_ptr<StreamBridge>> streams_;
  std::optional<asio::steady_timer> kick_;
  bool kicked_ = false;
  bool failed_ = false;  // a flood bound or a protocol error: the connection ends
  bool goaway_ = false;  // the guest sent GOAWAY: no new streams
  char buf_[kReadChunk];
};

}  // namespace

awaitable<void> serve_intercepted_h2(ByteStream& guest, const UpstreamDecision& connection,
                                     InterceptContext& context, const Watchdog& dog) {
  UnsentBudget budget;
  co_await serve_intercepted_h2(guest, connection, context, dog, budget);
}

awaitable<void> serve_intercepted_h2(ByteStream& guest, const UpstreamDecision& connection,
                                     InterceptContext& context, const Watchdog& dog, UnsentBudget& budget) {
  auto h2 = std::make_unique<H2Connection>(guest, connection, context, dog, budget);
  try {
    co_await h2->run();
  } catch (const std::exception&) {
  }
}

}  // namespace zn::proxy
