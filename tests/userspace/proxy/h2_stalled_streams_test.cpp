// Issue 32, one guest cannot starve the others of the proxy's memory: HTTP/2
// guest connections whose streams never open their flow-control windows,
// through the whole interception (serve_intercepted_h2: the exchange per
// stream, each to a real TLS upstream on 127.0.0.1 serving large bodies),
// against real nghttp2 clients over loopback TCP. What a connection holds
// unsent is bounded by its budget (unsent_budget.h), read from the budget's
// own accounting once every stream's writer is held back, never after a
// sleep; nothing is dropped (opened, the windows bring every body whole and
// byte-exact); and a stream whose guest reads completes while its 31
// neighbours are stalled.
//
// Measured with an out-of-process upstream (8 x 32 streams of 2 MB bodies,
// glibc malloc): before the bound each stream held 272 KB unsent in a 512 KB
// allocation, 669 KB allocated per stream in all (175 MB); after it, 29 KB
// unsent, 183 KB per stream (48 MB), the rest being the stream's own
// upstream connection (TLS buffers, its leg's and the exchange's read
// buffers).
#include <gtest/gtest.h>

#include <asio.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "../h2/h2_peer.h"
#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "userspace/http/message.h"
#include "userspace/proxy/h2_intercept.h"
#include "userspace/tls/contexts.h"
#include "userspace/tls/leaf_certs.h"
#include "fake_policy.h"

