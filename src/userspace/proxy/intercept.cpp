#include "userspace/proxy/intercept.h"
#include "userspace/proxy/upstream_connector.h"

#include <openssl/crypto.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include "userspace/http/body.h"
#include "userspace/http/content_coding.h"
#include "userspace/http/rewrite.h"
#include "userspace/http/target.h"
#include "userspace/proxy/filters/chain.h"
#include "userspace/proxy/filters/response_scrub_filter.h"
#include "userspace/proxy/h1_guest_leg.h"
#include "userspace/proxy/h1_upstream_leg.h"
#include "userspace/proxy/offload.h"
#include "userspace/proxy/h2_upstream_leg.h"
#include "userspace/proxy/loop_share.h"
#include "userspace/proxy/request_screen.h"
#include "userspace/proxy/scrub_fields.h"
#include "userspace/proxy/secret_scrubber.h"
#include "userspace/proxy/websocket_relay.h"
#include "userspace/tls/contexts.h"
#include "userspace/tls/session_cache.h"
#include "userspace/net/asio_endpoint.h"
#include "userspace/websocket/handshake.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A request body the broker answers itself (a blob or KV value, a SQL call)
// is read whole into memory: bounded.
constexpr size_t kMaxLocalBody = 8 * 1024 * 1024;

// The upstream side of one guest connection, reused across its keep-alive
// requests while they go to the same host, and taken from / given back to
// the UpstreamPool across guest connections.
struct Upstream {
  std::string host;
  std::string identity;                 // of the last request it carried ("" none)
  std::unique_ptr<tcp::socket> socket;  // null for a stream of a shared connection (it owns its socket)
  std::unique_ptr<UpstreamLeg> leg;     // over *socket
  std::string connected;                // "198.18.0.10:443": the address and port connected
  SessionSockets::Slot slot;            // an own socket's place in the session's cap

  bool open() const { return leg != nullptr; }
  void reset() {
    leg.reset();
    if (socket) {
      asio::error_code ignored;
      socket->close(ignored);
    }
    socket.reset();
    slot.release();
    host.clear();
    identity.clear();
    connected.clear();
  }
};

using filters::Refusal;

// A tripwire turned up in a request body being streamed: the upstream has
// the head and part of the body (never the tripwire: the screen holds back
// a partial match), so the connection goes. (A body read whole is screened
// by the chain's body screen before anything goes.)
struct TripwireInBody : std::runtime_error {
  explicit TripwireInBody(std::vector<std::string> l)
      : std::runtime_error("tripwire in body"), labels(std::move(l)) {}
  std::vector<std::string> labels;
};

// Ends a connect others of its key wait for (H2UpstreamShares::join).
struct ConnectTurn {
  H2UpstreamShares* shares = nullptr;
  std::shared_ptr<H2UpstreamShares::Connecting> connecting;
  ConnectTurn(H2UpstreamShares* s, std::shared_ptr<H2UpstreamShares::Connecting> c)
      : shares(s), connecting(std::move(c)) {}
  ConnectTurn(const ConnectTurn&) = delete;
  ConnectTurn& operator=(const ConnectTurn&) = delete;
  ~ConnectTurn() {
    if (shares && connecting) shares->finish(connecting);
  }
};

const Refusal kTripwireRefusal{403, std::string(filters::kTripwireRefusalBody)};

class Exchange {
 public:
  Exchange(GuestLeg& guest, const UpstreamDecision& connection, InterceptContext& ctx, const Watchdog& dog)
      : guest_(guest), conn_(connection), ctx_(ctx), dog_(dog) {}

  awaitable<void> run() {
    // g++ 12 miscompiles co_await in an if condition, and destroys
    // temporaries with destructors in a co_await expression twice: this
    // file awaits only named values.
    bool more = true;
    while (more) more = co_await next_request();
  }

  // At a request boundary (the exchange ended normally): an open upstream
  // has read its last response whole and carries nothing else; kept for
  // the next guest connection of the same session, host and identity.
  void release_upstream() {
    if (!upstream_.open()) return;
    if (!ctx_.upstreams || !upstream_.leg->reusable() || upstream_.leg->shared()) {
      upstream_.reset();
      return;
    }
    IdleUpstream idle{std::move(upstream_.socket), std::move(upstream_.leg), upstream_.connected,
                      std::move(upstream_.slot)};
    ctx_.upstreams->give(key_for(upstream_.host, upstream_.identity), std::move(idle));
    upstream_.reset();
  }

 private:
  UpstreamKey key_for(const std::string& host, const std::string& identity) const {
    return UpstreamKey{conn_.session, host, identity, conn_.port, conn_.tls};
  }

