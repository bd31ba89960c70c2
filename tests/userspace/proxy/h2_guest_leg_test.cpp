// One HTTP/2 stream as the exchange's guest leg (h2_guest_leg.h), against a
// real nghttp2 client in memory (tests/userspace/h2/h2_peer.h): the request
// is the stream's checked head and its DATA as it comes (never text parsed
// back), the answer reaches the client as fields, DATA and trailers; a
// deadline cancels a wait cleanly; a guest that takes nothing holds the
// writer back; a stream the guest reset ends every wait; a WebSocket's
// tunnel carries bytes both ways.
#include "userspace/proxy/h2_guest_leg.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../h2/h2_peer.h"
#include "../h2/session_fixture.h"
#include "userspace/h2/stream_request.h"

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;
using h2::test::Fields;

class H2GuestLegTest : public ::testing::Test {
 protected:
  H2GuestLegTest() : socket_(io_), client_(h2::test::NgPeer::Role::kClient) {
    h2::ServerOptions o;
    o.manual_window_updates = true;
    o.enable_extended_connect = true;
    server_ = std::make_unique<h2::H2ServerSession>(o);
  }

  // Opens a stream whose request stays open (no END_STREAM) from the
  // client, after the settings are exchanged.
  void open_streaming(const Fields& fields) {
    pump();
    std::vector<nghttp2_nv> nva;
    for (const auto& [n, v] : fields)
      nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                     reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                     NGHTTP2_NV_FLAG_NONE});
    id_ = nghttp2_submit_headers(client_.session(), NGHTTP2_FLAG_NONE, -1, nullptr, nva.data(), nva.size(),
                                 nullptr);
    ASSERT_GT(id_, 0);
    make_leg();
  }
  // Opens a stream from the client and makes its leg (the way the
  // connection does: the codec's fields through to_request_head).
  void open(const Fields& fields, std::optional<std::string> body = std::nullopt) {
    id_ = client_.request(fields, std::move(body));
    make_leg();
  }
  void make_leg() {
    pump();
    for (auto& h : h2::test::of<h2::RequestHeaders>(ex_.events)) {
      h2::StreamRequestResult r = h2::to_request_head(h, "example.com", http::HttpLimits{});
      ASSERT_TRUE(r) << r.reason;
      leg_ = std::make_unique<H2GuestLeg>(
          *server_, h.stream_id, [this] { ++kicks_; }, socket_, std::move(r.head),
          std::chrono::milliseconds(500), dog_, budget_);
      if (h.end_stream) leg_->end_request();
    }
    ASSERT_TRUE(leg_);
    deliver();
  }
  // A leg for a stream whose request is still coming (its DATA pushed by the
  // test), made from hand-built fields: the codec would itself refuse some
  // of what these tests push (DATA past a content-length), and the leg must
  // hold without it.
  void open_unended(std::vector<h2::Field> fields) {
    h2::RequestHeaders h;
    h.stream_id = 1;
    h.method = "POST";
    h.scheme = "https";
    h.authority = "example.com";
    h.path = "/up";
    h.headers = std::move(fields);
    h2::StreamRequestResult r = h2::to_request_head(h, "example.com", http::HttpLimits{});
    ASSERT_TRUE(r) << r.reason;
    leg_ = std::make_unique<H2GuestLeg>(
        *server_, h.stream_id, [this] { ++kicks_; }, socket_, std::move(r.head),
        std::chrono::milliseconds(500), dog_, budget_);
  }
  // Bytes both ways until both sides are quiet.
  void pump() { ex_.pump(*server_, client_); }
  // What the stream received (its DATA) into the leg, as the connection does.
  void deliver() {
    for (auto& e : ex_.events) {
      if (auto* d = std::get_if<h2::RequestData>(&e)) {
        leg_->push(std::move(d->bytes));
        if (d->end_stream) leg_->end_request();
      }
    }
    ex_.events.clear();
  }
  // Runs `body` as a coroutine on the loop until it and everything it woke
  // are done.
  void run(std::function<asio::awaitable<void>()> body) {
    bool done = false;
    std::exception_ptr failed;
    dog_.spawn(io_.get_executor(), body(), [&](std::exception_ptr e) {
      failed = e;
      done = true;
    });
    io_.run_for(5s);
    io_.restart();
    ASSERT_TRUE(done) << "the coroutine never finished";
    if (failed) std::rethrow_exception(failed);
  }
  const h2::test::NgPeer::StreamSeen& seen() { return client_.streams[id_]; }
  std::string seen_field(const std::string& name) {
    for (const auto& [n, v] : seen().headers)
      if (n == name) return v;
    return "<none>";
  }

  asio::io_context io_;
  Watchdog dog_{io_.get_executor()};  // the leg's deadlines, in the thread run() starts
  asio::ip::tcp::socket socket_;
  h2::test::NgPeer client_;
  std::unique_ptr<h2::H2ServerSession> server_;
  h2::test::ServerExchange ex_;
  UnsentBudget budget_;  // before leg_: the leg leaves it when it goes
  std::unique_ptr<H2GuestLeg> leg_;
  int32_t id_ = 0;
  int kicks_ = 0;
};

