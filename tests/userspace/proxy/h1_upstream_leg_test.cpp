// An HTTP/1.1 upstream as the exchange sees it (h1_upstream_leg.h): the
// request written with regenerated framing, the response parsed strictly,
// and the connection called reusable only when the response ended where its
// framing says, nothing came after it and neither end asked to close. The
// upstream is a scripted server on 127.0.0.1 that records what it got.
#include "userspace/proxy/h1_upstream_leg.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <functional>
#include <memory>
#include <string>

#include "upstream_leg_fixture.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

class H1UpstreamLegTest : public ::testing::Test {
 protected:
  H1UpstreamLegTest() : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), client_(io_) {}

  // The upstream: once what it read ends with `until`, it writes `answer`
  // and, if `close`, closes.
  awaitable<void> serve(tcp::socket socket, std::string until, std::string answer, bool close) {
    char buf[4096];
    try {
      while (!got_.ends_with(until)) {
        const size_t n = co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
        got_.append(buf, n);
      }
      co_await asio::async_write(socket, asio::buffer(answer), asio::use_awaitable);
      if (close) socket.close();
      // Keeps the connection open (and reads what else comes) until the client goes.
      for (;;) {
        const size_t n = co_await socket.async_read_some(asio::buffer(buf), asio::use_awaitable);
        got_.append(buf, n);
      }
    } catch (const std::exception&) {
    }
  }

  void run(std::string until, std::string answer, bool close,
           std::function<awaitable<void>(H1UpstreamLeg&)> client) {
    client_.connect(acceptor_.local_endpoint());
    tcp::socket server = acceptor_.accept();
    asio::co_spawn(io_, serve(std::move(server), std::move(until), std::move(answer), close), asio::detached);
    auto leg = std::make_unique<H1UpstreamLeg>(std::make_unique<PlainStream>(client_), http::HttpLimits{});
    legtest::run_over_leg(io_, client_, *leg, client);
  }

  // The whole body, read as the exchange reads it.
  static awaitable<std::string> body(H1UpstreamLeg& up) {
    std::string out;
    for (;;) {
      const bool done = co_await up.response_body(out);
      if (done) co_return out;
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  tcp::socket client_;
  std::string got_;
};

const std::string kPlainGet = "GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n";

TEST_F(H1UpstreamLegTest, AResponseReadToItsLengthLeavesTheConnectionReusable) {
  run("\r\n\r\n", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false,
      [&](H1UpstreamLeg& up) -> awaitable<void> {
        const legtest::TestRequest r = legtest::test_request(kPlainGet);
        EXPECT_TRUE(co_await up.send_head(r.out()));
        http::ResponseHead head;
        EXPECT_TRUE(co_await up.response_head(head));
        EXPECT_EQ(head.status, 200);  // the interim answer skipped
        EXPECT_FALSE(up.reusable());  // not before its body was read
        EXPECT_EQ(co_await body(up), "hello");
        EXPECT_TRUE(up.reusable());
      });
  EXPECT_EQ(got_.rfind("GET /a HTTP/1.1\r\n", 0), 0u);
}

TEST_F(H1UpstreamLegTest, ABodyUntilCloseEndsAtTheCloseAndTheConnectionWithIt) {
  run("\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\nall of it", true, [&](H1UpstreamLeg& up) -> awaitable<void> {
    const legtest::TestRequest r1 = legtest::test_request(kPlainGet);
    EXPECT_TRUE(co_await up.send_head(r1.out()));
    http::ResponseHead head;
    EXPECT_TRUE(co_await up.response_head(head));
    EXPECT_EQ(co_await body(up), "all of it");
    EXPECT_FALSE(up.reusable());
  });
}

TEST_F(H1UpstreamLegTest, ACloseAskedOrBytesAfterTheResponseMeanNoReuse) {
  run("\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", false,
      [&](H1UpstreamLeg& up) -> awaitable<void> {
        const legtest::TestRequest r2 = legtest::test_request(kPlainGet);
        EXPECT_TRUE(co_await up.send_head(r2.out()));
        http::ResponseHead head;
        EXPECT_TRUE(co_await up.response_head(head));
        EXPECT_EQ(co_await body(up), "ok");
        EXPECT_FALSE(up.reusable());
      });
}

TEST_F(H1UpstreamLegTest, BytesBehindTheResponseMeanNoReuse) {
  run("\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n", false,
      [&](H1UpstreamLeg& up) -> awaitable<void> {
        const legtest::TestRequest r3 = legtest::test_request(kPlainGet);
        EXPECT_TRUE(co_await up.send_head(r3.out()));
        http::ResponseHead head;
        EXPECT_TRUE(co_await up.response_head(head));
        EXPECT_EQ(co_await body(up), "ok");
        EXPECT_FALSE(up.reusable());  // an answer nobody asked for is waiting
      });
}

TEST_F(H1UpstreamLegTest, AChunkedRequestBodyIsFramedAndTheResponsesTrailersKept) {
  const std::string head_text = "POST /b HTTP/1.1\r\nHost: up.example\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string answer =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nmsg\r\n0\r\ngrpc-status: 0\r\n\r\n";
  run("0\r\n\r\n", answer, false, [&](H1UpstreamLeg& up) -> awaitable<void> {
    const legtest::TestRequest r4 = legtest::test_request(head_text);
    EXPECT_TRUE(co_await up.send_head(r4.out()));
    co_await up.send_body("hel", false);
    co_await up.send_body("lo", true);
    // The server answers once the last chunk came.
    http::ResponseHead head;
    EXPECT_TRUE(co_await up.response_head(head));
    EXPECT_EQ(co_await body(up), "msg");
    const std::vector<http::Header> trailers = up.trailers();
    EXPECT_EQ(trailers.size(), 1u);
    if (!trailers.empty()) {
      EXPECT_EQ(trailers[0].name, "grpc-status");
    }
  });
  EXPECT_NE(got_.find("\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n"), std::string::npos) << got_;
}

TEST_F(H1UpstreamLegTest, ATruncatedBodyFails) {
  run("\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", true,
      [&](H1UpstreamLeg& up) -> awaitable<void> {
        const legtest::TestRequest r5 = legtest::test_request(kPlainGet);
        EXPECT_TRUE(co_await up.send_head(r5.out()));
        http::ResponseHead head;
        EXPECT_TRUE(co_await up.response_head(head));
        bool failed = false;
        try {
          co_await body(up);
        } catch (const std::runtime_error& e) {
          failed = std::string(e.what()).find("truncated") != std::string::npos;
        }
        EXPECT_TRUE(failed);
        EXPECT_FALSE(up.reusable());
      });
}

TEST_F(H1UpstreamLegTest, ASwitchNobodyAskedForFails) {
  run("\r\n\r\n", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
      false, [&](H1UpstreamLeg& up) -> awaitable<void> {
        const legtest::TestRequest r6 = legtest::test_request(kPlainGet);
        EXPECT_TRUE(co_await up.send_head(r6.out()));
        http::ResponseHead head;
        bool failed = false;
        try {
          co_await up.response_head(head);
        } catch (const std::runtime_error& e) {
          failed = std::string(e.what()).find("switched") != std::string::npos;
        }
        EXPECT_TRUE(failed);
      });
}

TEST_F(H1UpstreamLegTest, AClosedConnectionIsToldFromAFailedRequest) {
  // The server reads the request and closes: nothing of a response (the
  // exchange may retry a request that had no body).
  run("\r\n\r\n", "", true, [&](H1UpstreamLeg& up) -> awaitable<void> {
    const legtest::TestRequest r7 = legtest::test_request(kPlainGet);
    co_await up.send_head(r7.out());
    http::ResponseHead head;
    EXPECT_FALSE(co_await up.response_head(head));
  });
}

}  // namespace
}  // namespace zn::proxy