  // One request and its response; false when the connection must end.
  awaitable<bool> next_request() {
    http::RequestHead req;
    const HeadIn in = co_await guest_.next_head(req);
    if (in.state == HeadIn::State::kEnd) co_return false;
    if (in.state == HeadIn::State::kTooSlow) {
      const Refusal r{408, "zeroness: request head took too long\n"};
      co_await refuse(r);
      co_return false;
    }
    const http::ParseResult& head = in.parse;
    const auto start = Clock::now();
    RequestSummary summary;
    summary.session = conn_.session;
    summary.host = conn_.host;
    if (head.state == http::ParseState::kError) {
      ctx_.counters.bad_requests++;
      const std::string error = "malformed request: " + head.error;
      const Refusal r{head.error_status, "zeroness: bad request (" + head.error + ")\n"};
      co_await refuse_reported(summary, start, error, r);
      co_return false;
    }
    // The head through the filter chain (filters/chain.cpp declares the
    // order); where a filter stops for I/O, it is done here and the chain
    // goes on from that filter.
    // The request wipes what it came to hold when it ends, however it ends.
    filters::Request request(req, guest_.input(), guest_.head_bytes(), summary);
    bool continued = false;  // "100 Continue" sent
    using Kind = filters::FilterResult::Kind;
    for (size_t at = 0;;) {
      filters::ChainStop stop = filters::head_chain().run(request, connection_, at);
      at = stop.at;
      if (stop.result.kind == Kind::kContinue) break;
      if (stop.result.kind == Kind::kNeedPreview) {
        std::string preview = co_await guest_.preview_body(req, 256, 100ms);
        request.body_preview = std::move(preview);
        continue;
      }
      if (stop.result.kind == Kind::kNeedBody) {
        if (req.expect_continue && !continued) {
          continued = true;
          co_await guest_.send_continue();
        }
        std::optional<std::string> bad, gone;
        try {
          const bool whole = co_await read_body_upto(req, request.body_limit, request.body);
          request.body_whole = whole;
        } catch (const BadRequestBody& e) {
          bad = e.what();
        } catch (const std::exception& e) {
          gone = e.what();
        }
        if (bad) {
          ctx_.counters.bad_requests++;
          const Refusal r{400, "zeroness: bad request (malformed body)\n"};
          co_await refuse_reported(summary, start, *bad, r);
          co_return false;
        }
        if (gone) {
          // The guest went or stalled inside its body: its cancel, nothing sent.
          ctx_.counters.guest_cancels++;
          summary.status = 499;
          summary.guest_cancelled = true;
          summary.error = *gone;
          report(summary, start);
          co_return false;
        }
        request.body_read = true;
        continue;
      }
      if (stop.result.kind == Kind::kHold) {
        HoldState held =
            co_await wait_for_approval(request.decision.hold_ticket, request.decision.hold_expires);
        if (guest_gone_) co_return false;  // nobody to answer: the ask ended cancelled
        request.hold = std::move(held);
        continue;
      }
      if (stop.result.kind == Kind::kServeLocally) {
        const bool go_on = co_await serve_locally(req);
        co_return go_on;
      }
      // Refused: the alarm first (a canary to a denied host is one too).
      if (stop.result.alarm) report_tripwire(*stop.result.alarm);
      if (request.decision.allow) {  // refused after the broker allowed it: where it was headed
        summary.host = request.decision.host;
        if (request.decision.rule) summary.identity = request.decision.rule->identity;
      }
      if (stop.result.audit_error.empty())
        co_await refuse(stop.result.refusal);
      else
        co_await refuse_reported(summary, start, stop.result.audit_error, stop.result.refusal);
      co_return false;
    }
    websocket_ = request.websocket;
    RequestDecision& decision = request.decision;
    summary.host = decision.host;
    if (decision.rule) summary.identity = decision.rule->identity;
    if (req.expect_continue && !continued) co_await guest_.send_continue();
    summary.bytes_from_guest = head.consumed;
    guest_.release_head();

    bool response_started = false;
    std::optional<Refusal> refused;
    std::optional<std::string> failure;
    guest_.forget();
    try {
      refused = co_await forward(request, summary, response_started);
    } catch (const BadRequestBody& e) {
      ctx_.counters.bad_requests++;
      upstream_.reset();
      summary.error = e.what();
      refused = Refusal{400, "zeroness: bad request (malformed body)\n"};
    } catch (const TripwireInBody& e) {
      // Never forwarded whole: the upstream's request stays incomplete.
      ctx_.counters.denied++;
      upstream_.reset();
      report_tripwire(filters::tripwire_alarm(request, connection_, e.labels, {"body"}));
      summary.error = "tripwire in body";
      refused = kTripwireRefusal;
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (refused) {
      summary.status = refused->status;
      report(summary, start);
      co_await refuse(*refused);
      co_return false;
    }
    if (failure) {
      // The guest's own reset, close or stalled read, or its HTTP/2 stream
      // cancelled (the exchange's cancellation): its cancel, answered to no
      // one, never counted as the upstream's failure.
      asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
      const bool cancelled = cancellation.cancelled() != asio::cancellation_type::none;
      if (guest_.failed() || cancelled) {
        ctx_.counters.guest_cancels++;
        upstream_.reset();
        if (!response_started) summary.status = 499;
        summary.forwarded = true;
        summary.guest_cancelled = true;
        summary.error = *failure;
        report(summary, start);
        co_return false;
      }
      // A guest with part of a response sees it end without a clean close.
      ctx_.counters.upstream_failures++;
      upstream_.reset();
      if (!response_started) summary.status = 502;
      summary.forwarded = true;
      summary.error = *failure;
      report(summary, start);
      if (!response_started) {
        const Refusal r{502, "zeroness: upstream failed\n"};
        co_await refuse(r);
      }
      co_return false;
    }
    ctx_.counters.allowed++;
    summary.forwarded = true;
    report(summary, start);
    if (close_after_) {
      co_await guest_.close();
      co_return false;
    }
    co_return true;
  }

  // A request on a local connection: its body read whole (bounded), handed
  // to the broker, and its answer written back. Nothing of it goes anywhere
  // else. false when the connection ends.
  awaitable<bool> serve_locally(const http::RequestHead& req) {
    ctx_.counters.requests++;
    if (req.framing == http::BodyFraming::kContentLength && req.content_length > kMaxLocalBody) {
      const Refusal r{413, "zeroness: request body too large\n"};
      co_await refuse(r);
      co_return false;
    }
    if (req.expect_continue) co_await guest_.send_continue();
    guest_.release_head();
    std::string body;
    std::optional<Refusal> refused;
    if (req.framing != http::BodyFraming::kNone) {
      bool ended = false, whole = false;
      try {
        whole = co_await read_body_upto(req, kMaxLocalBody, body);
      } catch (const BadRequestBody&) {
        refused = Refusal{400, "zeroness: bad request (malformed body)\n"};
      } catch (const std::exception&) {
        ended = true;  // the guest went, or stalled
      }
      if (ended) co_return false;
      if (!refused && !whole) refused = Refusal{413, "zeroness: request body too large\n"};
    }
    if (refused) {
      ctx_.counters.bad_requests++;
      co_await refuse(*refused);
      co_return false;
    }
    LocalRequest request{conn_.session, req.host, req.method, req.target, std::move(body)};
    LocalResponse answer = co_await ask_local(std::move(request));
    const bool close = !req.keep_alive;
    const ProxyAnswer local{answer.status, answer.content_type, std::move(answer.body), true};
    co_await guest_.answer(local, &req, close);
    co_return !close;
  }

  // The broker answers on its own threads; the answer is posted back here.
  awaitable<LocalResponse> ask_local(LocalRequest request) {
    auto executor = co_await asio::this_coro::executor;
    auto initiate = [this, executor, &request](auto handler) {
      auto shared = std::make_shared<decltype(handler)>(std::move(handler));
      ctx_.policy.serve_local(std::move(request), [shared, executor](LocalResponse r) {
        asio::post(executor, [shared, r = std::move(r)]() mutable { (*shared)(std::move(r)); });
      });
    };
    auto answer = asio::async_initiate<const asio::use_awaitable_t<>&, void(LocalResponse)>(
        std::move(initiate), use_awaitable);
    LocalResponse r = co_await std::move(answer);
    co_return r;
  }

  // Sleeps until the broker says the ticket was decided or the ticket
  // expires; no polling. The broker's wake posts a cancel of `signal` to
  // this loop; the state is read right before each wait, with no suspension
  // in between, so a decision is never missed. A guest that goes meanwhile
  // (its connection ends, its HTTP/2 stream is cancelled, the exchange is
  // torn down) cancels the ticket: every ask ends in one audited outcome and
  // no ticket outlives its request (guest_gone_ then).
  awaitable<HoldState> wait_for_approval(uint64_t ticket, Clock::time_point expires) {
    struct Unsettled {
      ProxyPolicy& policy;
      const std::string& session;
      uint64_t ticket;
      bool settled = false;
      ~Unsettled() {
        if (settled) return;
        try {
          policy.cancel_hold(session, ticket);
        } catch (const std::exception&) {
        }
      }
    } unsettled{ctx_.policy, conn_.session, ticket};
    auto cancel = [&] {
      unsettled.settled = true;
      guest_gone_ = true;
      return ctx_.policy.cancel_hold(conn_.session, ticket);
    };
    auto executor = co_await asio::this_coro::executor;
    auto signal = std::make_shared<asio::steady_timer>(executor);
    std::weak_ptr<asio::steady_timer> weak = signal;
    // Set with the cancel: a wake that lands while no wait is pending (the
    // guest's side just answered first) is still seen.
    auto woken = std::make_shared<bool>(false);
    ctx_.policy.watch_hold(ticket, [weak, woken, executor] {
      asio::post(executor, [weak, woken] {
        *woken = true;
        if (auto timer = weak.lock()) timer->cancel();
      });
    });
    // A connection's end is watched while held (the bytes the guest sends
    // meanwhile are kept for the exchange, up to a bound); an HTTP/2
    // stream's pipe ends with its request, and its cancel comes as the
    // exchange's cancellation.
    constexpr size_t kHeldBytes = 64 * 1024;
    bool watch_guest = guest_.watches_end();
    for (;;) {
      *woken = false;
      HoldState s = ctx_.policy.hold_state(conn_.session, ticket);
      if (s.outcome != HoldOutcome::kPending) {
        unsettled.settled = true;
        co_return s;
      }
      asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
      if (cancellation.cancelled() != asio::cancellation_type::none) co_return cancel();
      // Past the expiry the broker answers kExpired; a little slack so a
      // timer that fires on the very tick is not followed by a busy loop.
      signal->expires_at(std::max(expires, Clock::now() + 5ms));
      if (watch_guest) {
        using namespace asio::experimental::awaitable_operators;
        auto woke = co_await (signal->async_wait(asio::experimental::as_tuple(use_awaitable)) ||
                              guest_.wait_readable(std::chrono::hours(24)));
        if (woke.index() == 0) continue;
        if (std::get<1>(woke)) {
          // Readable: its end (or a failure) is the guest going; bytes are kept.
          const bool more = co_await guest_.read_ahead();
          if (!more) co_return cancel();
          watch_guest = guest_.held() < kHeldBytes;
          continue;
        }
        // Its readiness cannot be waited for (an error, a day gone): the
        // decision alone is waited for from here.
        watch_guest = false;
        if (*woken) continue;
      }
      co_await signal->async_wait(asio::experimental::as_tuple(use_awaitable));
    }
  }

  // Sends the request on (as the head chain left it: identity ready,
  // placeholders swapped, a body read whole screened) and relays the
  // response. A Refusal when the proxy answers instead (nothing of the
  // request reached an upstream).
  awaitable<std::optional<Refusal>> forward(filters::Request& request, RequestSummary& summary,
                                            bool& response_started) {
    const http::RequestHead& req = request.head;
    const RequestDecision& decision = request.decision;
    const std::optional<Injection>& injection = request.injection;
    // A body read whole goes framed by its length (it may have changed).
    if (request.body_whole) {
      http::RequestHead& framed = request.head_to_change();
      framed.framing = request.body.empty() ? http::BodyFraming::kNone : http::BodyFraming::kContentLength;
      framed.content_length = request.body.size();
    }
    const http::RequestHead* send_req = &request.send_head();
    const http::NormalisedTarget* send_target = &request.send_target();

    http::ResponseHead resp;
    // A reused upstream may have closed while idle: a request whose head
    // could not be written, or a bodiless one that got no answer, is retried
    // once on a fresh connection. The body is read from the guest only once,
    // so it goes with whichever attempt first delivered the head.
    bool body_sent = false;
    const std::string identity = injection && decision.rule ? decision.rule->identity : "";
    for (int attempt = 0;; ++attempt) {
      std::shared_ptr<H2UpstreamShares::Connecting> connecting;  // this exchange's connect, others wait for
      // Another host, or another identity than the connection last carried:
      // that connection goes back to the pool, this request gets its own.
      if (upstream_.open() && (upstream_.host != decision.host || upstream_.identity != identity))
        release_upstream();
      // A WebSocket takes a connection of its own that offered HTTP/1.1
      // only (a pooled or shared one may speak HTTP/2), and never gives it back.
      if (!upstream_.open() && attempt == 0 && !websocket_) {
        auto executor = co_await asio::this_coro::executor;
        const UpstreamKey key = key_for(decision.host, identity);
        // A new stream of an HTTP/2 connection open for the same key first,
        // then an idle connection.
        if (ctx_.h2_upstreams) {
          if (std::shared_ptr<H2UpstreamConnection> shared = ctx_.h2_upstreams->find(key, executor)) {
            upstream_.connected = shared->connected();
            upstream_.leg = std::make_unique<H2UpstreamLeg>(std::move(shared));
            upstream_.host = decision.host;
            ctx_.counters.upstream_reused++;
          }
        }
        std::optional<IdleUpstream> idle;
        if (!upstream_.open() && ctx_.upstreams) idle = ctx_.upstreams->take(key, executor);
        if (idle) {
          upstream_.socket = std::move(idle->socket);
          upstream_.leg = std::move(idle->leg);
          upstream_.connected = std::move(idle->connected);
          upstream_.slot = std::move(idle->slot);
          upstream_.host = decision.host;
          ctx_.counters.upstream_reused++;
        }
        // An upstream that may choose HTTP/2, being connected for this key
        // already: a stream of that connection, once it is up.
        if (!upstream_.open() && ctx_.h2_upstreams && ctx_.upstream_http2 && conn_.tls) {
          H2UpstreamShares::Join join = ctx_.h2_upstreams->join(key, executor);
          if (join.first) {
            connecting = std::move(join.connecting);
          } else {
            co_await wait_for_connect(*join.connecting);
            if (std::shared_ptr<H2UpstreamConnection> shared = ctx_.h2_upstreams->find(key, executor)) {
              upstream_.connected = shared->connected();
              upstream_.leg = std::make_unique<H2UpstreamLeg>(std::move(shared));
              upstream_.host = decision.host;
              ctx_.counters.upstream_reused++;
            }
          }
        }
      }
      const bool reused = upstream_.open();
      if (!reused) {
        std::optional<Refusal> refused;
        {
          // Whatever its outcome, the exchanges waiting for it look again.
          const ConnectTurn turn{ctx_.h2_upstreams, std::move(connecting)};
          refused = co_await connect_upstream(decision.host, identity, summary);
        }
        if (refused) co_return refused;
      }
      summary.upstream = upstream_.connected;
      upstream_.identity = identity;
      const OutgoingRequest out{*send_req,         *send_target,
                                decision.host,     injection ? &*injection : nullptr,
                                scrubber_.armed(), websocket_};
      bool sent = false;
      try {
        sent = co_await dog_.guard(upstream_.leg->send_head(out), ctx_.idle_timeout);
      } catch (const std::exception&) {
      }
      if (!sent) {
        upstream_.reset();
        if (reused && attempt == 0) continue;
        throw std::runtime_error("upstream write failed");
      }
      if (!body_sent) {
        body_sent = true;
        co_await forward_request_body(request, summary);
      }
      const bool got = co_await dog_.guard(upstream_.leg->response_head(resp), ctx_.idle_timeout);
      if (got) break;
      upstream_.reset();
      if (reused && attempt == 0 && send_req->framing == http::BodyFraming::kNone) continue;
      throw std::runtime_error("upstream closed before responding");
    }

    if (websocket_ && resp.status == 101) {
      co_await switch_to_websocket(req, resp, decision, summary, response_started);
      co_return std::nullopt;
    }
    // The response head's filters (filters/chain.cpp): a refusal is the
    // upstream's failure (502, nothing of the response passed on).
    filters::FilterResult rules = filters::response_chain().run(resp, connection_);
    if (rules.kind != filters::FilterResult::Kind::kContinue) throw std::runtime_error(rules.audit_error);
    // The head as the guest gets it: the upstream's fields forwarded, and
    // its names, values and reason phrase scrubbed (same-length replacement).
    {
      http::ResponseHead out = std::move(resp);
      out.headers = http::forwarded_response_fields(out);
      note_reflections(summary, scrub_head(scrubber_, out), true);
      resp = std::move(out);
    }
    summary.status = resp.status;
    // What goes to the guest is gathered and written when the exchange would
    // otherwise wait (for the upstream, or at the end): a small response is
    // one TLS record and one send, head and body together, not one each.
    // An upgrade the upstream answered as a request: the guest asked to
    // leave HTTP/1.1 on this connection, so it ends after the answer.
    close_after_ = guest_.response_head(resp, !req.keep_alive || websocket_);
    // Until any of it reached the guest, a failure still gets it a 502.
    response_started = guest_.response_started();
    const auto flush_to_guest = [&]() -> awaitable<void> {
      const size_t n = co_await guest_.flush();
      summary.bytes_to_guest += n;
      response_started = guest_.response_started();
    };
    if (resp.framing == http::BodyFraming::kNone) co_await flush_to_guest();
    if (resp.framing != http::BodyFraming::kNone) {
      // The decoded payload through the upstream data chain
      // (filters/chain.cpp), one stream whatever the upstream's chunk or
      // read boundaries.
      filters::DataChain body_chain = filters::upstream_data_chain(connection_, summary);
      const auto loop = co_await asio::this_coro::executor;
      LoopShare& share = LoopShare::of_current_loop(loop);
      std::exception_ptr failed;
      try {
        std::string piece, clean;
        for (;;) {
          piece.clear();
          clean.clear();
          const bool done = co_await dog_.guard(upstream_.leg->response_body(piece), ctx_.idle_timeout);
          // The session's turn at this loop (loop_share.h) before the chain's work.
          co_await share.take(conn_.session, piece.size());
          body_chain.run(piece, done, clean);
          guest_.response_data(clean);
          if (done) break;
          // Sent before the next read: a streamed response is not delayed
          // beyond the partial match held back.
          co_await flush_to_guest();
        }
        // The upstream's trailer fields (gRPC's status) go on, filtered,
        // scrubbed like a head (same-length replacement), where the guest's
        // framing can carry them.
        std::vector<http::Header> trailers = http::forwarded_trailer_fields(upstream_.leg->trailers());
        note_reflections(summary, scrub_fields(scrubber_, trailers), false);
        guest_.response_end(trailers);
        co_await flush_to_guest();
      } catch (...) {
        failed = std::current_exception();
      }
      body_chain.close();  // what it replaced, into the audit record, however it ended
      if (failed) std::rethrow_exception(failed);
    }
    if (!upstream_.leg->reusable() || websocket_) upstream_.reset();
    co_return std::nullopt;
  }

  // The upstream switched to WebSocket: its 101 checked against the guest's
  // key, passed on, and the frames relayed until either side ends. The
  // connection ends with it; its upstream is never reused.
  awaitable<void> switch_to_websocket(const http::RequestHead& req, const http::ResponseHead& resp,
                                      const RequestDecision& decision, RequestSummary& summary,
                                      bool& response_started) {
    const std::string* key = req.find("sec-websocket-key");
    const std::string why = websocket::response_error(resp, key ? *key : "");
    if (!why.empty()) throw std::runtime_error("upstream's WebSocket handshake: " + why);
    http::ResponseHead switched = resp;
    switched.headers = http::forwarded_response_fields(resp);
    note_reflections(summary, scrub_head(scrubber_, switched), true);
    response_started = true;
    summary.status = 101;
    close_after_ = true;
    std::string from_guest;
    ByteStream* tunnel = co_await guest_.open_tunnel(switched, from_guest);
    ctx_.counters.websockets++;
    std::string from_upstream;
    ByteStream* upstream = upstream_.leg->tunnel(from_upstream);
    if (upstream == nullptr) throw std::runtime_error("the upstream's connection cannot carry a WebSocket");
    WebSocketChains chains{filters::guest_data_chain(decision.substitutions, connection_),
                           filters::upstream_data_chain(connection_, summary)};
    WebSocketOutcome outcome = co_await relay_websocket(
        *tunnel, std::move(from_guest), *upstream, std::move(from_upstream), scrubber_, screen_,
        decision.substitutions, std::move(chains), ctx_.websocket, conn_.session);
    upstream_.reset();
    summary.bytes_from_guest += outcome.bytes_up;
    summary.bytes_to_guest += outcome.bytes_down;
    summary.messages_up = outcome.messages_up;
    summary.messages_down = outcome.messages_down;
    summary.websocket_end = outcome.end;
    note_reflections(summary, outcome.reflections, false);
    if (!outcome.tripwires.empty()) {
      ctx_.counters.denied++;
      report_tripwire(TripwireHit{conn_.session,
                                  decision.host,
                                  req.method,
                                  summary.path,
                                  std::move(outcome.tripwires),
                                  {"websocket"}});
    }
  }

  // Waits (up to the connect timeout) for another exchange's connect of the
  // same key to end.
  awaitable<void> wait_for_connect(H2UpstreamShares::Connecting& connecting) {
    auto wait = [&]() -> awaitable<void> {
      while (!connecting.finished) co_await wait_for_signal(connecting.signal);
    };
    try {
      co_await dog_.guard(wait(), ctx_.connect_timeout);
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::timed_out) throw;  // the exchange itself was cancelled
    }
  }

