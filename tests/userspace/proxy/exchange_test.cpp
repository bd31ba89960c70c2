// The per-request exchange of an intercepted connection (serve_intercepted)
// without root: the guest is a scripted in-memory ByteStream (reads split as
// the test says, down to a byte each), the broker a fake ProxyPolicy whose
// verdicts each test sets, and the upstream a real server on 127.0.0.1 (plain
// or TLS with a leaf of a CA made in a temp dir) that records every byte the
// proxy sent it. Every refusal has a positive control through the same
// exchange.
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <asio.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "broker/identity/deployment_ca.h"
#include "support/temp_dir.h"
#include "userspace/http/body.h"
#include "userspace/http/message.h"
#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/intercept.h"
#include "userspace/proxy/secret_scrubber.h"
#include "userspace/tls/contexts.h"
#include "userspace/tls/leaf_certs.h"
#include "fake_policy.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

constexpr const char* kHost = "api.example";
const std::string kExchangeSecret = "sk_live_exchange_test_4f9a8b7c6d";

// ---- The guest: scripted reads, recorded writes -----------------------------

class ScriptedGuest : public ByteStream {
 public:
  // Each entry is what one read returns (less if the reader asks for less);
  // after the last, the guest has closed (reads return 0).
  ScriptedGuest(asio::io_context& io, std::vector<std::string> reads)
      : socket_(io), reads_(std::move(reads)) {}

  awaitable<size_t> read_some(char* data, size_t size) override {
    if (next_ == reads_.size()) co_return 0;
    const std::string& r = reads_[next_];
    const size_t n = std::min(size, r.size() - offset_);
    std::memcpy(data, r.data() + offset_, n);
    offset_ += n;
    if (offset_ == r.size()) {
      ++next_;
      offset_ = 0;
    }
    co_return n;
  }
  awaitable<void> write_all(std::string_view data) override {
    written.append(data);
    co_return;
  }
  awaitable<void> close_write() override {
    closed_write = true;
    co_return;
  }
  tcp::socket& socket() override { return socket_; }
  // Whatever is scripted has arrived (the socket is never opened to wait on).
  bool has_buffered() const override { return next_ < reads_.size(); }
  // Past the script nothing arrives: a wait for more times out at once (a
  // held request's guest is not seen to go).
  awaitable<bool> wait_readable(std::chrono::steady_clock::duration) override { co_return has_buffered(); }

  std::string written;
  bool closed_write = false;

 private:
  tcp::socket socket_;  // never opened: the exchange does not touch it
  std::vector<std::string> reads_;
  size_t next_ = 0, offset_ = 0;
};

std::vector<std::string> one_byte_each(const std::string& bytes) {
  std::vector<std::string> out;
  for (char c : bytes) out.emplace_back(1, c);
  return out;
}

// ---- The broker: FakePolicy (fake_policy.h) ----------------------------------

RequestDecision refused(int status, const std::string& reason) {
  RequestDecision d;
  d.allow = false;
  d.status = status;
  d.reason = reason;
  return d;
}

Injection stripe_injection() {
  return Injection{"Authorization",
                   "Bearer " + kExchangeSecret,
                   {"Authorization", "Proxy-Authorization"},
                   {kExchangeSecret}};
}

// ---- The upstream: a real server on 127.0.0.1 --------------------------------

struct Received {
  std::string raw;  // every byte of the request as the proxy sent it
  http::RequestHead head;
  std::string body;  // decoded
};

class Upstream {
 public:
  using Respond = std::function<std::string(const Received&)>;

  Upstream(asio::io_context& io, SSL_CTX* tls_server, const LeafCert* leaf, X509* ca)
      : acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        tls_server_(tls_server),
        leaf_(leaf),
        ca_(ca) {}

  uint16_t port() const { return acceptor_.local_endpoint().port(); }
  void start(bool tls) {
    tls_ = tls;
    asio::co_spawn(acceptor_.get_executor(), serve(), asio::detached);
  }
  // Ends the accept loop (the port stays bound for the next start) and,
  // unless kept (a server holding keep-alive connections open), the
  // connections.
  void stop(bool close_connections = true) {
    asio::error_code ignored;
    acceptor_.cancel(ignored);
    if (!close_connections) return;
    for (auto& s : sockets_) s->close(ignored);
    sockets_.clear();
  }

  Respond respond = [](const Received&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  };
  std::vector<Received> received;
  int connections = 0;

