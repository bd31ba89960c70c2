// The HTTP/2 stream as the exchange sees it (stream_pipe.h): the request
// bytes the bridge pushes, read as from a socket (a deadline cancels a wait
// cleanly); the exchange's response parsed back into a head and body pieces;
// a guest that does not take the response holds the writer back; a stream
// the guest reset ends every wait.
#include "userspace/proxy/stream_pipe.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <functional>
#include <string>
#include <vector>

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;

struct FakeSink : StreamPipe::Sink {
  void on_response_head(const http::ResponseHead& head, bool has_body) override {
    heads.push_back(head.status);
    bodied = has_body;
  }
  void on_response_data(std::string_view bytes, bool end) override {
    body.append(bytes);
    ended = ended || end;
  }
  void on_response_trailers(const std::vector<http::Header>& t) override {
    trailers = t;
    ended = true;
  }
  size_t unsent() const override { return unsent_bytes; }
  void on_request_consumed(size_t n) override { consumed += n; }

  std::vector<int> heads;
  std::vector<http::Header> trailers;
  bool bodied = false;
  std::string body;
  bool ended = false;
  size_t unsent_bytes = 0;
  size_t consumed = 0;
};

class StreamPipeTest : public ::testing::Test {
 protected:
  StreamPipeTest() : socket_(io_), pipe_(socket_, sink_, false, http::HttpLimits{}) {}
  // Runs `body` as a coroutine on the loop until it and everything it woke
  // are done.
  void run(std::function<asio::awaitable<void>()> body) {
    bool done = false;
    std::exception_ptr failed;
    asio::co_spawn(io_, body(), [&](std::exception_ptr e) {
      failed = e;
      done = true;
    });
    io_.run_for(5s);
    io_.restart();
    ASSERT_TRUE(done) << "the coroutine never finished";
    if (failed) std::rethrow_exception(failed);
  }

  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  FakeSink sink_;
  StreamPipe pipe_;
};