  // Connects (and for TLS, handshakes with) the first of the broker's
  // addresses that the guard still allows and that answers. A Refusal when
  // the broker or the guard refused them all (nothing left the proxy: an
  // egress:deny with the reason); throws when none could be connected (an
  // egress:error, summary.upstream_failed).
  awaitable<std::optional<Refusal>> connect_upstream(const std::string& host, const std::string& identity,
                                                     RequestSummary& summary) {
    const std::string session = conn_.session;
    // Resolution may block: on the session's share of the workers.
    auto resolve = [&] { return ctx_.policy.resolve_upstream(session, host); };
    std::optional<UpstreamAddresses> resolved = co_await offload(ctx_.pool, session, resolve);
    if (!resolved) {
      summary.error = "proxy workers busy";
      co_return Refusal{503, "zeroness: busy, try again\n"};
    }
    UpstreamAddresses& where = *resolved;
    if (where.addresses.empty()) {
      summary.error = where.reason;
      co_return Refusal{403, "zeroness: blocked by policy (" + where.reason + ")\n"};
    }
    // The socket's place in the session's cap (issue 32): its guest
    // connections and every upstream socket count. At the cap, the session's
    // own idle upstream connections give way first.
    SessionSockets::Slot slot;
    if (ctx_.sockets) {
      slot = ctx_.sockets->take(session);
      if (!slot.held() && ctx_.upstreams && ctx_.upstreams->drop_session(session) > 0)
        slot = ctx_.sockets->take(session);
      if (!slot.held()) {
        summary.error = "the session's connection cap";
        ctx_.counters.session_cap_refusals++;
        co_return Refusal{503, "zeroness: too many connections from this sandbox\n"};
      }
    }
    // Interception's step after the TCP connect: no Nagle, then the
    // upstream TLS handshake; a failure tries the next address.
    std::unique_ptr<UpstreamLeg> leg;
    std::unique_ptr<ByteStream> h2_transport;  // an upstream that chose HTTP/2
    auto handshake = [&](tcp::socket& socket, const std::string&) -> awaitable<std::optional<std::string>> {
      try {
        socket.set_option(tcp::no_delay(true));  // see the guest side: no Nagle stalls
        if (!conn_.tls) {
          leg = std::make_unique<H1UpstreamLeg>(std::make_unique<PlainStream>(socket), ctx_.limits);
          co_return std::nullopt;
        }
        SslPtr ssl(SSL_new(ctx_.upstream_tls));
        if (!ssl) throw std::runtime_error("SSL_new failed");
        prepare_upstream(ssl.get(), host);
        // HTTP/2 when the upstream prefers it (the request goes as a
        // stream, h2_upstream_leg.h); never for a WebSocket handshake.
        const bool offer_h2 = ctx_.upstream_http2 && !websocket_;
        if (offer_h2) offer_upstream_alpn(ssl.get());
        // Resumes the session this name and port last gave, if any.
        offer_kept_session(ssl.get(), host + ":" + std::to_string(conn_.port));
        SSL* raw = ssl.get();
        auto tls = std::make_unique<TlsStream>(socket, std::move(ssl), false);
        co_await dog_.guard(tls->handshake(), ctx_.connect_timeout);
        if (SSL_session_reused(raw) == 1) ctx_.counters.upstream_resumed++;
        if (offer_h2 && upstream_chose_h2(raw)) {
          ctx_.counters.upstream_h2++;
          h2_transport = std::move(tls);
          co_return std::nullopt;
        }
        leg = std::make_unique<H1UpstreamLeg>(std::move(tls), ctx_.limits);
        co_return std::nullopt;
      } catch (const std::exception& e) {
        leg.reset();
        h2_transport.reset();
        co_return std::string(e.what());
      }
    };
    UpstreamConnection up = co_await proxy::connect_upstream(where.addresses, conn_.port, ctx_.guard,
                                                             ctx_.connect_timeout, handshake);
    if (up.socket && h2_transport) {
      // A connection other exchanges of this key may take streams of.
      const std::chrono::milliseconds idle =
          ctx_.h2_upstreams ? ctx_.h2_upstreams->idle() : ctx_.idle_timeout;
      auto connection = std::make_shared<H2UpstreamConnection>(std::move(up.socket), std::move(h2_transport),
                                                               up.upstream, ctx_.idle_timeout, idle);
      connection->hold(std::move(slot));
      connection->start();
      if (ctx_.h2_upstreams) ctx_.h2_upstreams->add(key_for(host, identity), connection);
      upstream_.leg = std::make_unique<H2UpstreamLeg>(std::move(connection));
      upstream_.host = host;
      upstream_.connected = up.upstream;
      co_return std::nullopt;
    }
    if (up.socket) {
      upstream_.socket = std::move(up.socket);
      upstream_.slot = std::move(slot);
      upstream_.leg = std::move(leg);
      upstream_.host = host;
      upstream_.connected = up.upstream;
      co_return std::nullopt;
    }
    if (!up.attempted) {
      summary.error = up.refused;
      co_return Refusal{403, "zeroness: blocked by policy (" + up.refused + ")\n"};
    }
    summary.upstream_failed = true;
    throw std::runtime_error("upstream unreachable: " + up.last_error);
  }