 private:
  awaitable<void> serve() {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(acceptor_.get_executor());
      asio::error_code ec;
      co_await acceptor_.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      ++connections;
      sockets_.push_back(socket);
      asio::co_spawn(acceptor_.get_executor(), handle(socket), asio::detached);
    }
  }

  awaitable<void> handle(std::shared_ptr<tcp::socket> socket) {
    try {
      std::unique_ptr<ByteStream> stream;
      if (tls_) {
        SslPtr ssl(SSL_new(tls_server_));
        use_leaf(ssl.get(), *leaf_, ca_);
        auto t = std::make_unique<TlsStream>(*socket, std::move(ssl), true);
        co_await t->handshake();
        stream = std::move(t);
      } else {
        stream = std::make_unique<PlainStream>(*socket);
      }
      const http::HttpLimits limits;
      std::string in;
      char buf[4096];
      for (;;) {
        Received r;
        http::ParseResult p;
        for (;;) {
          p = http::parse_request_head(in, limits, r.head);
          if (p.state != http::ParseState::kNeedMore) break;
          const size_t n = co_await stream->read_some(buf, sizeof buf);
          if (n == 0) co_return;
          in.append(buf, n);
        }
        if (p.state == http::ParseState::kError) co_return;
        r.raw = in.substr(0, p.consumed);
        in.erase(0, p.consumed);
        http::BodyDecoder body(r.head.framing, r.head.content_length, limits);
        for (;;) {
          const http::BodyDecoder::Step step = body.feed(in, r.body);
          r.raw.append(in, 0, step.consumed);
          in.erase(0, step.consumed);
          if (step.error) co_return;
          if (step.done) break;
          const size_t n = co_await stream->read_some(buf, sizeof buf);
          if (n == 0) co_return;
          in.append(buf, n);
        }
        received.push_back(r);
        const std::string answer = respond(r);
        co_await stream->write_all(answer);
      }
    } catch (const std::exception&) {
      // The proxy went away: what it sent is recorded.
    }
  }

  tcp::acceptor acceptor_;
  SSL_CTX* tls_server_;
  const LeafCert* leaf_;
  X509* ca_;
  bool tls_ = false;
  std::vector<std::shared_ptr<tcp::socket>> sockets_;
};

// ---- One guest connection through the exchange --------------------------------

class ExchangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = broker::ensure_deployment_ca(dir_.file("ca"), "exchange test CA");
    leaves_ = std::make_unique<LeafCertAuthority>(ca_.cert, ca_.key);
    leaf_ = leaves_->leaf_for(kHost);
    server_ctx_ = make_guest_facing_ctx();
    client_tls_ = std::make_unique<UpstreamTls>(make_upstream_ctx(ca_.cert));
    // The loopback upstream is allowed explicitly, as zerod's upstream_allow would.
    GuardConfig g;
    g.allow = {*net::AddressPrefix::parse("127.0.0.1/32")};
    guard_ = std::make_unique<DestinationGuard>(g);
    reset();
  }

  // A fresh loop, broker and upstream (for a table's next row).
  void reset() {
    upstream_.reset();
    io_ = std::make_unique<asio::io_context>();
    policy_ = std::make_unique<FakePolicy>();
    upstream_ = std::make_unique<Upstream>(*io_, server_ctx_.get(), leaf_.get(), leaves_->ca_cert());
  }

  // Runs one guest connection to `kHost` (TLS terminated when `tls`) to its end.
  void run(ScriptedGuest& guest, bool tls) {
    InterceptContext ctx{*policy_, pool_, client_tls_->get(), http::HttpLimits{}, 2s,
                         2s,       2s,    counters_,          guard_.get()};
    ctx.upstreams = upstreams_;
    UpstreamDecision conn;
    conn.mode = ConnectionMode::kIntercept;
    conn.session = session_;
    conn.host = kHost;
    conn.tls = tls;
    conn.port = upstream_->port();
    upstream_->start(tls);
    bool done = false;
    auto work = asio::make_work_guard(*io_);
    Watchdog dog(io_->get_executor());
    dog.spawn(io_->get_executor(), serve_intercepted(guest, conn, ctx, dog), [&](std::exception_ptr) {
      done = true;
      upstream_->stop(!keep_upstream_connections_);
      work.reset();
      // Kept upstream connections keep the loop busy: done is done.
      if (keep_upstream_connections_) io_->stop();
    });
    io_->run_for(20s);  // a hang fails here rather than blocking the suite
    io_->restart();
    if (!done) {
      // Its coroutines go with their loop now, while what they refer to
      // (the guest, `conn`, `ctx`) still exists.
      ADD_FAILURE() << "the exchange did not end";
      upstream_->stop();
      upstream_.reset();
      io_.reset();
      reset();
    }
  }

  std::string fetch(const std::vector<std::string>& reads, bool tls = false) {
    ScriptedGuest guest(guest_io_, reads);
    run(guest, tls);
    return guest.written;
  }

  // Requests the upstream got, as their request lines.
  std::vector<std::string> request_lines() const {
    std::vector<std::string> out;
    for (const Received& r : upstream_->received) out.push_back(r.raw.substr(0, r.raw.find("\r\n")));
    return out;
  }

  static size_t count(const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
    return n;
  }

  zn::test::TempDir dir_;
  broker::DeploymentCaPaths ca_;
  std::unique_ptr<LeafCertAuthority> leaves_;
  std::shared_ptr<const LeafCert> leaf_;
  SslCtxPtr server_ctx_;
  std::unique_ptr<UpstreamTls> client_tls_;
  std::unique_ptr<DestinationGuard> guard_;
  asio::io_context guest_io_;             // never run: the scripted guests' unused sockets
  std::unique_ptr<asio::io_context> io_;  // the proxy's loop and the upstream's
  FairPool pool_{FairLimits{.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64}};
  std::unique_ptr<FakePolicy> policy_;
  InterceptCounters counters_;
  std::unique_ptr<Upstream> upstream_;  // after io_: its sockets go first
  // Set by a test (its own pool, destroyed before io_): pooled upstreams.
  UpstreamPool* upstreams_ = nullptr;
  std::string session_ = "s1";
  bool keep_upstream_connections_ = false;  // the upstream server keeps idle connections open
};

