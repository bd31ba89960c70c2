// The exchange's view of an HTTP/2 upstream (h2_upstream_leg.h): each
// request it sends is one stream of fields and DATA, each answer comes back
// as a head, payload and trailers, on one connection; an upstream that
// resets, sends what cannot be relayed or goes away fails the request, never
// another. The upstream is nghttp2 (H2ServerSession) over loopback TCP,
// scripted by path.
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
  H2UpstreamLegTest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), client_(io_) {}

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
    if (seen.path == "/reset") {
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
      const std::string body = "got " + std::to_string(seen.body.size());
      s.submit_response(id, 200, {{"content-length", std::to_string(body.size())}}, true);
      s.send_data(id, body, true);
    }
  }

  // Runs `client` against a fresh upstream until both are done.
  void run(std::function<awaitable<void>(H2UpstreamLeg&)> client) {
    client_.connect(acceptor_.local_endpoint());
    tcp::socket server = acceptor_.accept();
    asio::co_spawn(io_, serve(std::move(server)), asio::detached);
    auto up = std::make_unique<H2UpstreamLeg>(std::make_unique<PlainStream>(client_));
    legtest::run_over_leg(io_, client_, *up, client);
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

  asio::io_context io_;
  tcp::acceptor acceptor_;
  tcp::socket client_;
  std::vector<Seen> seen_;
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
    EXPECT_TRUE(co_await up.send_head(
        legtest::test_request("GET /unframed HTTP/1.1\r\nHost: up.example\r\n\r\n").out()));
    body = co_await response(up, head);
    EXPECT_EQ(head.framing, http::BodyFraming::kUntilClose);
    EXPECT_TRUE(head.keep_alive);
    EXPECT_EQ(body.size(), 100003u);
    EXPECT_TRUE(up.reusable());  // the stream ended, not the connection
    // Trailer fields come apart from the payload.
    EXPECT_TRUE(co_await up.send_head(
        legtest::test_request("POST /trailers HTTP/1.1\r\nHost: up.example\r\nContent-Length: 0\r\n\r\n")
            .out()));
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
    EXPECT_TRUE(co_await up.send_head(
        legtest::test_request("GET /reset HTTP/1.1\r\nHost: up.example\r\n\r\n").out()));
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
    EXPECT_TRUE(co_await up.send_head(
        legtest::test_request("GET /goaway HTTP/1.1\r\nHost: up.example\r\n\r\n").out()));
    EXPECT_EQ(co_await response(up, head), "ok");
    EXPECT_FALSE(up.reusable());
    // Not written: the exchange retries it on a fresh connection.
    EXPECT_FALSE(
        co_await up.send_head(legtest::test_request("GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n").out()));
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

}  // namespace
}  // namespace zn::proxy