namespace zn::proxy::stalled_test {
namespace {

using asio::awaitable;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr const char* kName = "bulk.example";
constexpr size_t kConnections = 8;
constexpr size_t kStreams = 32;       // the proxy's SETTINGS_MAX_CONCURRENT_STREAMS
constexpr size_t kBody = 512 * 1024;  // past the per-stream bound: a stalled stream's exchange waits

// Body byte `i` of the response numbered `seed`: every stream's differs, so
// a byte of another stream, or a byte lost or repeated, shows.
char body_byte(size_t seed, size_t i) { return static_cast<char>('a' + (i * 7 + seed * 13 + i / 4093) % 26); }

std::string body_of(size_t seed, size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = body_byte(seed, i);
  return out;
}

// ---- The upstream: HTTP/1.1 over TLS, GET /bytes/N/SEED --------------------

class BulkUpstream {
 public:
  BulkUpstream(asio::io_context& io, SSL_CTX* tls, const LeafCert& leaf, X509* ca)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        tls_(tls),
        leaf_(leaf),
        ca_(ca) {
    asio::co_spawn(acceptor_.get_executor(), accept(), asio::detached);
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void stop() {
    asio::error_code ignored;
    acceptor_.close(ignored);
    for (auto& s : sockets_) s->close(ignored);
  }

 private:
  awaitable<void> accept() {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(acceptor_.get_executor());
      auto [ec] = co_await acceptor_.async_accept(*socket, asio::experimental::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      sockets_.push_back(socket);
      asio::co_spawn(acceptor_.get_executor(), serve(socket), asio::detached);
    }
  }

  // Each body goes in pieces as the socket takes them: the upstream holds
  // one piece, and a proxy that stops reading stops it (TCP).
  awaitable<void> serve(std::shared_ptr<tcp::socket> socket) {
    try {
      SslPtr ssl(SSL_new(tls_));
      use_leaf(ssl.get(), leaf_, ca_);
      TlsStream stream(*socket, std::move(ssl), true);
      co_await stream.handshake();
      std::string in;
      char buf[4096];
      for (;;) {
        http::RequestHead head;
        http::ParseResult p;
        while ((p = http::parse_request_head(in, http::HttpLimits{}, head)).state ==
               http::ParseState::kNeedMore) {
          const size_t n = co_await stream.read_some(buf, sizeof buf);
          if (n == 0) co_return;
          in.append(buf, n);
        }
        if (p.state != http::ParseState::kDone) co_return;
        in.erase(0, p.consumed);
        // /bytes/N/SEED
        const std::string path = head.target.substr(std::string("/bytes/").size());
        const size_t n = std::stoul(path.substr(0, path.find('/')));
        const size_t seed = std::stoul(path.substr(path.find('/') + 1));
        co_await stream.write_all("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(n) + "\r\n\r\n");
        std::string piece;
        for (size_t at = 0; at < n; at += piece.size()) {
          piece.resize(std::min<size_t>(n - at, 16384));
          for (size_t i = 0; i < piece.size(); ++i) piece[i] = body_byte(seed, at + i);
          co_await stream.write_all(piece);
        }
      }
    } catch (const std::exception&) {
      // The proxy went away.
    }
  }

  tcp::acceptor acceptor_;
  SSL_CTX* tls_;
  const LeafCert& leaf_;
  X509* ca_;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
};

// ---- A guest: an nghttp2 client on a loopback connection to the proxy ------

struct Guest {
  // `window`: the initial window of every stream (SETTINGS_INITIAL_WINDOW_SIZE).
  Guest(asio::io_context& io, tcp::acceptor& proxy, uint32_t window)
      : socket(io), proxy_side(io), kick(io), peer(h2::test::NgPeer::Role::kClient), dog(io.get_executor()) {
    socket.connect(proxy.local_endpoint());
    proxy_side = proxy.accept();
    nghttp2_settings_entry e{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window};
    nghttp2_submit_settings(peer.session(), NGHTTP2_FLAG_NONE, &e, 1);
    // The connection's own window never holds a stream back.
    nghttp2_session_set_local_window_size(peer.session(), NGHTTP2_FLAG_NONE, 0, 64 << 20);
  }

  // Writes what the client has to send; reads and feeds what comes.
  awaitable<void> drive() {
    PlainStream s(socket);
    char buf[16384];
    try {
      for (;;) {
        const std::string out = peer.take_output();
        if (!out.empty()) co_await s.write_all(out);
        if (co_await wait_readable_or_signal(s, kick, 1h) != Woke::kReadable) continue;
        const size_t n = co_await s.read_some(buf, sizeof buf);
        if (n == 0) co_return;
        peer.feed(std::string(buf, n));
      }
    } catch (const std::exception&) {
      // Closed by the test.
    }
  }
  void wake() { kick.cancel(); }
  // Opens a stream's window wide: the guest reads it from now on.
  void open_window(int32_t id) {
    nghttp2_session_set_local_window_size(peer.session(), NGHTTP2_FLAG_NONE, id, 64 << 20);
    wake();
  }
  // The stream's whole body arrived, byte for byte (checked once).
  bool complete(int32_t id, size_t seed) {
    if (verified.count(id)) return true;
    const auto& s = peer.streams[id];
    if (!s.ended || s.body.size() != kBody || s.body != body_of(seed, kBody)) return false;
    verified.insert(id);
    return true;
  }

  tcp::socket socket, proxy_side;
  asio::steady_timer kick;
  h2::test::NgPeer peer;
  PlainStream proxy_stream{proxy_side};
  Watchdog dog;  // of the proxy's connection thread
  UnsentBudget budget;
  std::vector<int32_t> ids;  // its streams, in order
  std::set<int32_t> verified;
  bool served = false;  // the proxy's connection ended
  bool driven = false;  // drive() ended
};

class H2StalledStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = broker::ensure_deployment_ca(dir_.file("ca"), "stalled streams test CA");
    leaves_ = std::make_unique<LeafCertAuthority>(ca_.cert, ca_.key);
    leaf_ = leaves_->leaf_for(kName);
    upstream_ctx_ = make_guest_facing_ctx();
    client_tls_ = std::make_unique<UpstreamTls>(make_upstream_ctx(ca_.cert));
    GuardConfig g;
    g.allow = {*net::AddressPrefix::parse("127.0.0.1/32")};
    guard_ = std::make_unique<DestinationGuard>(g);
    ctx_.upstream_tls = client_tls_->get();
    ctx_.guard = guard_.get();
    upstream_ = std::make_unique<BulkUpstream>(io_, upstream_ctx_.get(), *leaf_, leaves_->ca_cert());
    conn_.mode = ConnectionMode::kIntercept;
    conn_.session = "s1";
    conn_.host = kName;
    conn_.tls = true;
    conn_.port = upstream_->port();
  }

  void TearDown() override {
    for (auto& g : guests_) {
      asio::error_code ignored;
      g->socket.close(ignored);
    }
    run_until([&] {
      for (auto& g : guests_)
        if (!g->served || !g->driven) return false;
      return true;
    });
    upstream_->stop();
    io_.run_for(100ms);
  }

  // A guest connection served by the proxy, with `streams` requests of
  // kBody each (seed: connection * 100 + stream).
  Guest& connect(uint32_t window, size_t streams) {
    auto g = std::make_unique<Guest>(io_, proxy_, window);
    Guest& guest = *g;
    guest.dog.spawn(io_.get_executor(),
                    serve_intercepted_h2(guest.proxy_stream, conn_, ctx_, guest.dog, guest.budget),
                    [&guest](std::exception_ptr) { guest.served = true; });
    for (size_t i = 0; i < streams; ++i)
      guest.ids.push_back(guest.peer.request(
          {{":method", "GET"},
           {":scheme", "https"},
           {":authority", kName},
           {":path", "/bytes/" + std::to_string(kBody) + "/" + std::to_string(seed(guests_.size(), i))}}));
    asio::co_spawn(io_, guest.drive(), [&guest](std::exception_ptr) { guest.driven = true; });
    guests_.push_back(std::move(g));
    return guest;
  }
  static size_t seed(size_t connection, size_t stream) { return connection * 100 + stream; }