const std::string kGet = std::string("GET /v1/a HTTP/1.1\r\nHost: ") + kHost + "\r\n\r\n";

TEST_F(ExchangeTest, AnAllowedRequestIsRelayedWithTheIdentityInjected) {
  policy_->verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.rule = RuleRef{2, "stripe"};
    return d;
  };
  policy_->injection = stripe_injection();
  const std::string request = std::string("POST /v1/charges?x=1 HTTP/1.1\r\nHost: ") + kHost +
                              "\r\nAuthorization: Bearer guest-own-token\r\n"
                              "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                              "Content-Length: 10\r\n\r\namount=500";
  const std::string got = fetch({request}, /*tls=*/true);
  EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
  EXPECT_EQ(got.substr(got.size() - 4), "\r\nok") << got;
  // What the broker was asked: the SNI, the Host as sent, the normalised path.
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].sni, std::optional<std::string>(kHost));
  EXPECT_EQ(policy_->requests[0].host_header, kHost);
  EXPECT_EQ(policy_->requests[0].method, "POST");
  EXPECT_EQ(policy_->requests[0].path, "/v1/charges");
  EXPECT_EQ(policy_->requests[0].port, upstream_->port());
  EXPECT_EQ(policy_->injected, std::vector<std::string>{"stripe"});
  // What the upstream got: the identity, once, and none of the guest's credentials.
  ASSERT_EQ(upstream_->received.size(), 1u);
  const Received& r = upstream_->received[0];
  EXPECT_EQ(request_lines(), std::vector<std::string>{"POST /v1/charges?x=1 HTTP/1.1"});
  EXPECT_TRUE(r.head.find("Authorization") && *r.head.find("Authorization") == "Bearer " + kExchangeSecret);
  EXPECT_EQ(count(r.raw, "Authorization:"), 1u);
  EXPECT_EQ(r.raw.find("guest-own-token"), std::string::npos);
  EXPECT_EQ(r.raw.find("Proxy-Authorization"), std::string::npos);
  EXPECT_EQ(r.head.host, kHost);
  EXPECT_EQ(r.body, "amount=500");
  EXPECT_EQ(got.find(kExchangeSecret), std::string::npos);
  ASSERT_EQ(policy_->summaries.size(), 1u);
  const RequestSummary& s = policy_->summaries[0];
  EXPECT_TRUE(s.forwarded);
  EXPECT_EQ(s.status, 200);
  EXPECT_EQ(s.identity, "stripe");
  EXPECT_EQ(s.upstream, "127.0.0.1:" + std::to_string(upstream_->port()));
  EXPECT_EQ(s.path, "/v1/charges");
}

// A guest that opens a new connection per request gets the upstream
// connection the previous one left idle, but only for the same session,
// host and identity: another session's or identity's request never rides it.
TEST_F(ExchangeTest, AnIdleUpstreamServesTheNextGuestConnectionOfTheSameSessionAndIdentity) {
  UpstreamPool pool;
  upstreams_ = &pool;
  keep_upstream_connections_ = true;
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(pool.size(), 1u);
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(upstream_->connections, 1);
  EXPECT_EQ(counters_.upstream_reused.load(), 1u);
  session_ = "s2";
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(upstream_->connections, 2);
  session_ = "s1";
  policy_->verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.rule = RuleRef{2, "stripe"};
    return d;
  };
  policy_->injection = stripe_injection();
  const std::string with_identity = fetch({kGet}, /*tls=*/true);
  EXPECT_EQ(with_identity.substr(0, 15), "HTTP/1.1 200 OK") << with_identity;
  EXPECT_EQ(upstream_->connections, 3);  // s1's idle connection carried no identity
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(upstream_->connections, 3);  // the identity's own, reused
  EXPECT_EQ(counters_.upstream_reused.load(), 2u);
  ASSERT_EQ(upstream_->received.size(), 5u);
  EXPECT_EQ(upstream_->received[2].head.find("Authorization"), nullptr);
  pool.clear();
  upstreams_ = nullptr;
}