TEST_F(StreamPipeTest, TheRequestReadsAsPushedThenEndsAndItsPayloadIsReported) {
  pipe_.push("POST /x HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n");
  pipe_.push("5\r\nhello\r\n", 5);
  pipe_.push("0\r\n\r\n");
  pipe_.end_request();
  std::string got;
  run([&]() -> asio::awaitable<void> {
    char buf[7];
    for (;;) {
      const size_t n = co_await pipe_.read_some(buf, sizeof buf);
      if (n == 0) break;
      got.append(buf, n);
    }
  });
  EXPECT_EQ(got, "POST /x HTTP/1.1\r\nhost: a\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(sink_.consumed, 5u);  // once its segment was read whole
}

// The exchange's deadlines work on a stream: a read that waits too long is
// cancelled, and the pipe serves the next read as before.
TEST_F(StreamPipeTest, ADeadlineCancelsAWaitingReadAndThePipeGoesOn) {
  bool timed_out = false;
  std::string got;
  run([&]() -> asio::awaitable<void> {
    char buf[16];
    try {
      co_await with_deadline(pipe_.read_some(buf, sizeof buf), 50ms);
    } catch (const std::system_error& e) {
      timed_out = e.code() == std::errc::timed_out;
    }
    pipe_.push("late");
    const size_t n = co_await with_deadline(pipe_.read_some(buf, sizeof buf), 1s);
    got.assign(buf, n);
  });
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(got, "late");
}

TEST_F(StreamPipeTest, WaitReadableSeesAPushAndTimesOutWithout) {
  bool before = true, after = false;
  run([&]() -> asio::awaitable<void> {
    before = co_await pipe_.wait_readable(30ms);
    auto timer = std::make_shared<asio::steady_timer>(io_, 10ms);
    timer->async_wait([this, timer](asio::error_code) { pipe_.push("x"); });
    after = co_await pipe_.wait_readable(2s);
  });
  EXPECT_FALSE(before);
  EXPECT_TRUE(after);
}

// What the exchange writes, in whatever pieces, comes out as one head and
// the decoded body; an interim 100 is not passed on.
TEST_F(StreamPipeTest, TheResponseIsParsedBackIntoAHeadAndBodyPieces) {
  const std::string response =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 201 Created\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n"
      "6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n";
  run([&]() -> asio::awaitable<void> {
    for (size_t i = 0; i < response.size(); i += 3) co_await pipe_.write_all(response.substr(i, 3));
  });
  EXPECT_EQ(sink_.heads, std::vector<int>{201});
  EXPECT_TRUE(sink_.bodied);
  EXPECT_EQ(sink_.body, "hello world");
  EXPECT_TRUE(sink_.ended);
  EXPECT_TRUE(pipe_.response_complete());
}

TEST_F(StreamPipeTest, ABodilessAnswerIsCompleteAtItsHead) {
  run([&]() -> asio::awaitable<void> {
    co_await pipe_.write_all("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  });
  EXPECT_EQ(sink_.heads, std::vector<int>{403});
  EXPECT_FALSE(sink_.bodied);
  EXPECT_TRUE(pipe_.response_complete());
}

// A guest that does not take the response holds the writer (as a full
// socket would) until the bridge says it took some.
TEST_F(StreamPipeTest, AWriterWaitsWhileTheStreamHoldsTooMuch) {
  sink_.unsent_bytes = StreamPipe::kMaxUnsent + 1;
  bool written = false;
  run([&]() -> asio::awaitable<void> {
    auto timer = std::make_shared<asio::steady_timer>(io_, 50ms);
    timer->async_wait([this, timer, &written](asio::error_code) {
      EXPECT_FALSE(written) << "the writer did not wait";
      sink_.unsent_bytes = 0;
      pipe_.wake();
    });
    co_await pipe_.write_all("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    written = true;
  });
  EXPECT_TRUE(written);
  EXPECT_EQ(sink_.body, "ok");
}

// The guest reset the stream: a waiting read fails, so does the next write.
TEST_F(StreamPipeTest, AnAbortedStreamEndsEveryWait) {
  bool read_failed = false, write_failed = false;
  run([&]() -> asio::awaitable<void> {
    auto timer = std::make_shared<asio::steady_timer>(io_, 20ms);
    timer->async_wait([this, timer](asio::error_code) { pipe_.abort(); });
    char buf[8];
    try {
      co_await pipe_.read_some(buf, sizeof buf);
    } catch (const std::system_error&) {
      read_failed = true;
    }
    try {
      co_await pipe_.write_all("HTTP/1.1 200 OK\r\n\r\n");
    } catch (const std::system_error&) {
      write_failed = true;
    }
  });
  EXPECT_TRUE(read_failed);
  EXPECT_TRUE(write_failed);
  pipe_.push("x", 1);
  EXPECT_EQ(pipe_.drop_pending(), 0u);  // nothing is taken after an abort
}

}  // namespace
}  // namespace zn::proxy

namespace zn::proxy {
namespace {

// A WebSocket over HTTP/2 (RFC 8441): the exchange's 101 opens the tunnel,
// every byte after it goes on as it is, close_write ends the stream; a
// reader and a writer waiting at once each wake for their own reason (one
// timer would have them cancel each other's wait for ever).
TEST_F(StreamPipeTest, ATunnelCarriesBytesBothWaysAtOnce) {
  pipe_.set_tunnel();
  std::string read;
  run([&]() -> asio::awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    co_await pipe_.write_all(
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n");
    EXPECT_EQ(sink_.heads, std::vector<int>{101});
    EXPECT_TRUE(pipe_.response_started());
    sink_.unsent_bytes = StreamPipe::kMaxUnsent + 1;  // the guest is not reading yet
    auto reader = [&]() -> asio::awaitable<void> {
      char buf[64];
      const size_t n = co_await pipe_.read_some(buf, sizeof buf);
      read.assign(buf, n);
    };
    auto writer = [&]() -> asio::awaitable<void> { co_await pipe_.write_all("\x81\x02hi"); };
    auto timer = std::make_shared<asio::steady_timer>(io_, 30ms);
    timer->async_wait([this, timer](asio::error_code) {
      pipe_.push("\x81\x82masked");
      sink_.unsent_bytes = 0;
      pipe_.wake();
    });
    co_await (reader() && writer());
    co_await pipe_.close_write();
  });
  EXPECT_EQ(read, "\x81\x82masked");
  EXPECT_EQ(sink_.body, "\x81\x02hi");
  EXPECT_TRUE(sink_.ended);
  EXPECT_TRUE(pipe_.response_complete());
}

// Without set_tunnel a 101 is an interim response the pipe skips (a plain
// request's stream never switches).
TEST_F(StreamPipeTest, WithoutATunnelA101IsSkipped) {
  run([&]() -> asio::awaitable<void> {
    co_await pipe_.write_all(
        "HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
  });
  EXPECT_EQ(sink_.heads, std::vector<int>{200});
  EXPECT_EQ(sink_.body, "ok");
}

}  // namespace
}  // namespace zn::proxy

namespace zn::proxy {
namespace {

// A chunked response's trailer fields end the stream as trailers (gRPC's
// status), not as data.
TEST_F(StreamPipeTest, TrailersEndTheStream) {
  run([&]() -> asio::awaitable<void> {
    co_await pipe_.write_all("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n");
    co_await pipe_.write_all("0\r\ngrpc-status: 0\r\n\r\n");
  });
  EXPECT_EQ(sink_.body, "ok");
  ASSERT_EQ(sink_.trailers.size(), 1u);
  EXPECT_EQ(sink_.trailers[0].value, "0");
  EXPECT_TRUE(sink_.ended);
  EXPECT_TRUE(pipe_.response_complete());
}

}  // namespace
}  // namespace zn::proxy