  // Runs the loop until `done` holds; the deadline only ends a hang.
  void run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (!done() && std::chrono::steady_clock::now() < deadline) io_.run_for(5ms);
    if (!done()) ADD_FAILURE() << "never happened";
  }
  // Every stream of `g` is held back: its exchange waits for room.
  static bool stalled(const Guest& g, size_t streams) { return g.budget.waiting() == streams; }
  bool all_complete(Guest& g, size_t connection) {
    for (size_t i = 0; i < g.ids.size(); ++i)
      if (!g.complete(g.ids[i], seed(connection, i))) return false;
    return true;
  }

  zn::test::TempDir dir_;
  broker::DeploymentCaPaths ca_;
  std::unique_ptr<LeafCertAuthority> leaves_;
  std::shared_ptr<const LeafCert> leaf_;
  SslCtxPtr upstream_ctx_;
  std::unique_ptr<UpstreamTls> client_tls_;
  std::unique_ptr<DestinationGuard> guard_;
  FakePolicy policy_;
  FairPool pool_{FairLimits{.slots = 2, .per_tenant = 2, .per_lane = 0, .queued = 1024}};
  InterceptCounters counters_;
  asio::io_context io_;  // the proxy's loop, its guests' and the upstream's
  // Its upstream TLS context and guard are set up with them (SetUp).
  InterceptContext ctx_{policy_, pool_, nullptr, http::HttpLimits{}, 30s, 60s, 30s, counters_, nullptr};
  tcp::acceptor proxy_{io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::unique_ptr<BulkUpstream> upstream_;
  UpstreamDecision conn_;
  std::vector<std::unique_ptr<Guest>> guests_;
};

// 8 connections x 32 streams whose windows stay shut: once every stream's
// exchange is held back, no connection held more than its bound (1 MiB);
// before it each held 256 KiB and a read per stream (8.5 MB). Nothing was
// dropped: the windows opened, every body arrives whole.
TEST_F(H2StalledStreamsTest, StalledStreamsHoldAtMostTheirConnectionsBound) {
  for (size_t c = 0; c < kConnections; ++c) connect(0, kStreams);
  run_until([&] {
    for (auto& g : guests_)
      if (!stalled(*g, kStreams)) return false;
    return true;
  });
  const UnsentBudget::Bounds bounds;
  size_t held = 0;
  for (auto& g : guests_) {
    EXPECT_LE(g->budget.peak(), bounds.connection);
    EXPECT_GT(g->budget.peak(), bounds.connection / 4) << "the streams hardly read their upstreams";
    held += g->budget.peak();
    for (int32_t id : g->ids) EXPECT_TRUE(g->peer.streams[id].body.empty()) << "a window was open";
  }
  std::printf(
      "8 x 32 stalled streams held %zu bytes unsent at most (%zu per stream; bound %zu per connection)\n",
      held, held / (kConnections * kStreams), bounds.connection);

  for (auto& g : guests_)
    for (int32_t id : g->ids) g->open_window(id);
  run_until([&] {
    for (size_t c = 0; c < guests_.size(); ++c)
      if (!all_complete(*guests_[c], c)) return false;
    return true;
  });
}

// The positive control: the same streams with their windows open from the
// start all complete, byte for byte.
TEST_F(H2StalledStreamsTest, OpenWindowsCompleteEveryStreamByteExact) {
  for (size_t c = 0; c < kConnections; ++c) connect(64 << 20, kStreams);
  run_until([&] {
    for (size_t c = 0; c < guests_.size(); ++c)
      if (!all_complete(*guests_[c], c)) return false;
    return true;
  });
  for (size_t c = 0; c < guests_.size(); ++c)
    for (size_t i = 0; i < kStreams; ++i)
      EXPECT_TRUE(guests_[c]->complete(guests_[c]->ids[i], seed(c, i))) << c << "/" << i;
}

// Fairness: the 32 streams of a connection stalled, holding what they may;
// the one whose guest then reads completes, while the 31 stay held back.
TEST_F(H2StalledStreamsTest, AStreamWhoseGuestReadsCompletesBesideStalledOnes) {
  Guest& g = connect(0, kStreams);
  run_until([&] { return stalled(g, kStreams); });
  std::printf("32 stalled streams held %zu bytes unsent\n", g.budget.peak());
  g.open_window(g.ids[0]);
  run_until([&] { return g.complete(g.ids[0], seed(0, 0)); });
  EXPECT_EQ(g.budget.waiting(), kStreams - 1);
  for (size_t i = 1; i < kStreams; ++i) EXPECT_TRUE(g.peer.streams[g.ids[i]].body.empty()) << i;
}

}  // namespace
}  // namespace zn::proxy::stalled_test