// A guest that closes its connection after each request (Connection: close,
// or HTTP/1.0) does not close the upstream's: the request goes upstream
// without the field, and the connection is kept for the next guest
// connection. The positive control: the guest's connection is still closed.
TEST_F(ExchangeTest, AGuestsConnectionCloseLeavesTheUpstreamConnectionReusable) {
  UpstreamPool pool;
  upstreams_ = &pool;
  keep_upstream_connections_ = true;
  const std::string close_get =
      std::string("GET /v1/a HTTP/1.1\r\nHost: ") + kHost + "\r\nConnection: close\r\n\r\n";
  const std::string http10_get = std::string("GET /v1/a HTTP/1.0\r\nHost: ") + kHost + "\r\n\r\n";
  for (const std::string& req : {close_get, http10_get, close_get}) {
    const std::string got = fetch({req}, /*tls=*/true);
    EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
    EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  }
  EXPECT_EQ(upstream_->connections, 1);
  EXPECT_EQ(counters_.upstream_reused.load(), 2u);
  ASSERT_EQ(upstream_->received.size(), 3u);
  for (const Received& r : upstream_->received) {
    EXPECT_EQ(r.raw.find("Connection: close"), std::string::npos) << r.raw;
    EXPECT_EQ(r.raw.find("HTTP/1.0"), std::string::npos) << r.raw;
  }
  pool.clear();
  upstreams_ = nullptr;
}

// The upstream closed its idle connections (here: all of them, after each
// exchange): the pool hands out none of them, and each request connects anew.
TEST_F(ExchangeTest, AnUpstreamConnectionClosedWhileIdleIsNotReused) {
  UpstreamPool pool;
  upstreams_ = &pool;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK") << i;
  EXPECT_EQ(upstream_->connections, 3);
  EXPECT_EQ(counters_.upstream_reused.load(), 0u);
  pool.clear();
  upstreams_ = nullptr;
}

// A new upstream connection to a name and port resumes the TLS session the
// last one was given (here: the upstream issues TLS 1.3 tickets), although
// that connection ended without a TLS shutdown; an upstream that issues
// none gets full handshakes (the positive control: 0, then 1 once tickets
// are on).
TEST_F(ExchangeTest, ANewUpstreamConnectionResumesTheLastTlsSession) {
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(counters_.upstream_resumed.load(), 0u);  // no tickets from this upstream
  SSL_CTX_clear_options(server_ctx_.get(), SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(server_ctx_.get(), 2);
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");  // given tickets
  EXPECT_EQ(counters_.upstream_resumed.load(), 0u);
  EXPECT_EQ(fetch({kGet}, /*tls=*/true).substr(0, 15), "HTTP/1.1 200 OK");
  EXPECT_EQ(counters_.upstream_resumed.load(), 1u);
  EXPECT_EQ(upstream_->connections, 4);  // not pooled: a handshake each, the last one resumed
}

// The broker answers with the verdict, the identity and (on the connection's
// first request) the secrets to scrub together: no second trip for them.
TEST_F(ExchangeTest, TheIdentityAndTheSecretsComeWithTheVerdict) {
  policy_->verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.rule = RuleRef{2, "stripe"};
    d.injection = stripe_injection();
    if (f.want_session_secrets) d.session_secrets = {{"stripe", kExchangeSecret}};
    return d;
  };
  policy_->injection = std::nullopt;  // a second trip would find no identity: 403
  policy_->secrets = {};              // only what the verdict itself carries
  upstream_->respond = [](const Received&) {
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: ") + std::to_string(kExchangeSecret.size()) +
           "\r\n\r\n" + kExchangeSecret;
  };
  const std::string got = fetch({kGet + kGet}, /*tls=*/true);
  EXPECT_EQ(count(got, "HTTP/1.1 200 OK"), 2u) << got;
  EXPECT_TRUE(policy_->injected.empty());
  ASSERT_EQ(policy_->requests.size(), 2u);
  EXPECT_TRUE(policy_->requests[0].want_session_secrets);
  EXPECT_FALSE(policy_->requests[1].want_session_secrets);  // loaded once per connection
  ASSERT_EQ(upstream_->received.size(), 2u);
  for (const Received& r : upstream_->received)
    EXPECT_TRUE(r.head.find("Authorization") && *r.head.find("Authorization") == "Bearer " + kExchangeSecret);
  EXPECT_EQ(got.find(kExchangeSecret), std::string::npos) << got;  // scrubbed with the secrets given
}

