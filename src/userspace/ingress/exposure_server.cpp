#include "userspace/ingress/exposure_server.h"

#include <sys/socket.h>

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <atomic>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include <spdlog/spdlog.h>

#include "userspace/http/message.h"
#include "userspace/http/rewrite.h"
#include "userspace/ingress/one_exchange.h"
#include "userspace/ingress/ticket_carrier.h"
#include "userspace/proxy/splice_relay.h"
#include "zn_abi.h"

namespace zn::ingress {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
constexpr auto as_tuple = asio::experimental::as_tuple(use_awaitable);
constexpr size_t kReadChunk = 4096;

// What a ticket port's client may send after its one request before the
// connection is cut (a client that pipelines a few requests still gets its
// first answer).
constexpr size_t kMaxDropped = 64 * 1024;

// Between the two directions of a ticket port's connection: whether the
// guest switched protocols (its answer's head is out), so the request's
// side relays what follows or drops it.
struct OneExchange {
  explicit OneExchange(asio::io_context& io) : signal(io, std::chrono::steady_clock::time_point::max()) {}
  void decide(bool switched_to) {
    if (decided) return;
    decided = true;
    switched = switched_to;
    signal.cancel();
  }
  bool decided = false, switched = false;
  asio::steady_timer signal;
  uint64_t dropped = 0;  // bytes the client sent after its request
};

// One client's connection and, once admitted, the one to the guest.
struct Connection {
  explicit Connection(tcp::socket c) : client(std::move(c)), guest(client.get_executor()) {}
  tcp::socket client, guest;
  // Cuts both ways at once (a closed listener, an expired binding): the
  // relays see the shutdown and end.
  // Pending waits (a head read, a connect) are cancelled too.
  void cut() {
    std::error_code ignored;
    for (tcp::socket* s : {&client, &guest}) {
      if (!s->is_open()) continue;
      s->shutdown(tcp::socket::shutdown_both, ignored);
      s->cancel(ignored);
    }
  }
};

struct Listener {
  Listener(asio::io_context& io, ExposureSpec s) : spec(std::move(s)), acceptor(io) {}
  ExposureSpec spec;
  tcp::acceptor acceptor;
  std::set<std::shared_ptr<Connection>> connections;  // the loop's
  bool closed = false;                                // the loop's
};

tcp::endpoint endpoint_of(const sockaddr_storage& ss) {
  tcp::endpoint ep;
  const size_t len = ss.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(ep.data(), &ss, len);
  ep.resize(len);
  return ep;
}

sockaddr_storage storage_of(const tcp::endpoint& ep) {
  sockaddr_storage ss{};
  std::memcpy(&ss, ep.data(), std::min<size_t>(ep.size(), sizeof(ss)));
  return ss;
}

// Reads more of `socket` into `buf` until `deadline`; 0 at its end or on
// timeout (`timed_out` says which).
awaitable<size_t> read_more(tcp::socket& socket, std::string& buf,
                            std::chrono::steady_clock::time_point deadline, bool& timed_out) {
  char chunk[kReadChunk];
  asio::steady_timer timer(socket.get_executor(), deadline);
  auto r = co_await (socket.async_read_some(asio::buffer(chunk), as_tuple) || timer.async_wait(as_tuple));
  if (r.index() == 1) {
    timed_out = true;
    co_return 0;
  }
  auto [ec, n] = std::get<0>(r);
  if (ec) co_return 0;
  buf.append(chunk, n);
  co_return n;
}

}  // namespace

struct ExposureServer::Impl {
  Impl(ExposureServerConfig c, IngressPolicy& p) : config(c), policy(p), work(io.get_executor()), ticker(io) {
    tick();
    thread = std::thread([this] { io.run(); });
  }

  // The policy's tick, once a second until the server stops.
  void tick() {
    ticker.expires_after(std::chrono::seconds(1));
    ticker.async_wait([this](std::error_code ec) {
      if (ec || stopping) return;
      policy.tick();
      tick();
    });
  }

  ExposureServerConfig config;
  IngressPolicy& policy;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::thread thread;
  std::mutex mu;  // listeners (the control plane's threads)
  std::map<std::pair<std::string, uint16_t>, std::shared_ptr<Listener>> listeners;
  std::atomic<size_t> live{0};
  asio::steady_timer ticker;  // the loop's
  bool stopping = false;      // the loop's

  // Runs `f` on the loop and waits for it.
  template <class F>
  void on_loop(F f) {
    std::promise<void> done;
    asio::post(io, [&] {
      f();
      done.set_value();
    });
    done.get_future().wait();
  }