Fields post(const std::string& path) {
  return {{":method", "POST"}, {":scheme", "https"}, {":authority", "example.com"}, {":path", path}};
}

TEST_F(H2GuestLegTest, TheHeadIsTheStreamsOnceAndItsTextIsForTheScreenOnly) {
  Fields f = h2::test::get_request("/a?b=1");
  f.push_back({"x-token", "abc"});
  open(f);
  http::RequestHead head;
  HeadIn first, second;
  run([&]() -> asio::awaitable<void> {
    first = co_await leg_->next_head(head);
    http::RequestHead again;
    second = co_await leg_->next_head(again);
  });
  EXPECT_EQ(first.state, HeadIn::State::kHead);
  EXPECT_EQ(head.method, "GET");
  EXPECT_EQ(head.target, "/a?b=1");
  EXPECT_EQ(head.host, "example.com");
  ASSERT_NE(head.find("x-token"), nullptr);
  EXPECT_EQ(second.state, HeadIn::State::kEnd);  // a stream carries one request
  EXPECT_EQ(leg_->input().substr(0, leg_->head_bytes()),
            "GET /a?b=1 HTTP/1.1\r\nhost: example.com\r\nx-token: abc\r\n\r\n");
}

TEST_F(H2GuestLegTest, TheBodyIsTheStreamsDataAsItComesThenEnds) {
  open(post("/up"), std::string("hello world"));
  http::RequestHead head;
  std::string body;
  bool done = false;
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    while (!done) done = co_await leg_->read_body(head, body);
  });
  EXPECT_EQ(head.framing, http::BodyFraming::kChunked);  // no content-length: until END_STREAM
  EXPECT_EQ(body, "hello world");
  EXPECT_GT(kicks_, 0);  // taken: the window goes back to the guest
}

// A body that says its length and brings more (or less) is malformed.
TEST_F(H2GuestLegTest, DataPastTheContentLengthIsABadBody) {
  const std::vector<h2::Field> f = {{"content-length", "3"}};
  open_unended(f);
  http::RequestHead head;
  bool bad = false, short_bad = false;
  std::string body;
  leg_->push("abcd");
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    try {
      co_await leg_->read_body(head, body);
    } catch (const BadRequestBody&) {
      bad = true;
    }
  });
  EXPECT_TRUE(bad);
  // Positive control and its short variant on a fresh stream.
  open_unended(f);
  leg_->push("ab");
  leg_->end_request();
  body.clear();
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    try {
      co_await leg_->read_body(head, body);
    } catch (const BadRequestBody&) {
      short_bad = true;
    }
  });
  EXPECT_TRUE(short_bad);
  open_unended(f);
  leg_->push("abc");
  leg_->end_request();
  body.clear();
  bool done = false;
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    done = co_await leg_->read_body(head, body);
  });
  EXPECT_TRUE(done);
  EXPECT_EQ(body, "abc");
}