TEST_F(ExchangeTest, CleartextTellsTheBrokerThereIsNoSni) {
  const std::string got = fetch({kGet}, /*tls=*/false);
  EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].sni, std::nullopt);  // the broker's "identity is never sent over cleartext"
  EXPECT_TRUE(policy_->injected.empty());             // a rule without identity: nothing fetched
  ASSERT_EQ(upstream_->received.size(), 1u);
  EXPECT_EQ(upstream_->received[0].head.find("Authorization"), nullptr);
}

struct RefusalRow {
  const char* name;
  std::optional<RequestDecision> verdict;  // unset: the default (allowed)
  std::string status_line;
  std::string body;
};

TEST_F(ExchangeTest, ARefusedRequestIsAnsweredByTheProxyAndNothingReachesTheUpstream) {
  const std::vector<RefusalRow> rows = {
      {"allowed (control)", std::nullopt, "HTTP/1.1 200 OK", "ok"},
      {"denied", refused(403, "default deny"), "HTTP/1.1 403 Forbidden",
       "zeroness: blocked by policy (default deny)\n"},
      {"misdirected", refused(421, "Host does not match SNI"), "HTTP/1.1 421 Misdirected Request",
       "zeroness: blocked by policy (Host does not match SNI)\n"},
      {"rate limited", refused(429, "session rate exceeded"), "HTTP/1.1 429 Too Many Requests",
       "zeroness: rate limited (session rate exceeded)\n"},
  };
  for (const RefusalRow& row : rows) {
    SCOPED_TRACE(row.name);
    reset();
    if (row.verdict) policy_->verdict = [v = *row.verdict](const RequestFacts&) { return v; };
    ScriptedGuest guest(guest_io_, {kGet, kGet});  // a second request behind it
    run(guest, false);
    EXPECT_EQ(guest.written.substr(0, row.status_line.size()), row.status_line) << guest.written;
    EXPECT_EQ(guest.written.substr(guest.written.size() - row.body.size()), row.body) << guest.written;
    const bool allowed = !row.verdict;
    EXPECT_EQ(upstream_->connections, allowed ? 1 : 0);
    EXPECT_EQ(upstream_->received.size(), allowed ? 2u : 0u);
    EXPECT_EQ(policy_->resolved.size(), allowed ? 1u : 0u);  // not even resolved when refused
    // A refusal ends the connection: what was behind it is never a request.
    EXPECT_EQ(policy_->requests.size(), allowed ? 2u : 1u);
    EXPECT_EQ(count(guest.written, "HTTP/1.1 "), allowed ? 2u : 1u);
    EXPECT_EQ(guest.closed_write, !allowed);
  }
}

TEST_F(ExchangeTest, AHostOtherThanTheSniIsRefusedAndTheSniHostIsServed) {
  // The broker's rule (SessionProxyPolicy: Host must equal the SNI); the
  // exchange's part is to hand it the SNI and the Host as sent, and honour it.
  policy_->verdict = [](const RequestFacts& f) {
    if (f.sni && f.host_header != *f.sni) return refused(421, "Host does not match SNI");
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    return d;
  };
  const std::string fronted = fetch({"GET /v1/a HTTP/1.1\r\nHost: other.example\r\n\r\n"}, /*tls=*/true);
  EXPECT_EQ(fronted.substr(0, 12), "HTTP/1.1 421") << fronted;
  EXPECT_EQ(upstream_->connections, 0);
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].sni, std::optional<std::string>(kHost));
  EXPECT_EQ(policy_->requests[0].host_header, "other.example");

  const std::string same = fetch({kGet}, /*tls=*/true);
  EXPECT_EQ(same.substr(0, 15), "HTTP/1.1 200 OK") << same;
  EXPECT_EQ(upstream_->connections, 1);
  EXPECT_EQ(request_lines(), std::vector<std::string>{"GET /v1/a HTTP/1.1"});
}