  // Reads the guest's decoded body into `body` until it is complete (true)
  // or longer than `limit`; the rest is read later from where this stopped.
  // Throws BadRequestBody on a malformed body, another exception when the
  // guest ends or stalls inside it.
  awaitable<bool> read_body_upto(const http::RequestHead& req, size_t limit, std::string& body) {
    for (;;) {
      const bool done = co_await guest_.read_body(req, body);
      if (done) co_return true;
      if (body.size() > limit) co_return false;
    }
  }

  awaitable<void> forward_request_body(filters::Request& request, RequestSummary& summary) {
    const http::RequestHead& req = request.head;
    if (req.framing == http::BodyFraming::kNone) co_return;
    if (request.body_whole) {
      // Read, screened and swapped already; framed by its length.
      summary.bytes_from_guest += request.body.size();
      if (!request.body.empty())
        co_await dog_.guard(upstream_.leg->send_body(request.body, true), ctx_.idle_timeout);
      co_return;
    }
    // Streamed: through the guest data chain (filters/chain.cpp).
    filters::DataChain chain = filters::guest_data_chain(request.decision.substitutions, connection_);
    // What was read ahead (up to the bound) goes first, screened with the rest.
    std::string piece = std::move(request.body), clean;
    request.body.clear();
    const auto loop = co_await asio::this_coro::executor;
    LoopShare& share = LoopShare::of_current_loop(loop);
    for (;;) {
      // A malformed body (BadRequestBody): the upstream has part of a
      // request and must never see the rest as anything, so the connection goes.
      const bool done = co_await guest_.read_body(req, piece);
      co_await share.take(conn_.session, piece.size());
      if (!chain.empty()) {
        clean.clear();
        filters::DataResult r = chain.run(piece, done, clean);
        if (r.stopped()) throw TripwireInBody(std::move(r.tripwires));
        piece.swap(clean);
      }
      summary.bytes_from_guest += piece.size();
      if (!piece.empty() || done)
        co_await dog_.guard(upstream_.leg->send_body(piece, done), ctx_.idle_timeout);
      piece.clear();
      if (done) break;
    }
  }

