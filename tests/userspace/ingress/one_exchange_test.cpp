#include "userspace/ingress/one_exchange.h"

#include <gtest/gtest.h>

namespace zn::ingress {
namespace {

http::RequestHead parsed(const std::string& text, size_t* consumed = nullptr) {
  http::RequestHead head;
  const http::ParseResult r = http::parse_request_head(text, http::HttpLimits{}, head);
  EXPECT_EQ(r.state, http::ParseState::kDone) << text;
  if (consumed) *consumed = r.consumed;
  return head;
}

TEST(OneExchange, TheHeadAsksForCloseWhateverTheClientSaid) {
  EXPECT_EQ(rewrite_head("GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
                         "proxy-connection: keep-alive\r\nAccept: */*\r\n\r\n",
                         "", "close"),
            "GET / HTTP/1.1\r\nHost: h\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  // A response: the cookie right after the status line.
  EXPECT_EQ(rewrite_head("HTTP/1.1 200 OK\r\nCONNECTION: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
                         "Set-Cookie: a=b\r\n", "close"),
            "HTTP/1.1 200 OK\r\nSet-Cookie: a=b\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  // A 101 keeps its own Connection (upgrade).
  EXPECT_EQ(
      rewrite_head("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
                   "", std::nullopt),
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
}

// The body ends where its own head says: a second request behind it (in the
// same read) is left over, never part of what goes to the guest.
TEST(OneExchange, ALengthBodyEndsAtItsLengthAndLeavesThePipelinedRest) {
  const std::string second =
      "GET /second HTTP/1.1\r\nZn-Ticket: znt_x\r\nCookie: zn_ingress_80=znb_y\r\n\r\n";
  size_t consumed = 0;
  const std::string text = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" + second;
  const http::RequestHead head = parsed(text, &consumed);
  RequestBodyRelay body(head, http::HttpLimits{});
  std::string rest = text.substr(consumed);
  // Split reads: one byte at a time.
  std::string out;
  size_t fed = 0;
  while (!body.done()) {
    const RequestBodyRelay::Step step = body.feed(std::string_view(rest).substr(fed, 1));
    ASSERT_FALSE(step.error);
    fed += step.consumed;
    out += step.out;
  }
  EXPECT_EQ(out, "hello");
  EXPECT_EQ(rest.substr(fed), second);
  // Done: nothing more is taken.
  EXPECT_EQ(body.feed(rest.substr(fed)).consumed, 0u);
}

TEST(OneExchange, AChunkedBodyIsFramedAgainAndEndsAtItsLastChunk) {
  const std::string second = "GET /second HTTP/1.1\r\n\r\n";
  size_t consumed = 0;
  const std::string text =
      "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n" +
      second;
  const http::RequestHead head = parsed(text, &consumed);
  RequestBodyRelay body(head, http::HttpLimits{});
  const RequestBodyRelay::Step step = body.feed(std::string_view(text).substr(consumed));
  ASSERT_FALSE(step.error);
  EXPECT_TRUE(step.done);
  // No extension, no trailer: the payload, framed by us.
  EXPECT_EQ(step.out, http::chunk_frame("abcde") + std::string(http::kLastChunk));
  EXPECT_EQ(text.substr(consumed + step.consumed), second);
}

TEST(OneExchange, AMalformedChunkIsAnError) {
  size_t consumed = 0;
  const std::string text = "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
  const http::RequestHead head = parsed(text, &consumed);
  RequestBodyRelay body(head, http::HttpLimits{});
  EXPECT_TRUE(body.feed(std::string_view(text).substr(consumed)).error);
}

TEST(OneExchange, ABodilessRequestIsDoneAtOnce) {
  const http::RequestHead head = parsed("GET / HTTP/1.1\r\nHost: h\r\n\r\n");
  RequestBodyRelay body(head, http::HttpLimits{});
  EXPECT_TRUE(body.done());
  const RequestBodyRelay::Step step = body.feed("GET /next HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(step.done);
  EXPECT_EQ(step.consumed, 0u);
  EXPECT_EQ(step.out, "");
}

}  // namespace
}  // namespace zn::ingress