TEST_F(ExchangeTest, SmugglingShapesAreRefusedBeforeAnyByteGoesUpstream) {
  const std::string h = std::string("Host: ") + kHost + "\r\n";
  struct Case {
    const char* name;
    std::string bytes;
    const char* status;  // "200": the control
  };
  const std::vector<Case> cases = {
      {"CL+TE",
       "POST /v1/a HTTP/1.1\r\n" + h + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       "400"},
      {"TE+CL",
       "POST /v1/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
       "400"},
      {"two CLs", "POST /v1/a HTTP/1.1\r\n" + h + "Content-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
       "400"},
      {"CL list", "POST /v1/a HTTP/1.1\r\n" + h + "Content-Length: 4, 4\r\n\r\nabcd", "400"},
      {"TE unknown", "POST /v1/a HTTP/1.1\r\n" + h + "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", "501"},
      {"absolute form", std::string("GET https://other.example/v1/a HTTP/1.1\r\n") + h + "\r\n", "400"},
      {"CONNECT", std::string("CONNECT other.example:443 HTTP/1.1\r\n") + h + "\r\n", "400"},
      {"two Hosts", "GET /v1/a HTTP/1.1\r\n" + h + "Host: other.example\r\n\r\n", "400"},
      // A WebSocket handshake without its key is malformed; an upgrade to
      // anything but WebSocket is refused as such.
      {"websocket upgrade without a key",
       "GET /v1/a HTTP/1.1\r\n" + h + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "400"},
      {"h2c upgrade", "GET /v1/a HTTP/1.1\r\n" + h + "Connection: Upgrade\r\nUpgrade: h2c\r\n\r\n", "403"},
      {"upgrade without Upgrade", "GET /v1/a HTTP/1.1\r\n" + h + "Connection: Upgrade\r\n\r\n", "403"},
      {"single CL (control)", "POST /v1/a HTTP/1.1\r\n" + h + "Content-Length: 4\r\n\r\nabcd", "200"},
      {"chunked (control)",
       "POST /v1/a HTTP/1.1\r\n" + h + "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n", "200"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    reset();
    const std::string got = fetch({c.bytes});
    EXPECT_EQ(got.substr(0, 12), std::string("HTTP/1.1 ") + c.status) << got;
    if (std::string(c.status) == "200") {
      ASSERT_EQ(upstream_->received.size(), 1u);
      EXPECT_EQ(upstream_->received[0].body, "abcd");
      continue;
    }
    EXPECT_EQ(count(got, "\r\nServer: zeroness\r\n"), 1u) << got;  // one answer, ours
    EXPECT_EQ(upstream_->connections, 0);
    EXPECT_TRUE(policy_->requests.empty());    // refused before any verdict
    ASSERT_EQ(policy_->summaries.size(), 1u);  // and reported as such
    EXPECT_FALSE(policy_->summaries[0].forwarded);
  }
}

TEST_F(ExchangeTest, ARequestSplitIntoSingleBytesIsTheSameRequest) {
  const std::string request = std::string("POST /v1/%61b HTTP/1.1\r\nHost: ") + kHost +
                              "\r\nTransfer-Encoding: chunked\r\nX-Trace: 1\r\n\r\n"
                              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  const std::string whole = fetch({request});
  ASSERT_EQ(upstream_->received.size(), 1u);
  const Received sent_whole = upstream_->received[0];

  reset();
  const std::string split = fetch(one_byte_each(request));
  ASSERT_EQ(upstream_->received.size(), 1u);
  // The same head; the body re-chunked as it arrived (framing is regenerated), the same payload.
  const std::string& raw = upstream_->received[0].raw;
  EXPECT_EQ(raw.substr(0, raw.find("\r\n\r\n")), sent_whole.raw.substr(0, sent_whole.raw.find("\r\n\r\n")));
  EXPECT_EQ(upstream_->received[0].body, "hello world");
  EXPECT_EQ(sent_whole.body, "hello world");
  EXPECT_EQ(split, whole);
  EXPECT_EQ(whole.substr(0, 15), "HTTP/1.1 200 OK");
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].path, "/v1/ab");  // decided on the normalised path, however it arrived
  // A request the broker refuses is refused however it arrives, too.
  reset();
  policy_->verdict = [](const RequestFacts&) { return refused(403, "path not allowed"); };
  EXPECT_EQ(fetch(one_byte_each(request)).substr(0, 12), "HTTP/1.1 403");
  EXPECT_EQ(upstream_->connections, 0);
}