  void shut(const std::shared_ptr<Listener>& l) {
    on_loop([&] {
      l->closed = true;
      std::error_code ignored;
      l->acceptor.close(ignored);
      for (const auto& c : l->connections) c->cut();
    });
  }

  awaitable<void> accept_loop(std::shared_ptr<Listener> l) {
    while (!l->closed) {
      auto [ec, socket] = co_await l->acceptor.async_accept(as_tuple);
      if (l->closed) break;
      if (ec) {
        if (ec == asio::error::operation_aborted) break;
        // Out of descriptors and the like: wait rather than spin.
        asio::steady_timer backoff(io, std::chrono::milliseconds(100));
        co_await backoff.async_wait(as_tuple);
        continue;
      }
      if (live.load() >= config.max_connections) {
        std::error_code ignored;
        socket.close(ignored);
        continue;
      }
      asio::co_spawn(io, serve(l, std::move(socket)), asio::detached);
    }
  }

  awaitable<void> serve(std::shared_ptr<Listener> l, tcp::socket socket) {
    auto conn = std::make_shared<Connection>(std::move(socket));
    l->connections.insert(conn);
    ++live;
    const auto start = std::chrono::steady_clock::now();
    ExposureSummary summary;
    summary.session = l->spec.session;
    summary.port = l->spec.port;
    try {
      summary.end = co_await serve_admitted(*l, conn, summary);
    } catch (const std::exception& e) {
      summary.end = e.what();
    }
    std::error_code ignored;
    conn->client.close(ignored);
    conn->guest.close(ignored);
    l->connections.erase(conn);
    --live;
    if (!summary.via.empty()) {
      summary.duration =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      policy.on_closed(summary);
    }
  }

  // Returns how the connection ended; summary.via is set once admitted.
  awaitable<std::string> serve_admitted(Listener& l, std::shared_ptr<Connection> conn,
                                        ExposureSummary& summary) {
    AdmitFacts facts;
    facts.session = l.spec.session;
    facts.port = l.spec.port;
    facts.mode = l.spec.mode;
    std::error_code ec;
    const tcp::endpoint peer = conn->client.remote_endpoint(ec);
    if (ec) co_return "closed";
    facts.client = storage_of(peer);
    summary.client = facts.client;

    // Ticket mode: the first request head, bounded in size and time.
    std::string first;
    http::RequestHead head;
    Admission admission;
    size_t consumed = 0;
    int error_status = 400;
    if (l.spec.mode == ExposureMode::kTicket) {
      const auto deadline = std::chrono::steady_clock::now() + config.head_timeout;
      for (;;) {
        const http::ParseResult r = http::parse_request_head(first, http::HttpLimits{}, head);
        if (r.state == http::ParseState::kDone) {
          consumed = r.consumed;
          admission = take_admission(head, l.spec.port);
          facts.error = admission.error;
          facts.ticket = admission.ticket;
          facts.binding = admission.binding;
          break;
        }
        if (r.state == http::ParseState::kError) {
          facts.error = r.error;
          error_status = r.error_status;
          break;
        }
        bool timed_out = false;
        if (co_await read_more(conn->client, first, deadline, timed_out) == 0) {
          if (!timed_out && first.empty()) co_return "closed";  // connected and left: nothing asked
          facts.error = timed_out ? "request head timeout" : "closed mid-head";
          error_status = timed_out ? 408 : 400;
          break;
        }
      }
    }

    const AdmitDecision d = policy.admit(facts);
    if (!d.allow) {
      const int status = facts.error.empty() || d.status == 429 ? d.status : error_status;
      co_await asio::async_write(
          conn->client, asio::buffer(http::proxy_response(status, d.reason + "\n", d.retry_after)), as_tuple);
      co_return "refused";
    }
    summary.via = d.via;

    // The guest: from the gateway's address, with the one mark its TAP lets in.
    const tcp::endpoint guest = endpoint_of(d.guest);
    conn->guest.open(guest.protocol());
    const int mark = ZN_MARK_EXPOSE;
    if (::setsockopt(conn->guest.native_handle(), SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) != 0)
      throw std::system_error(errno, std::generic_category(), "SO_MARK");
    conn->guest.bind(endpoint_of(d.source));
    {
      asio::steady_timer timer(io, config.connect_timeout);
      auto r = co_await (conn->guest.async_connect(guest, as_tuple) || timer.async_wait(as_tuple));
      if (r.index() == 1 || std::get<0>(std::get<0>(r))) {
        co_await asio::async_write(
            conn->client, asio::buffer(http::proxy_response(502, "the guest's port does not answer\n")),
            as_tuple);
        co_return "guest unreachable";
      }
    }

    // A binding expires with the connection it admitted: cut both ways then.
    std::shared_ptr<asio::steady_timer> until;
    auto expired = std::make_shared<bool>(false);
    if (d.until != std::chrono::steady_clock::time_point{}) {
      until = std::make_shared<asio::steady_timer>(io, d.until);
      until->async_wait([conn, expired](std::error_code e) {
        if (e) return;
        *expired = true;
        conn->cut();
      });
    }
    proxy::Activity activity;
    uint64_t up = 0, down = 0;
    if (l.spec.mode == ExposureMode::kTicket) {
      // One request, its answer, and nothing else (one_exchange.h).
      OneExchange exchange(io);
      std::tie(up, down) = co_await (
          relay_request(*conn, activity, head, admission.forwarded_head, first.substr(consumed), exchange) &&
          relay_response(*conn, activity, d, l.spec.port, head, exchange));
      summary.bytes_dropped = exchange.dropped;
    } else {
      std::tie(up, down) =
          co_await (proxy::splice_one_way(conn->client, conn->guest, activity, config.idle_timeout) &&
                    proxy::splice_one_way(conn->guest, conn->client, activity, config.idle_timeout));
    }
    if (until) until->cancel();
    summary.bytes_from_client += up;
    summary.bytes_to_client += down;
    co_return *expired ? "binding expired" : activity.idle_closed ? "idle" : "closed";
  }