// The exchange's deadlines work on a stream: a body read that waits too long
// is cancelled, and the next read is served as before.
TEST_F(H2GuestLegTest, AWaitingReadTimesOutAndTheLegGoesOn) {
  open_unended({});
  http::RequestHead head;
  bool timed_out = false;
  std::string body;
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    try {
      co_await leg_->read_body(head, body);  // the leg's idle bound: 500 ms
    } catch (const std::system_error& e) {
      timed_out = e.code() == std::errc::timed_out;
    }
    leg_->push("late");
    co_await leg_->read_body(head, body);
  });
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(body, "late");
}

TEST_F(H2GuestLegTest, APreviewWaitsBrieflyForTheFirstDataAndTakesNothing) {
  open_unended({{"content-length", "5"}});
  http::RequestHead head;
  std::string early, late, body;
  run([&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    early = co_await leg_->preview_body(head, 256, 20ms);  // nothing yet
    auto timer = std::make_shared<asio::steady_timer>(io_, 10ms);
    timer->async_wait([this, timer](asio::error_code) {
      leg_->push("hello");
      leg_->end_request();
    });
    late = co_await leg_->preview_body(head, 256, 2s);
    co_await leg_->read_body(head, body);
  });
  EXPECT_EQ(early, "");
  EXPECT_EQ(late, "hello");
  EXPECT_EQ(body, "hello");  // the preview took none of it
}

TEST_F(H2GuestLegTest, TheAnswerReachesTheGuestAsFieldsDataAndTrailers) {
  open(h2::test::get_request("/x"));
  http::ResponseHead resp;
  resp.status = 201;
  resp.headers = {{"content-type", "text/plain"}, {"x-up", "1"}};
  resp.framing = http::BodyFraming::kChunked;
  run([&]() -> asio::awaitable<void> {
    http::RequestHead head;
    co_await leg_->next_head(head);
    EXPECT_FALSE(leg_->response_head(resp, true));  // a stream never closes the connection
    leg_->response_data("hello ");
    co_await leg_->flush();
    leg_->response_data("world");
    leg_->response_end({{"grpc-status", "0"}});
    co_await leg_->flush();
  });
  pump();
  EXPECT_EQ(seen_field(":status"), "201");
  EXPECT_EQ(seen_field("x-up"), "1");
  EXPECT_EQ(seen_field("grpc-status"), "0");
  EXPECT_EQ(seen().body, "hello world");
  EXPECT_TRUE(seen().ended);
  EXPECT_TRUE(leg_->response_complete());
}

TEST_F(H2GuestLegTest, ABodilessAnswerEndsTheStreamAtItsHead) {
  open(h2::test::get_request("/x"));
  http::ResponseHead resp;
  resp.status = 204;
  run([&]() -> asio::awaitable<void> {
    http::RequestHead head;
    co_await leg_->next_head(head);
    leg_->response_head(resp, false);
    co_await leg_->flush();
  });
  pump();
  EXPECT_EQ(seen_field(":status"), "204");
  EXPECT_TRUE(seen().ended);
  EXPECT_TRUE(leg_->response_complete());
}

TEST_F(H2GuestLegTest, TheProxysOwnAnswerSaysWhy) {
  open(h2::test::get_request("/x"));
  run([&]() -> asio::awaitable<void> {
    // Named: g++ 12 destroys a co_await expression's temporaries twice.
    const ProxyAnswer refusal{403, "text/plain; charset=utf-8", "zeroness: no\n", false};
    co_await leg_->answer(refusal, nullptr, true);
  });
  pump();
  EXPECT_EQ(seen_field(":status"), "403");
  EXPECT_EQ(seen_field("content-type"), "text/plain; charset=utf-8");
  EXPECT_EQ(seen_field("content-length"), "13");
  EXPECT_EQ(seen().body, "zeroness: no\n");
  EXPECT_TRUE(seen().ended);
  EXPECT_TRUE(leg_->response_complete());
}