TEST_F(ExchangeTest, PipelinedRequestsAreEachDecidedOnTheirOwn) {
  auto get = [](const std::string& path) {
    return "GET " + path + " HTTP/1.1\r\nHost: " + kHost + "\r\n\r\n";
  };
  struct Case {
    const char* name;
    std::vector<std::string> reads;
    std::vector<std::string> statuses;  // answered, in order
    std::vector<std::string> upstream;  // request lines that reached it
    size_t decisions;
  };
  const std::vector<Case> cases = {
      {"both allowed",
       {get("/one") + get("/two")},
       {"200", "200"},
       {"GET /one HTTP/1.1", "GET /two HTTP/1.1"},
       2},
      {"allowed then denied", {get("/one") + get("/admin")}, {"200", "403"}, {"GET /one HTTP/1.1"}, 2},
      {"denied then allowed", {get("/admin") + get("/smuggled")}, {"403"}, {}, 1},
      {"allowed then denied, split",
       one_byte_each(get("/one") + get("/admin")),
       {"200", "403"},
       {"GET /one HTTP/1.1"},
       2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    reset();
    policy_->verdict = [](const RequestFacts& f) {
      if (f.path == "/admin") return refused(403, "path not allowed");
      RequestDecision d;
      d.allow = true;
      d.host = f.host_header;
      return d;
    };
    const std::string got = fetch(c.reads);
    std::vector<std::string> statuses;
    for (size_t p = got.find("HTTP/1.1 "); p != std::string::npos; p = got.find("HTTP/1.1 ", p + 1))
      statuses.push_back(got.substr(p + 9, 3));
    EXPECT_EQ(statuses, c.statuses) << got;
    EXPECT_EQ(request_lines(), c.upstream);
    EXPECT_EQ(policy_->requests.size(), c.decisions);
    EXPECT_LE(upstream_->connections, 1);  // kept alive across the allowed ones
  }
}

// What the broker is given to show an operator: header names, lowercase and
// in order, and the first bytes of the decoded body even when the body came
// in a later read than the head.
TEST_F(ExchangeTest, TheBrokerGetsHeaderNamesAndTheBodysFirstBytes) {
  policy_->verdict = [](const RequestFacts&) { return refused(403, "held elsewhere"); };
  const std::string head = std::string("POST /v1/x HTTP/1.1\r\nHost: ") + kHost +
                           "\r\nX-Trace: 1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";
  fetch({head, "5\r\nhello\r\n", "6\r\n world\r\n0\r\n\r\n"});
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].header_names,
            (std::vector<std::string>{"host", "x-trace", "content-type", "transfer-encoding"}));
  EXPECT_EQ(policy_->requests[0].body_preview.substr(0, 5), "hello");
  // A Content-Length body: as much of it as the preview holds, across reads.
  reset();
  policy_->verdict = [](const RequestFacts&) { return refused(403, "held elsewhere"); };
  fetch({std::string("POST /v1/x HTTP/1.1\r\nHost: ") + kHost + "\r\nContent-Length: 11\r\n\r\nhel",
         "lo world"});
  ASSERT_EQ(policy_->requests.size(), 1u);
  EXPECT_EQ(policy_->requests[0].body_preview, "hello world");
}

TEST_F(ExchangeTest, AHeldRequestGoesUpstreamOnlyOnceApproved) {
  for (const HoldOutcome outcome : {HoldOutcome::kApproved, HoldOutcome::kRefused}) {
    SCOPED_TRACE(outcome == HoldOutcome::kApproved ? "approved" : "refused");
    reset();
    policy_->verdict = [](const RequestFacts& f) {
      RequestDecision d;
      d.allow = true;
      d.host = f.host_header;
      d.hold_ticket = 77;
      return d;
    };
    policy_->hold = {outcome, outcome == HoldOutcome::kApproved ? "" : "denied by operator"};
    const std::string got = fetch({kGet});
    EXPECT_EQ(policy_->polled, std::vector<uint64_t>{77});
    if (outcome == HoldOutcome::kApproved) {
      EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
      EXPECT_EQ(upstream_->received.size(), 1u);
    } else {
      EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 403") << got;
      EXPECT_NE(got.find("zeroness: blocked by policy (denied by operator)\n"), std::string::npos) << got;
      EXPECT_EQ(upstream_->connections, 0);
    }
  }
}

// An operator decides while the request waits: the proxy sleeps until the
// broker's wake, reading the state once before and once after, and does not
// wait for the ticket's expiry (a minute away) or poll in between.
TEST_F(ExchangeTest, AHeldRequestWakesOnTheDecisionWithoutPolling) {
  policy_->verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.hold_ticket = 78;
    d.hold_expires = std::chrono::steady_clock::now() + 60s;
    return d;
  };
  policy_->hold = {HoldOutcome::kPending, ""};
  std::thread operator_thread;
  policy_->on_watch = [&](uint64_t ticket, std::function<void()> wake) {
    EXPECT_EQ(ticket, 78u);
    operator_thread = std::thread([this, wake = std::move(wake)] {
      std::this_thread::sleep_for(300ms);  // the proxy is asleep by now
      policy_->set_hold({HoldOutcome::kApproved, ""});
      wake();
    });
  };
  const auto start = std::chrono::steady_clock::now();
  const std::string got = fetch({kGet});
  const auto waited = std::chrono::steady_clock::now() - start;
  if (operator_thread.joinable()) operator_thread.join();
  EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
  EXPECT_EQ(upstream_->received.size(), 1u);
  EXPECT_EQ(policy_->polled, (std::vector<uint64_t>{78, 78}));
  EXPECT_LT(waited, 20s);  // woken, not expired (run() gives up at 20 s)
}

