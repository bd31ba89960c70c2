// The exchange's view of an HTTP/2 upstream (h2_upstream_stream.h): the
// HTTP/1.1 request bytes it writes become one stream each, the answers come
// back as HTTP/1.1 text, on one connection; an upstream that resets, sends
// what HTTP/1.1 cannot carry or goes away fails the request, never another.
// The upstream is nghttp2 (H2ServerSession) over loopback TCP, scripted by
// path.
#include "userspace/proxy/h2_upstream_stream.h"

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

class H2UpstreamStreamTest : public ::testing::Test {
 protected:
  H2UpstreamStreamTest()
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), client_(io_) {}

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
      // No length: chunked for the exchange. In pieces.
      s.submit_response(id, 200, {{"content-type", "text/plain"}}, true);
      s.send_data(id, std::string(100000, 'u'), false);
      s.send_data(id, "end", true);
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
  void run(std::function<awaitable<void>(H2UpstreamStream&)> client) {
    client_.connect(acceptor_.local_endpoint());
    tcp::socket server = acceptor_.accept();
    asio::co_spawn(io_, serve(std::move(server)), asio::detached);
    auto up = std::make_unique<H2UpstreamStream>(std::make_unique<PlainStream>(client_));
    bool done = false;
    std::exception_ptr failed;
    asio::co_spawn(io_, client(*up), [&](std::exception_ptr e) {
      failed = e;
      done = true;
      asio::error_code ignored;
      client_.close(ignored);
    });
    io_.run_for(10s);
    ASSERT_TRUE(done) << "the client never finished";
    if (failed) std::rethrow_exception(failed);
  }

  // One response as the exchange reads it: head parsed, body by its framing.
  static awaitable<std::string> response(H2UpstreamStream& up, http::ResponseHead& head) {
    std::string in;
    char buf[4096];
    for (;;) {
      const http::ParseResult r = http::parse_response_head(in, http::HttpLimits{}, false, head);
      if (r.state == http::ParseState::kDone) {
        in.erase(0, r.consumed);
        break;
      }
      if (r.state == http::ParseState::kError) throw std::runtime_error(r.error);
      const size_t n = co_await up.read_some(buf, sizeof(buf));
      if (n == 0) throw std::runtime_error("closed before a head");
      in.append(buf, n);
    }
    http::BodyDecoder decoder(head.framing, head.content_length, http::HttpLimits{});
    std::string body;
    for (;;) {
      const http::BodyDecoder::Step step = decoder.feed(in, body);
      in.erase(0, step.consumed);
      if (step.error) throw std::runtime_error(step.error_reason);
      if (step.done) break;
      const size_t n = co_await up.read_some(buf, sizeof(buf));
      if (n == 0) throw std::runtime_error("closed inside a body");
      in.append(buf, n);
    }
    co_return body;
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  tcp::socket client_;
  std::vector<Seen> seen_;
};

TEST_F(H2UpstreamStreamTest, RequestsGoAsStreamsOneAfterAnother) {
  run([&](H2UpstreamStream& up) -> awaitable<void> {
    http::ResponseHead head;
    co_await up.write_all("GET /a?q=1 HTTP/1.1\r\nHost: up.example\r\nAuthorization: Bearer t\r\n\r\n");
    std::string body = co_await response(up, head);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(body, "got 0");
    // Chunked from the exchange, in two writes: the stream's DATA.
    co_await up.write_all("POST /b HTTP/1.1\r\nHost: up.example\r\nTransfer-Encoding: chunked\r\n\r\n");
    co_await up.write_all("5\r\nhello\r\n");
    co_await up.write_all("0\r\n\r\n");
    body = co_await response(up, head);
    EXPECT_EQ(body, "got 5");
    // Past the stream's and the connection's windows, framed by a length.
    const std::string big(300000, 'b');
    co_await up.write_all("PUT /c HTTP/1.1\r\nHost: up.example\r\nContent-Length: 300000\r\n\r\n");
    co_await up.write_all(big);
    body = co_await response(up, head);
    EXPECT_EQ(body, "got 300000");
    // No length from the upstream: chunked for the exchange.
    co_await up.write_all("GET /unframed HTTP/1.1\r\nHost: up.example\r\n\r\n");
    body = co_await response(up, head);
    EXPECT_EQ(head.framing, http::BodyFraming::kChunked);
    EXPECT_EQ(body.size(), 100003u);
  });
  ASSERT_EQ(seen_.size(), 4u);
  EXPECT_EQ(seen_[0].method, "GET");
  EXPECT_EQ(seen_[0].path, "/a?q=1");
  EXPECT_EQ(seen_[0].authority, "up.example");
  bool auth = false;
  for (const h2::Field& f : seen_[0].headers)
    auth = auth || (f.name == "authorization" && f.value == "Bearer t");
  EXPECT_TRUE(auth);
  EXPECT_EQ(seen_[2].body.size(), 300000u);
}

TEST_F(H2UpstreamStreamTest, AResetStreamFailsItsRequestOnly) {
  run([&](H2UpstreamStream& up) -> awaitable<void> {
    http::ResponseHead head;
    co_await up.write_all("GET /reset HTTP/1.1\r\nHost: up.example\r\n\r\n");
    bool failed = false;
    try {
      co_await response(up, head);
    } catch (const std::runtime_error& e) {
      failed = std::string(e.what()).find("reset") != std::string::npos;
    }
    EXPECT_TRUE(failed);
    // The connection is no longer used: the exchange drops it.
    bool refused = false;
    try {
      co_await up.write_all("GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n");
    } catch (const std::runtime_error&) {
      refused = true;
    }
    EXPECT_TRUE(refused);
  });
}

TEST_F(H2UpstreamStreamTest, AfterGoawayTheNextRequestIsRefusedBeforeAnyByte) {
  run([&](H2UpstreamStream& up) -> awaitable<void> {
    http::ResponseHead head;
    co_await up.write_all("GET /goaway HTTP/1.1\r\nHost: up.example\r\n\r\n");
    EXPECT_EQ(co_await response(up, head), "ok");
    bool refused = false;
    try {
      co_await up.write_all("GET /a HTTP/1.1\r\nHost: up.example\r\n\r\n");
    } catch (const std::runtime_error&) {
      refused = true;
    }
    EXPECT_TRUE(refused);  // the exchange retries it on a fresh connection
  });
  EXPECT_EQ(seen_.size(), 1u);
}

TEST_F(H2UpstreamStreamTest, AnUpgradeNeverGoesOverHttp2) {
  run([&](H2UpstreamStream& up) -> awaitable<void> {
    bool refused = false;
    try {
      co_await up.write_all(
          "GET /ws HTTP/1.1\r\nHost: up.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    } catch (const std::runtime_error&) {
      refused = true;
    }
    EXPECT_TRUE(refused);
  });
  EXPECT_TRUE(seen_.empty());
}

}  // namespace
}  // namespace zn::proxy
