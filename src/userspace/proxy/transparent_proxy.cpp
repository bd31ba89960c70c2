#include "userspace/proxy/transparent_proxy.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "common/thread_name.h"
#include "userspace/net/asio_endpoint.h"
#include "userspace/proxy/byte_stream.h"
#include "userspace/tls/client_hello.h"
#include "userspace/proxy/h2_intercept.h"
#include "userspace/proxy/intercept.h"
#include "userspace/proxy/kernel_splice.h"
#include "userspace/proxy/offload.h"
#include "userspace/proxy/session_sockets.h"
#include "userspace/proxy/splice_relay.h"
#include "userspace/proxy/upstream_connector.h"
#include "userspace/proxy/watchdog.h"
#include "userspace/tls/leaf_certs.h"
#include "userspace/tls/contexts.h"
#include "userspace/net/transparent_socket.h"
#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
constexpr uint16_t kHttpsPort = 443;
// What a ClientHello read may take past its bound (records cut mid-way).
constexpr size_t kHelloChunk = 4096;
constexpr std::chrono::milliseconds kMinAcceptBackoff{10}, kMaxAcceptBackoff{1000};

sockaddr_storage local_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return ss;
}

sockaddr_storage peer_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return ss;
}

// A denied connection is reset, not closed politely: the guest learns nothing.
void reset(tcp::socket& s) {
  linger l{1, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  asio::error_code ignored;
  s.close(ignored);
}

}  // namespace

struct TransparentProxy::Impl {
  Impl(ProxyConfig c, ProxyPolicy& p)
      : config(std::move(c)),
        policy(p),
        mint_budget(config.mint_budget),
        upstreams(config.upstream_pool),
        h2_upstreams(config.upstream_pool.idle),
        sockets(std::make_shared<SessionSockets>(config.max_connections_per_guest)),
        session_resets(config.h2_session_resets),
        pool(config.workers, "zn-proxy-work") {}

  // Accepts on the first loop and hands
  // each connection to the loops in turn: the socket is accepted straight
  // onto the loop that serves it, which runs all of that connection's I/O.
  awaitable<void> accept_loop(tcp::acceptor& acceptor) {
    asio::steady_timer backoff(acceptor.get_executor());
    std::chrono::milliseconds delay = kMinAcceptBackoff;
    for (;;) {
      const asio::any_io_executor serving = loops[next_loop++ % loops.size()]->get_executor();
      auto [ec, socket] = co_await acceptor.async_accept(serving, as_tuple);
      if (ec) {
        if (ec == asio::error::operation_aborted) co_return;
        // EMFILE, ENFILE, ENOBUFS, ENOMEM: the pending connection stays in
        // the backlog and accept would fail again at once. Back off
        // (doubling, capped) instead of spinning the loop every other
        // connection needs; the backlog is served when resources return.
        counters.accept_errors++;
        backoff.expires_after(delay);
        co_await backoff.async_wait(as_tuple);
        delay = std::min(delay * 2, kMaxAcceptBackoff);
        continue;
      }
      delay = kMinAcceptBackoff;
      counters.accepted++;
      if (active >= config.max_connections) {
        counters.rejected_busy++;
        reset(socket);
        continue;
      }
      // The guest's session's place for this socket (its cap counts the
      // upstream sockets opened for it too).
      SessionSockets::Slot slot = sockets->take(tenant_at_accept(socket.native_handle()));
      if (!slot.held()) {
        counters.rejected_guest_cap++;
        reset(socket);
        continue;
      }
      // The connection's thread, with the watchdog its deadlines use.
      Watchdog dog(serving);
      dog.spawn(serving, handle(std::move(socket), std::move(slot), dog));
    }
  }

  // Whose cap a guest connection counts against: its session; an address
  // no session holds (reset by the decision anyway) by its address.
  std::string tenant_at_accept(int fd) const {
    const sockaddr_storage peer = peer_of(fd);
    std::string tenant = policy.tenant_of(peer);
    if (!tenant.empty()) return tenant;
    const std::string text = net::endpoint_text(peer);
    return "address " + text.substr(0, text.rfind(':'));
  }