  // The request that admitted the connection, client -> guest: its head
  // (carriers taken out, "Connection: close"), its body by its own framing,
  // then nothing: what the client sends after it (a second request, kept
  // alive or pipelined) is read and dropped, never forwarded. An Upgrade the
  // guest switched to is relayed as it comes.
  awaitable<uint64_t> relay_request(Connection& conn, proxy::Activity& activity,
                                    const http::RequestHead& head, const std::string& forwarded_head,
                                    std::string rest, OneExchange& exchange) {
    uint64_t total = 0;
    RequestBodyRelay body(head, http::HttpLimits{});
    std::string out = rewrite_head(forwarded_head, "", head.upgrade ? "upgrade" : "close");
    for (;;) {
      RequestBodyRelay::Step step = body.feed(rest);
      rest.erase(0, step.consumed);
      if (step.error) {
        conn.cut();  // the guest has part of a request: it never sees the rest as anything
        co_return total;
      }
      out += step.out;
      if (!out.empty()) {
        auto [ec, n] = co_await asio::async_write(conn.guest, asio::buffer(out), as_tuple);
        if (ec) {
          conn.cut();
          co_return total;
        }
        total += n;
        out.clear();
        activity.last = std::chrono::steady_clock::now();
      }
      if (step.done) break;
      bool timed_out = false;
      if (co_await read_more(conn.client, rest, std::chrono::steady_clock::now() + config.idle_timeout,
                             timed_out) == 0) {
        conn.cut();  // the client went, or stalled, inside its body
        co_return total;
      }
      activity.last = std::chrono::steady_clock::now();
    }
    if (head.upgrade) {
      while (!exchange.decided) {
        auto woke = co_await exchange.signal.async_wait(as_tuple);
        (void)woke;
      }
      if (exchange.switched) {
        if (!rest.empty()) {
          auto [ec, n] = co_await asio::async_write(conn.guest, asio::buffer(rest), as_tuple);
          if (ec) {
            conn.cut();
            co_return total;
          }
          total += n;
        }
        total += co_await proxy::splice_one_way(conn.client, conn.guest, activity, config.idle_timeout);
        co_return total;
      }
    }
    // Read only to see the client's end (then the guest's side is
    // half-closed, as the relay would), bounded.
    exchange.dropped = rest.size();
    for (;;) {
      if (exchange.dropped > kMaxDropped) {
        conn.cut();
        break;
      }
      rest.clear();
      bool timed_out = false;
      const size_t n = co_await read_more(conn.client, rest, activity.last + config.idle_timeout, timed_out);
      if (timed_out) {
        if (std::chrono::steady_clock::now() < activity.last + config.idle_timeout) continue;
        conn.cut();  // neither way moved a byte for the idle timeout
        break;
      }
      if (n == 0) {
        std::error_code ignored;
        conn.guest.shutdown(tcp::socket::shutdown_send, ignored);
        break;
      }
      exchange.dropped += n;
    }
    co_return total;
  }