std::string base64(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// The upstream echoes the credential it got, raw in a header and in the
// body, and base64 in the body: an echo service, or one that replays.
std::string echo(const Received& r) {
  const std::string* auth = r.head.find("Authorization");
  const std::string value = auth ? *auth : "none";
  const std::string body = "{\"authorization\":\"" + value + "\",\"b64\":\"" + base64(value) + "\"}";
  return "HTTP/1.1 200 OK\r\nX-Echo: " + value + "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

TEST_F(ExchangeTest, ResponsesAreScrubbedOfTheInjectedSecret) {
  const std::string request = std::string("GET /v1/a HTTP/1.1\r\nHost: ") + kHost +
                              "\r\nAuthorization: Bearer guest-own-token\r\n\r\n";
  // Control: no identity, so the guest's own header is relayed and echoed as is.
  upstream_->respond = echo;
  const std::string plain = fetch({request}, true);
  EXPECT_NE(plain.find("X-Echo: Bearer guest-own-token\r\n"), std::string::npos) << plain;
  EXPECT_NE(plain.find(base64("Bearer guest-own-token")), std::string::npos) << plain;
  ASSERT_EQ(policy_->summaries.size(), 1u);
  EXPECT_EQ(policy_->summaries[0].reflected_in_head + policy_->summaries[0].reflected_in_body, 0u);

  reset();
  upstream_->respond = echo;
  policy_->verdict = [](const RequestFacts& f) {
    RequestDecision d;
    d.allow = true;
    d.host = f.host_header;
    d.rule = RuleRef{2, "stripe"};
    return d;
  };
  policy_->injection = stripe_injection();
  const std::string got = fetch({request}, true);
  ASSERT_EQ(upstream_->received.size(), 1u);
  EXPECT_NE(upstream_->received[0].raw.find(kExchangeSecret), std::string::npos);  // it was injected ...
  EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
  for (const SecretPattern& p : secret_patterns(kExchangeSecret))  // ... and never came back, in any encoding
    EXPECT_EQ(got.find(p.bytes), std::string::npos) << encoding_name(p.encoding);
  // Same-length replacement: the upstream's Content-Length still frames the body.
  const size_t body_at = got.find("\r\n\r\n") + 4;
  const size_t length_at = got.find("Content-Length: ") + 16;
  EXPECT_EQ(std::stoul(got.substr(length_at, got.find("\r\n", length_at) - length_at)), got.size() - body_at);
  ASSERT_EQ(policy_->summaries.size(), 1u);
  const RequestSummary& s = policy_->summaries[0];
  EXPECT_EQ(s.reflected_in_head, 1u);
  EXPECT_EQ(s.reflected_in_body, 2u);
  EXPECT_EQ(s.reflected_identities, std::vector<std::string>{"stripe"});
  const auto& encodings = s.reflected_encodings;
  EXPECT_NE(std::find(encodings.begin(), encodings.end(), "raw"), encodings.end());
  EXPECT_NE(std::find(encodings.begin(), encodings.end(), "base64"), encodings.end());
}

TEST_F(ExchangeTest, TheSessionsSecretsAreScrubbedEvenWhereNoneWasInjected) {
  // An upstream replaying on this connection what it got on another one.
  const std::string leak = "{\"token\":\"" + kExchangeSecret + "\"}";
  upstream_->respond = [&](const Received&) {
    return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(leak.size()) + "\r\n\r\n" + leak;
  };
  const std::string unarmed = fetch({kGet});
  EXPECT_NE(unarmed.find(kExchangeSecret), std::string::npos);  // control: nothing to scrub for

  reset();
  upstream_->respond = [&](const Received&) {
    return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(leak.size()) + "\r\n\r\n" + leak;
  };
  policy_->secrets = {{"stripe", kExchangeSecret}};
  const std::string got = fetch({kGet});
  EXPECT_EQ(got.find(kExchangeSecret), std::string::npos) << "the session's secret reached the guest";
  EXPECT_EQ(got.size(), unarmed.size());
  EXPECT_TRUE(policy_->injected.empty());
}

}  // namespace
}  // namespace zn::proxy