  // `slot`: the guest connection's place in its session's cap, held until
  // the connection ends; whose it is (tenant_at_accept) is also whose share
  // of the workers its decision takes.
  awaitable<void> handle(tcp::socket guest, SessionSockets::Slot slot, Watchdog dog) {
    active++;
    struct Done {
      Impl& impl;
      ~Done() { impl.active--; }
    } done{*this};
    const auto start = std::chrono::steady_clock::now();
    ConnectionFacts facts;
    facts.guest = peer_of(guest.native_handle());
    facts.original_dst = local_of(guest.native_handle());
    const uint16_t dport = net::endpoint_port(facts.original_dst);

    std::vector<uint8_t> first_bytes;
    if (dport == kHttpsPort) {
      // The ClientHello, bounded in size and time, and peeked, not read: it
      // stays queued on the guest socket, so a passthrough relay carries it
      // on with the rest of the stream (the kernel's relays whole skbs, and
      // could not start inside one the proxy had read part of). An
      // interception reads it then.
      asio::steady_timer deadline(guest.get_executor(), config.hello_timeout);
      ClientHelloInfo hello;
      // Not zero-filled (20 KiB a connection): only what a peek wrote is read.
      constexpr size_t kPeekBytes = kMaxClientHelloBytes + kHelloChunk;
      const std::unique_ptr<uint8_t[]> peeked(new uint8_t[kPeekBytes]);
      bool raised_lowat = false;
      const int fd = guest.native_handle();
      while (hello.status == HelloStatus::kNeedMore) {
        auto r =
            co_await (guest.async_wait(tcp::socket::wait_read, as_tuple) || deadline.async_wait(as_tuple));
        if (r.index() == 1) {
          counters.timed_out++;
          reset(guest);
          co_return;
        }
        if (std::get<0>(std::get<0>(r))) co_return;
        const ssize_t n = ::recv(fd, peeked.get(), kPeekBytes, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0) co_return;
        if (static_cast<size_t>(n) == first_bytes.size()) {
          // Nothing new (a peek returns the same bytes again): the guest's
          // FIN or an error before a whole ClientHello, else a wake-up for
          // nothing.
          pollfd p{fd, POLLRDHUP, 0};
          if (::poll(&p, 1, 0) != 0) co_return;
          continue;
        }
        first_bytes.assign(peeked.get(), peeked.get() + n);
        hello = peek_client_hello(first_bytes);
        if (hello.status != HelloStatus::kNeedMore) break;
        if (static_cast<size_t>(n) == kPeekBytes) co_return;
        // The bytes peeked stay queued, so the socket would stay readable:
        // until more arrive, it is not (FIN and errors still wake it).
        const int more = static_cast<int>(n) + 1;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &more, sizeof(more));
        raised_lowat = true;
      }
      // A hello whole at the first peek (the usual case) never raised it.
      if (raised_lowat) {
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof(one));
      }
      facts.tls = hello.status == HelloStatus::kOk;
      facts.sni = hello.sni;
      facts.sni_is_ip_literal = hello.sni_is_ip_literal;
    }
    // Deciding may resolve names: that is off the loop, on the guest's
    // session's share of the workers; any other decision is made here,
    // without a trip to a worker and back (two thread wake-ups in every new
    // connection's wait for its ServerHello). Refused (the workers' queue
    // full, this session the one with the most waiting): the connection is
    // refused.
    std::optional<UpstreamDecision> decided = policy.decide_at_once(facts);
    if (!decided) {
      auto decide = [this, &facts] { return policy.decide(facts); };
      std::optional<UpstreamDecision> on_worker = co_await offload(pool, slot.session(), decide);
      decided = std::move(on_worker);
      if (decided) counters.decided_on_workers++;
    }
    if (!decided) {
      counters.workers_busy++;
      reset(guest);
      co_return;
    }
    UpstreamDecision& decision = *decided;
    ConnectionSummary summary{decision.session, decision.host};
    if (decision.mode == ConnectionMode::kIntercept) {
      // The peeked ClientHello is the TLS stream's first bytes: read it now.
      if (!first_bytes.empty() &&
          ::recv(guest.native_handle(), first_bytes.data(), first_bytes.size(), MSG_DONTWAIT | MSG_WAITALL) !=
              static_cast<ssize_t>(first_bytes.size())) {
        reset(guest);
        co_return;
      }
      co_await intercept(guest, decision, first_bytes, dog);
      co_return;
    }
    if (decision.mode != ConnectionMode::kPassthrough || decision.addresses.empty()) {
      counters.denied++;
      reset(guest);
      co_return;
    }
    // The upstream socket counts against the session's cap too.
    SessionSockets::Slot upstream_slot = sockets->take(decision.session);
    if (!upstream_slot.held()) {
      counters.rejected_guest_cap++;
      reset(guest);
      summary.end = "the session's connection cap";
      co_await report_closed(summary, start);
      co_return;
    }
    UpstreamConnection up =
        co_await connect_upstream(decision.addresses, decision.port, guard.get(), config.connect_timeout);
    if (!up.socket) {
      reset(guest);
      if (!up.attempted) {
        counters.denied++;
        summary.refused = up.refused;
        summary.end = "refused";
      } else {
        counters.upstream_failures++;
        summary.end = "upstream unreachable";
      }
      co_await report_closed(summary, start);
      co_return;
    }
    summary.upstream = up.upstream;
    tcp::socket& upstream = *up.socket;
    counters.allowed++;
    // The guest's first bytes (a peeked ClientHello) are still queued on its
    // socket: the relay carries them on first.
    bool idle_closed = false;
    KernelRelayResult relayed;
    if (kernel)
      relayed = co_await kernel->relay(guest, upstream, config.idle_timeout, &counters.kernel_spliced);
    if (relayed.relayed) {
      summary.bytes_from_guest = relayed.from_guest;
      summary.bytes_to_guest = relayed.to_guest;
      idle_closed = relayed.idle_closed;
    } else {
      // No kernel relay (not loaded, or this pair could not be inserted: a
      // socket already closing): splice(2) through the loop.
      guest.native_non_blocking(true);
      upstream.native_non_blocking(true);
      Activity activity;
      auto [up, down] = co_await (splice_one_way(guest, upstream, activity, config.idle_timeout) &&
                                  splice_one_way(upstream, guest, activity, config.idle_timeout));
      summary.bytes_from_guest = up;
      summary.bytes_to_guest = down;
      idle_closed = activity.idle_closed;
    }
    if (idle_closed) counters.idle_closed++;
    summary.end = idle_closed ? "idle timeout" : "closed";
    co_await report_closed(summary, start);
  }

  // The broker audits the connection, which may wait on the disk: on the
  // pool, never on this loop.
  awaitable<void> report_closed(ConnectionSummary& summary, std::chrono::steady_clock::time_point start) {
    summary.duration =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    // A record of what happened: never refused (must_run).
    auto record = [this, &summary] {
      policy.on_closed(summary);
      return true;
    };
    co_await offload(pool, summary.session, record, true);
  }

  awaitable<void> intercept(tcp::socket& guest, const UpstreamDecision& decision,
                            const std::vector<uint8_t>& hello, const Watchdog& dog) {
    if (!interception) {
      counters.denied++;
      reset(guest);
      co_return;
    }
    counters.intercepted++;
    // Heads and bodies go out as separate writes: without NODELAY, Nagle
    // holds the second until the guest's delayed ACK (40 ms per response).
    asio::error_code ignored;
    guest.set_option(tcp::no_delay(true), ignored);
    if (!decision.tls) {
      PlainStream plain(guest);
      co_await serve_intercepted(plain, decision, *interception, dog);
      co_return;
    }
    // A cached leaf is served on the loop; a miss is minted (an ECDSA
    // signature) on the pool, within the session's budget.
    std::shared_ptr<const LeafCert> leaf = leaves->cached(decision.host);
    if (!leaf) {
      if (!mint_budget.take(decision.session)) {
        counters.mint_refused++;
        reset(guest);
        co_return;
      }
      auto mint = [this, &decision]() -> std::shared_ptr<const LeafCert> {
        try {
          return leaves->leaf_for(decision.host, decision.session);
        } catch (const std::exception&) {
          return nullptr;  // an invalid name, or a CA that cannot sign
        }
      };
      std::optional<std::shared_ptr<const LeafCert>> minted = co_await offload(pool, decision.session, mint);
      if (minted) leaf = std::move(*minted);
    }
    if (!leaf) {
      counters.denied++;
      reset(guest);
      co_return;
    }
    SslPtr ssl(SSL_new(guest_tls.get()));
    if (!ssl) {
      reset(guest);
      co_return;
    }
    use_leaf(ssl.get(), *leaf, leaves->ca_cert());
    // A session resumes only on this sandbox's connections for this name
    // (without resumption there is nothing to bind: no digest per handshake).
    if (config.guest_tls_resumption) bind_guest_session(ssl.get(), decision.session, decision.host);
    TlsStream tls(guest, std::move(ssl), true,
                  std::string_view(reinterpret_cast<const char*>(hello.data()), hello.size()));
    try {
      co_await dog.guard(tls.handshake(), config.hello_timeout);
    } catch (const std::exception&) {
      // Typically a guest that does not trust the deployment CA.
      counters.tls_handshake_failures++;
      reset(guest);
      co_return;
    }
    // ALPN chose HTTP/2 (offered only with config.http2): each stream
    // goes through the same exchange as an HTTP/1.1 request would.
    const unsigned char* alpn = nullptr;
    unsigned alpn_length = 0;
    SSL_get0_alpn_selected(tls.ssl(), &alpn, &alpn_length);
    if (SSL_session_reused(tls.ssl())) {
      counters.tls_resumed++;
      // A TLS 1.2 abbreviated handshake ends with the guest's Finished and
      // nothing from zerod, so the kernel delays its ACK (~40 ms) while a
      // guest with Nagle on holds its request behind that ACK (measured:
      // 20 resumed connections/s against 230 full ones). Send it now.
      const int on = 1;
      (void)::setsockopt(guest.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
    }
    if (alpn_length == 2 && alpn[0] == 'h' && alpn[1] == '2')
      co_await serve_intercepted_h2(tls, decision, *interception, dog);
    else
      co_await serve_intercepted(tls, decision, *interception, dog);
  }

  ProxyConfig config;
  ProxyPolicy& policy;
  std::shared_ptr<const DestinationGuard> guard;
  std::unique_ptr<LeafCertAuthority> leaves;
  MintBudget mint_budget;
  UpstreamPool upstreams;  // cleared once the loops stop (its sockets are theirs)
  // Holds no connection: each lives in its loop's coroutines (destroyed with the loops).
  H2UpstreamShares h2_upstreams;
  SslCtxPtr guest_tls;
  std::optional<UpstreamTls> upstream_tls;
  InterceptCounters intercept_counters;
  std::unique_ptr<InterceptContext> interception;
  // Every session's sockets against its cap; shared with interception.
  std::shared_ptr<SessionSockets> sockets;
  TokenBuckets session_resets;  // HTTP/2 streams each session's guests reset
  // The passthrough relay in the kernel; null when configured off or when it
  // could not be loaded (the splice(2) path then).
  std::unique_ptr<KernelSplice> kernel;
  // Broker calls (decisions, resolution) and leaf minting run here, each
  // session on its share (offload.h).
  FairPool pool;
  // One io_context per thread: a connection lives on one loop, so its
  // coroutines need no strand. Declared after what their frames refer to:
  // destroyed (with any frames left) first.
  std::vector<std::unique_ptr<asio::io_context>> loops;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<std::thread> threads;
  size_t next_loop = 0;  // the accepting loop's
  std::atomic<bool> stopping{false};
  uint16_t port = 0;
  std::atomic<size_t> active{0};
  ProxyCounters counters;  // the loop increments, any thread reads
};