  // Answers and ends the connection (nothing pipelined behind a refused
  // request is read as one).
  awaitable<void> refuse(const Refusal& refusal) {
    const ProxyAnswer a{refusal.status, "text/plain; charset=utf-8", refusal.body, false};
    co_await guest_.answer(a, nullptr, true);
  }

  // A request refused before the broker saw it (it audits the ones it
  // refuses): reported with the refusal's status and `error`, then answered.
  awaitable<void> refuse_reported(RequestSummary& summary, Clock::time_point start, const std::string& error,
                                  const Refusal& refusal) {
    summary.status = refusal.status;
    summary.error = error;
    report(summary, start);
    co_await refuse(refusal);
  }

  void note_reflections(RequestSummary& summary, const ScrubReport& r, bool head) {
    filters::note_reflections(summary, scrubber_, r, head);
  }

  void report_tripwire(const TripwireHit& hit) {
    try {
      ctx_.policy.on_tripwire(hit);
    } catch (const std::exception&) {
    }
  }

  // The broker posts the audit record to the audit's writer (never waits
  // on the disk), so it runs on this loop. Not a coroutine: an exchange
  // whose stream was cancelled (an HTTP/2 connection going away under a
  // WebSocket) still reports, where another co_await would throw.
  void report(RequestSummary& summary, Clock::time_point start) {
    summary.duration = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    try {
      ctx_.policy.on_request_done(summary);
    } catch (const std::exception&) {
    }
  }

