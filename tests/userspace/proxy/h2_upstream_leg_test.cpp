// The exchange's view of an HTTP/2 upstream (h2_upstream_leg.h,
// h2_upstream_connection.h): each request it sends is one stream of fields
// and DATA, each answer comes back as a head, payload and trailers; many
// exchanges' streams share one connection at once, a stream whose reader
// takes nothing holds back only itself, and an upstream that resets, sends
// what cannot be relayed or goes away fails the request, never another.
// The upstream is nghttp2 (H2ServerSession) over loopback TCP, scripted by
// path; the shares (h2_upstream_shares.h) hand a connection only to its own
// key on its own loop.
#include "userspace/proxy/h2_upstream_leg.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <variant>

#include "userspace/h2/server_session.h"
#include "userspace/http/message.h"
#include "userspace/proxy/h2_upstream_shares.h"
#include "upstream_leg_fixture.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

struct Seen {
  std::string method, path, authority;
  std::vector<h2::Field> headers;
  std::string body;
};

class H2UpstreamLegTest : public ::testing::Test {
 protected:
  H2UpstreamLegTest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}

  // The upstream: answers each request by its path once its body ended.
  awaitable<void> serve(tcp::socket socket) {
    PlainStream stream(socket);
    h2::H2ServerSession session;
    std::map<int32_t, Seen> open;
    char buf[16384];
    try {
      for (;;) {
        std::string out = session.take_output();
        if (!out.empty()) co_await stream.write_all(out);
        if (close_now_) break;
        const size_t n = co_await stream.read_some(buf, sizeof(buf));
        if (n == 0) break;
        if (!session.feed(std::span(reinterpret_cast<const uint8_t*>(buf), n))) break;
        for (h2::ServerEvent& e : session.take_events()) {
          if (auto* h = std::get_if<h2::RequestHeaders>(&e)) {
            open[h->stream_id] = Seen{h->method, h->path, h->authority, h->headers, ""};
            if (h->end_stream) answer(session, h->stream_id, open[h->stream_id]);
          } else if (auto* d = std::get_if<h2::RequestData>(&e)) {
            open[d->stream_id].body += d->bytes;
            if (d->end_stream) answer(session, d->stream_id, open[d->stream_id]);
          }
        }
      }
    } catch (const std::exception&) {
    }
  }

  void answer(h2::H2ServerSession& s, int32_t id, const Seen& seen) {
    seen_.push_back(seen);
    if (seen.path == "/slow") {
      held_ = id;  // answered once /fast was
    } else if (seen.path == "/fast") {
      reply(s, id, "fast");
      if (held_ > 0) reply(s, held_, "slow");
    } else if (seen.path == "/big") {
      // Past its stream's window: sent as the reader takes it.
      s.submit_response(id, 200, {{"content-length", std::to_string(kBig)}}, true);
      s.send_data(id, std::string(kBig, 'b'), true);
    } else if (seen.path == "/close") {
      close_now_ = true;
    } else if (seen.path == "/reset") {
      s.reset_stream(id, 0x2);
    } else if (seen.path == "/unframed") {
      // No length: until the stream's end. In pieces.
      s.submit_response(id, 200, {{"content-type", "text/plain"}}, true);
      s.send_data(id, std::string(100000, 'u'), false);
      s.send_data(id, "end", true);
    } else if (seen.path == "/trailers") {
      s.submit_response(id, 200, {{"content-type", "application/grpc"}}, true);
      s.send_data(id, "msg", false);
      s.send_trailers(id, {{"grpc-status", "0"}});
    } else if (seen.path == "/goaway") {
      s.submit_response(id, 200, {{"content-length", "2"}}, true);
      s.send_data(id, "ok", true);
      s.goaway(0);
    } else {
      reply(s, id, "got " + std::to_string(seen.body.size()));
    }
  }

  static void reply(h2::H2ServerSession& s, int32_t id, const std::string& body) {
    s.submit_response(id, 200, {{"content-length", std::to_string(body.size())}}, true);
    s.send_data(id, body, true);
  }

  // A connection to a fresh upstream, its owner started.
  std::shared_ptr<H2UpstreamConnection> connect() {
    auto socket = std::make_unique<tcp::socket>(io_);
    socket->connect(acceptor_.local_endpoint());
    tcp::socket server = acceptor_.accept();
    asio::co_spawn(io_, serve(std::move(server)), asio::detached);
    auto transport = std::make_unique<PlainStream>(*socket);
    auto c =
        std::make_shared<H2UpstreamConnection>(std::move(socket), std::move(transport), "127.0.0.1", 5s, 5s);
    c->start();
    return c;
  }

  // Runs `client` until it finishes (at most 10 s).
  void finish(std::function<awaitable<void>()> client) {
    bool done = false;
    std::exception_ptr failed;
    asio::co_spawn(io_, client(), [&](std::exception_ptr e) {
      failed = e;
      done = true;
      io_.stop();
    });
    io_.run_for(10s);
    ASSERT_TRUE(done) << "the client never finished";
    if (failed) std::rethrow_exception(failed);
  }

  // Runs `client` over one leg of a fresh upstream connection.
  void run(std::function<awaitable<void>(H2UpstreamLeg&)> client) {
    auto up = std::make_unique<H2UpstreamLeg>(connect());
    finish([&]() -> awaitable<void> { co_await client(*up); });
  }

  // One response as the exchange reads it: the head, then the payload.
  static awaitable<std::string> response(H2UpstreamLeg& up, http::ResponseHead& head) {
    const bool got = co_await up.response_head(head);
    if (!got) throw std::runtime_error("closed before a head");
    std::string body;
    for (;;) {
      const bool done = co_await up.response_body(body);
      if (done) break;
    }
    co_return body;
  }

  static constexpr size_t kBig = 1024 * 1024;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::vector<Seen> seen_;
  int32_t held_ = 0;
  bool close_now_ = false;
};