// A guest that takes nothing holds the writer past the stream's bound
// (unsent_budget.h), as a full socket would; once it reads, the writer goes on.
TEST_F(H2GuestLegTest, AWriterWaitsWhileTheGuestTakesNothing) {
  open(h2::test::get_request("/big"));
  http::ResponseHead resp;
  resp.status = 200;
  resp.framing = http::BodyFraming::kUntilClose;
  bool flushed = false;
  // Named: a coroutine lambda's captures live in the lambda, not its frame.
  auto writer = [&]() -> asio::awaitable<void> {
    http::RequestHead head;
    co_await leg_->next_head(head);
    leg_->response_head(resp, false);
    leg_->response_data(std::string(UnsentBudget::Bounds{}.stream + 100000, 'x'));
    co_await leg_->flush();
    flushed = true;
    leg_->response_end({});
  };
  dog_.spawn(io_.get_executor(), writer());
  io_.run_for(100ms);
  io_.restart();
  EXPECT_FALSE(flushed);  // nothing taken: held
  // The guest reads (its window opens as it takes DATA).
  for (int i = 0; i < 50 && !flushed; ++i) {
    pump();
    nghttp2_session_consume_connection(client_.session(), 0);
    leg_->wake();
    io_.run_for(10ms);
    io_.restart();
  }
  EXPECT_TRUE(flushed);
}

TEST_F(H2GuestLegTest, AResetStreamEndsEveryWait) {
  open_unended({});
  http::RequestHead head;
  bool read_threw = false;
  auto reader = [&]() -> asio::awaitable<void> {
    co_await leg_->next_head(head);
    std::string body;
    try {
      co_await leg_->read_body(head, body);
    } catch (const std::system_error&) {
      read_threw = true;
    }
  };
  dog_.spawn(io_.get_executor(), reader());
  io_.run_for(20ms);
  io_.restart();
  EXPECT_FALSE(read_threw);
  leg_->abort();
  io_.run_for(100ms);
  EXPECT_TRUE(read_threw);
  EXPECT_TRUE(leg_->failed());
}

// RFC 8441: the upstream's 101 is a 200 on the stream, which then carries
// the WebSocket's bytes both ways.
TEST_F(H2GuestLegTest, ATunnelCarriesBytesBothWays) {
  open_streaming({{":method", "CONNECT"},
                  {":protocol", "websocket"},
                  {":scheme", "https"},
                  {":authority", "example.com"},
                  {":path", "/ws"}});
  http::ResponseHead switched;
  switched.status = 101;
  switched.headers = {{"upgrade", "websocket"}, {"connection", "upgrade"}, {"sec-websocket-accept", "k"}};
  std::string from_guest;
  run([&]() -> asio::awaitable<void> {
    http::RequestHead head;
    co_await leg_->next_head(head);
    std::string pending;
    ByteStream* tunnel = co_await leg_->open_tunnel(switched, pending);
    co_await tunnel->write_all("down");
    leg_->push("up");
    char buf[8];
    const size_t n = co_await tunnel->read_some(buf, sizeof buf);
    from_guest.assign(buf, n);
    co_await tunnel->close_write();
  });
  pump();
  EXPECT_EQ(seen_field(":status"), "200");
  EXPECT_EQ(seen_field("sec-websocket-accept"), "<none>");
  EXPECT_EQ(seen().body, "down");
  EXPECT_TRUE(seen().ended);
  EXPECT_TRUE(leg_->response_complete());
  EXPECT_EQ(from_guest, "up");
}

}  // namespace
}  // namespace zn::proxy