  GuestLeg& guest_;
  const UpstreamDecision& conn_;
  InterceptContext& ctx_;
  const Watchdog& dog_;      // of the thread the exchange runs in
  bool guest_gone_ = false;  // the guest went while its request was held
  Upstream upstream_;
  bool close_after_ = false;
  bool websocket_ = false;  // the request being served is a WebSocket handshake
  // Armed at the first injection; wipes its patterns when the connection ends.
  SecretScrubber scrubber_;
  // The session's tripwires, armed at the connection's first request.
  RequestScreen screen_;
  // What the filters keep from request to request (after what it refers to).
  filters::Connection connection_{conn_, ctx_.policy, ctx_.counters, scrubber_, screen_};
};

}  // namespace

awaitable<void> serve_intercepted(ByteStream& guest, const UpstreamDecision& connection,
                                  InterceptContext& context, const Watchdog& dog) {
  H1GuestLeg leg(guest, context.limits, H1Timeouts{context.header_timeout, context.idle_timeout}, dog);
  co_await serve_exchange(leg, connection, context, dog);
}

awaitable<void> serve_exchange(GuestLeg& guest, const UpstreamDecision& connection, InterceptContext& context,
                               const Watchdog& dog) {
  auto exchange = std::make_unique<Exchange>(guest, connection, context, dog);
  try {
    co_await exchange->run();
    exchange->release_upstream();  // not after a throw: the upstream's state is unknown
  } catch (const std::exception&) {
  }
}

}  // namespace zn::proxy