  // Guest -> client on a ticket port: the answer's head, with the binding
  // cookie a redeemed ticket left (1xx heads go on untouched before it) and
  // "Connection: close" (a 101 to an Upgrade keeps its own); then the rest
  // as it comes, never parsed.
  awaitable<uint64_t> relay_response(Connection& conn, proxy::Activity& activity, const AdmitDecision& d,
                                     uint16_t port, const http::RequestHead& request, OneExchange& exchange) {
    // However this ends, the request's side stops waiting for the answer.
    struct Decided {
      OneExchange& exchange;
      ~Decided() { exchange.decide(false); }
    } decided{exchange};
    std::string cookie;
    if (!d.set_binding.empty())
      cookie = "Set-Cookie: " + binding_cookie_name(port) + "=" + d.set_binding +
               "; Max-Age=" + std::to_string(d.binding_ttl.count()) +
               "; Path=/; HttpOnly; SameSite=Strict\r\n";
    uint64_t total = 0;
    std::string buf;
    for (;;) {
      http::ResponseHead response;
      const http::ParseResult r =
          http::parse_response_head(buf, http::HttpLimits{}, request.method == "HEAD", response);
      if (r.state == http::ParseState::kError) {
        conn.cut();  // no unparsed head goes to the client
        co_return total;
      }
      if (r.state == http::ParseState::kNeedMore) {
        bool timed_out = false;
        if (co_await read_more(conn.guest, buf, std::chrono::steady_clock::now() + config.idle_timeout,
                               timed_out) == 0) {
          conn.cut();
          co_return total;
        }
        activity.last = std::chrono::steady_clock::now();
        continue;
      }
      const bool switching = response.status == 101;
      if (switching && !request.upgrade) {
        conn.cut();  // a switch nobody asked for
        co_return total;
      }
      const std::string_view raw(buf.data(), r.consumed);
      std::string out;
      if (response.status >= 200 || switching)
        out = rewrite_head(raw, cookie, switching ? std::nullopt : std::optional<std::string_view>("close"));
      else
        out = raw;
      out += std::string_view(buf).substr(r.consumed);
      buf.clear();
      auto [ec, n] = co_await asio::async_write(conn.client, asio::buffer(out), as_tuple);
      if (ec) {
        conn.cut();
        co_return total;
      }
      total += n;
      if (response.status >= 200 || switching) {
        exchange.decide(switching);
        break;
      }
    }
    total += co_await proxy::splice_one_way(conn.guest, conn.client, activity, config.idle_timeout);
    co_return total;
  }
};

ExposureServer::ExposureServer(ExposureServerConfig config, IngressPolicy& policy)
    : impl_(std::make_unique<Impl>(config, policy)) {}

ExposureServer::~ExposureServer() {
  std::map<std::pair<std::string, uint16_t>, std::shared_ptr<Listener>> all;
  {
    std::lock_guard lock(impl_->mu);
    all.swap(impl_->listeners);
  }
  for (auto& [key, l] : all) impl_->shut(l);
  impl_->on_loop([this] {
    impl_->stopping = true;
    impl_->ticker.cancel();
  });
  impl_->work.reset();
  // Cut connections finish their coroutines; then the loop runs dry.
  impl_->thread.join();
}

uint16_t ExposureServer::open(const ExposureSpec& spec) {
  close(spec.session, spec.port);  // a new spec replaces the old (and may reuse its port)
  auto l = std::make_shared<Listener>(impl_->io, spec);
  const tcp::endpoint at(asio::ip::make_address(spec.listen_address), spec.listen_port);
  l->acceptor.open(at.protocol());
  l->acceptor.set_option(tcp::acceptor::reuse_address(true));
  l->acceptor.bind(at);
  l->acceptor.listen();
  const uint16_t bound = l->acceptor.local_endpoint().port();
  {
    std::lock_guard lock(impl_->mu);
    impl_->listeners[{spec.session, spec.port}] = l;
  }
  asio::co_spawn(impl_->io, impl_->accept_loop(l), asio::detached);
  return bound;
}

void ExposureServer::close(const std::string& session, uint16_t port) {
  std::shared_ptr<Listener> l;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->listeners.find({session, port});
    if (it == impl_->listeners.end()) return;
    l = std::move(it->second);
    impl_->listeners.erase(it);
  }
  impl_->shut(l);
}

void ExposureServer::close_session(const std::string& session) {
  std::vector<std::shared_ptr<Listener>> gone;
  {
    std::lock_guard lock(impl_->mu);
    for (auto it = impl_->listeners.begin(); it != impl_->listeners.end();) {
      if (it->first.first == session) {
        gone.push_back(std::move(it->second));
        it = impl_->listeners.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& l : gone) impl_->shut(l);
}

size_t ExposureServer::live_connections() const { return impl_->live.load(); }

}  // namespace zn::ingress