TEST_F(H2UpstreamLegTest, RequestsGoAsStreamsOneAfterAnother) {
  run([&](H2UpstreamLeg& up) -> awaitable<void> {
    http::ResponseHead head;
    legtest::TestRequest a = legtest::test_request("GET /a?q=1 HTTP/1.1\r\nHost: up.example\r\n\r\n");
    a.inject = true;
    a.injection.header = "Authorization";
    a.injection.value = "Bearer t";
    EXPECT_TRUE(co_await up.send_head(a.out()));
    std::string body = co_await response(up, head);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(body, "got 0");
    EXPECT_TRUE(up.reusable());
    // A chunked body from the guest, in two pieces: the stream's DATA.
    const legtest::TestRequest b =
        legtest::test_request("POST /b HTTP/1.1\r\nHost: up.example\r\nTransfer-Encoding: chunked\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(b.out()));
    co_await up.send_body("hel", false);
    co_await up.send_body("lo", false);
    co_await up.send_body("", true);
    body = co_await response(up, head);
    EXPECT_EQ(body, "got 5");
    // Past the stream's and the connection's windows, framed by a length.
    const std::string big(300000, 'b');
    const legtest::TestRequest c =
        legtest::test_request("PUT /c HTTP/1.1\r\nHost: up.example\r\nContent-Length: 300000\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(c.out()));
    co_await up.send_body(big, true);
    body = co_await response(up, head);
    EXPECT_EQ(body, "got 300000");
    // No length from the upstream: until the stream's end.
    const legtest::TestRequest d =
        legtest::test_request("GET /unframed HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(d.out()));
    body = co_await response(up, head);
    EXPECT_EQ(head.framing, http::BodyFraming::kUntilClose);
    EXPECT_TRUE(head.keep_alive);
    EXPECT_EQ(body.size(), 100003u);
    EXPECT_TRUE(up.reusable());  // the stream ended, not the connection
    // Trailer fields come apart from the payload.
    const legtest::TestRequest e =
        legtest::test_request("POST /trailers HTTP/1.1\r\nHost: up.example\r\nContent-Length: 0\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(e.out()));
    body = co_await response(up, head);
    EXPECT_EQ(body, "msg");
    const std::vector<http::Header> trailers = up.trailers();
    EXPECT_EQ(trailers.size(), 1u);
    if (trailers.size() == 1) {
      EXPECT_EQ(trailers[0].name, "grpc-status");
      EXPECT_EQ(trailers[0].value, "0");
    }
  });
  ASSERT_EQ(seen_.size(), 5u);
  EXPECT_EQ(seen_[0].method, "GET");
  EXPECT_EQ(seen_[0].path, "/a?q=1");
  EXPECT_EQ(seen_[0].authority, "up.example");
  bool auth = false;
  for (const h2::Field& f : seen_[0].headers)
    auth = auth || (f.name == "authorization" && f.value == "Bearer t");
  EXPECT_TRUE(auth);
  EXPECT_EQ(seen_[1].body, "hello");
  EXPECT_EQ(seen_[2].body.size(), 300000u);
}

TEST_F(H2UpstreamLegTest, AResetStreamFailsItsRequestOnly) {
  run([&](H2UpstreamLeg& up) -> awaitable<void> {
    http::ResponseHead head;
    const legtest::TestRequest reset =
        legtest::test_request("GET /reset HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(reset.out()));
    bool failed = false;
    try {
      co_await response(up, head);
    } catch (const std::runtime_error& e) {
      failed = std::string(e.what()).find("reset") != std::string::npos;
    }
    EXPECT_TRUE(failed);
    // The connection is no longer used: the exchange drops it.
    EXPECT_FALSE(up.reusable());
  });
}

TEST_F(H2UpstreamLegTest, AfterGoawayTheNextRequestIsNotSent) {
  run([&](H2UpstreamLeg& up) -> awaitable<void> {
    http::ResponseHead head;
    const legtest::TestRequest goaway =
        legtest::test_request("GET /goaway HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await up.send_head(goaway.out()));
    EXPECT_EQ(co_await response(up, head), "ok");
    EXPECT_FALSE(up.reusable());
    // Not written: the exchange retries it on a fresh connection.
    const legtest::TestRequest next = legtest::test_request("GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_FALSE(co_await up.send_head(next.out()));
  });
  EXPECT_EQ(seen_.size(), 1u);
}

TEST_F(H2UpstreamLegTest, AnUpgradeNeverGoesOverHttp2) {
  run([&](H2UpstreamLeg& up) -> awaitable<void> {
    legtest::TestRequest ws = legtest::test_request(
        "GET /ws HTTP/1.1\r\nHost: up.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    OutgoingRequest out = ws.out();
    out.upgrade = true;
    bool refused = false;
    try {
      co_await up.send_head(out);
    } catch (const std::runtime_error&) {
      refused = true;
    }
    EXPECT_TRUE(refused);
    EXPECT_EQ(up.tunnel(ws.host), nullptr);
  });
  EXPECT_TRUE(seen_.empty());
}

TEST_F(H2UpstreamLegTest, ExchangesShareOneConnectionWithStreamsAtOnce) {
  std::shared_ptr<H2UpstreamConnection> c = connect();
  H2UpstreamLeg slow(c), fast(c);
  std::string slow_body, fast_body;
  finish([&]() -> awaitable<void> {
    // /slow is answered only after /fast: one request at a time would never end.
    const legtest::TestRequest r2 = legtest::test_request("GET /slow HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await slow.send_head(r2.out()));
    const legtest::TestRequest r3 = legtest::test_request("GET /fast HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await fast.send_head(r3.out()));
    http::ResponseHead head;
    fast_body = co_await response(fast, head);
    slow_body = co_await response(slow, head);
    EXPECT_TRUE(slow.reusable());
    EXPECT_TRUE(fast.reusable());
  });
  EXPECT_EQ(fast_body, "fast");
  EXPECT_EQ(slow_body, "slow");
  EXPECT_EQ(seen_.size(), 2u);  // both on the one connection the server saw
}

TEST_F(H2UpstreamLegTest, AStreamNobodyReadsHoldsBackOnlyItself) {
  std::shared_ptr<H2UpstreamConnection> c = connect();
  H2UpstreamLeg big(c), small(c);
  std::string small_body, big_body;
  finish([&]() -> awaitable<void> {
    const legtest::TestRequest r4 = legtest::test_request("GET /big HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await big.send_head(r4.out()));
    http::ResponseHead head;
    EXPECT_TRUE(co_await big.response_head(head));
    // Nothing of /big taken: its window (256 KiB) fills, the connection's does not.
    asio::steady_timer pause(co_await asio::this_coro::executor, 200ms);
    co_await pause.async_wait(asio::use_awaitable);
    const legtest::TestRequest r5 = legtest::test_request("GET /s HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await small.send_head(r5.out()));
    small_body = co_await response(small, head);
    // Positive control: the held stream goes on once read.
    for (;;) {
      const bool done = co_await big.response_body(big_body);
      if (done) break;
    }
  });
  EXPECT_EQ(small_body, "got 0");
  EXPECT_EQ(big_body.size(), kBig);
}

TEST_F(H2UpstreamLegTest, AConnectionThatEndsFailsItsStreamsAsClosed) {
  std::shared_ptr<H2UpstreamConnection> c = connect();
  H2UpstreamLeg closing(c), other(c);
  finish([&]() -> awaitable<void> {
    // The positive control first: the connection answers.
    http::ResponseHead head;
    const legtest::TestRequest r6 = legtest::test_request("GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await other.send_head(r6.out()));
    EXPECT_EQ(co_await response(other, head), "got 0");
    const legtest::TestRequest r7 = legtest::test_request("GET /close HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await closing.send_head(r7.out()));
    // Nothing of an answer: as a connection that closed (the exchange
    // retries a bodiless request elsewhere).
    EXPECT_FALSE(co_await closing.response_head(head));
    EXPECT_FALSE(closing.reusable());
    EXPECT_FALSE(other.reusable());
    const legtest::TestRequest r8 = legtest::test_request("GET /b HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_FALSE(co_await other.send_head(r8.out()));
  });
  EXPECT_FALSE(c->ended().empty());
}

TEST_F(H2UpstreamLegTest, SharesHandAConnectionOnlyToItsKeyOnItsLoopWhileItTakesStreams) {
  std::shared_ptr<H2UpstreamConnection> c = connect();
  H2UpstreamShares shares;
  const UpstreamKey key{"s1", "up.example", "", 443, true};
  shares.add(key, c);
  asio::io_context other_loop;
  finish([&]() -> awaitable<void> {
    EXPECT_EQ(shares.find(key, io_.get_executor()), c);
    UpstreamKey other_session = key;
    other_session.session = "s2";
    EXPECT_EQ(shares.find(other_session, io_.get_executor()), nullptr);
    UpstreamKey other_identity = key;
    other_identity.identity = "another";
    EXPECT_EQ(shares.find(other_identity, io_.get_executor()), nullptr);
    EXPECT_EQ(shares.find(key, other_loop.get_executor()), nullptr);
    // Once the upstream went away, no new stream goes to it.
    H2UpstreamLeg leg(c);
    http::ResponseHead head;
    const legtest::TestRequest r9 = legtest::test_request("GET /goaway HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_TRUE(co_await leg.send_head(r9.out()));
    EXPECT_EQ(co_await response(leg, head), "ok");
    EXPECT_EQ(shares.find(key, io_.get_executor()), nullptr);
  });
  // Its owner ends after the GOAWAY: once it has and its legs went, nothing holds it.
  c.reset();
  io_.restart();
  io_.run_for(2s);
  EXPECT_EQ(shares.size(), 0u);
}

TEST(H2UpstreamSharesTest, AConnectInFlightIsJoinedNotRepeated) {
  asio::io_context loop, other_loop;
  H2UpstreamShares shares;
  const UpstreamKey key{"s1", "up.example", "", 443, true};
  H2UpstreamShares::Join first = shares.join(key, loop.get_executor());
  EXPECT_TRUE(first.first);
  H2UpstreamShares::Join second = shares.join(key, loop.get_executor());
  EXPECT_FALSE(second.first);
  EXPECT_EQ(second.connecting, first.connecting);
  // Another key, another loop: connects of their own.
  UpstreamKey other = key;
  other.identity = "cap:x";
  EXPECT_TRUE(shares.join(other, loop.get_executor()).first);
  EXPECT_TRUE(shares.join(key, other_loop.get_executor()).first);
  shares.finish(first.connecting);
  EXPECT_TRUE(second.connecting->finished);
  EXPECT_TRUE(shares.join(key, loop.get_executor()).first);  // the next connect is a new one
}

}  // namespace
}  // namespace zn::proxy