TransparentProxy::TransparentProxy(ProxyConfig config, ProxyPolicy& policy)
    : impl_(std::make_unique<Impl>(std::move(config), policy)) {
  const ProxyConfig& c = impl_->config;
  // Fail closed: without a configured guard, no allowance at all and this
  // namespace's own addresses.
  impl_->guard =
      c.guard ? c.guard
              : std::make_shared<DestinationGuard>(GuardConfig{}, std::make_shared<net::LocalAddresses>());
  if (!c.ca_cert_path.empty()) {
    impl_->leaves = c.ca_key ? std::make_unique<LeafCertAuthority>(c.ca_cert_path, c.ca_key.get())
                             : std::make_unique<LeafCertAuthority>(c.ca_cert_path, c.ca_key_path);
    impl_->guest_tls = make_guest_facing_ctx(c.http2);
    if (c.guest_tls_resumption) enable_guest_resumption(impl_->guest_tls.get(), c.guest_resumption);
    impl_->upstream_tls = make_upstream_ctx(c.upstream_ca_bundle);
    impl_->interception.reset(new InterceptContext{impl_->policy, impl_->pool, impl_->upstream_tls->get(),
                                                   http::HttpLimits{}, c.header_timeout, c.idle_timeout,
                                                   c.connect_timeout, impl_->intercept_counters});
    impl_->interception->guard = impl_->guard.get();
    impl_->interception->upstreams = &impl_->upstreams;
    impl_->interception->h2_upstreams = &impl_->h2_upstreams;
    impl_->interception->sockets = impl_->sockets.get();
    impl_->interception->session_resets = &impl_->session_resets;
    impl_->interception->websocket = c.websocket;
    impl_->interception->upstream_http2 = c.upstream_http2;
  }
  if (c.kernel_splice) {
    impl_->kernel = std::make_unique<KernelSplice>(c.max_connections);
    if (!impl_->kernel->available()) impl_->kernel.reset();  // it logged why
  }
  const unsigned n_loops = std::max(1u, c.io_threads ? c.io_threads : std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n_loops; ++i) {
    impl_->loops.push_back(std::make_unique<asio::io_context>(1));
    // Each loop's reactor (epoll, eventfd, timerfd) is made now, not by its
    // first connection: the proxy's own descriptors are fixed once it is up.
    asio::steady_timer make_reactor(*impl_->loops.back());
  }
  asio::io_context& accepting = *impl_->loops.front();
  // Every address on one port (port 0: the number the first bind picked).
  const uint16_t port = net::open_on_one_port(
      impl_->config.port,
      [&](uint16_t number) {
        for (const std::string& address : impl_->config.addresses) {
          sockaddr_storage addr = net::make_endpoint(address, number);
          int fd = net::open_transparent_listener(addr, SOCK_STREAM, 1024);
          number = net::bound_port(fd);  // the first bind fixes a picked port for the rest
          auto protocol = addr.ss_family == AF_INET ? tcp::v4() : tcp::v6();
          impl_->acceptors.push_back(std::make_unique<tcp::acceptor>(accepting, protocol, fd));
        }
        return number;
      },
      [&] { impl_->acceptors.clear(); });
  impl_->port = port;
  for (auto& acceptor : impl_->acceptors)
    asio::co_spawn(accepting, impl_->accept_loop(*acceptor), asio::detached);
  for (size_t i = 0; i < impl_->loops.size(); ++i) {
    asio::io_context* io = impl_->loops[i].get();
    impl_->threads.emplace_back([io, i] {
      set_thread_name("zn-proxy-" + std::to_string(i));
      // The loops other than the accepting one may have nothing to do yet.
      auto work = asio::make_work_guard(*io);
      io->run();
    });
  }
}

TransparentProxy::~TransparentProxy() {
  impl_->stopping = true;
  for (auto& loop : impl_->loops) loop->stop();
  for (auto& t : impl_->threads) t.join();
  impl_->pool.stop();
  impl_->upstreams.clear();
}

std::vector<int> TransparentProxy::listener_fds() const {
  std::vector<int> fds;
  for (const auto& acceptor : impl_->acceptors) fds.push_back(acceptor->native_handle());
  return fds;
}

uint16_t TransparentProxy::port() const { return impl_->port; }

ProxyCountersSnapshot TransparentProxy::counters() const { return impl_->counters.snapshot(); }

InterceptCountersSnapshot TransparentProxy::request_counters() const {
  return impl_->intercept_counters.snapshot();
}

}  // namespace zn::proxy
