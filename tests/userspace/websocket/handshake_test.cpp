// The opening handshake as the proxy checks it: the guest's request (only
// exactly a WebSocket upgrade goes to policy) and the upstream's 101.
#include "userspace/websocket/handshake.h"

#include <gtest/gtest.h>

namespace zn::websocket {
namespace {

http::RequestHead parse(const std::string& text) {
  http::RequestHead head;
  const http::ParseResult r = http::parse_request_head(text, http::HttpLimits{}, head);
  EXPECT_EQ(r.state, http::ParseState::kDone) << r.error;
  return head;
}

http::ResponseHead parse_response(const std::string& text) {
  http::ResponseHead head;
  const http::ParseResult r = http::parse_response_head(text, http::HttpLimits{}, false, head);
  EXPECT_EQ(r.state, http::ParseState::kDone) << r.error;
  return head;
}

const std::string kKey = "dGhlIHNhbXBsZSBub25jZQ==";  // RFC 6455 1.3

std::string request(const std::string& fields, const std::string& method = "GET") {
  return method + " /chat HTTP/1.1\r\nHost: ws.example\r\n" + fields + "\r\n";
}
const std::string kGood = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + kKey +
                          "\r\nSec-WebSocket-Version: 13\r\n";

TEST(WebSocketHandshake, TheRfcExampleAccepts) {
  EXPECT_EQ(accept_for(kKey), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");  // RFC 6455 1.3
  const http::RequestHead head = parse(request(kGood));
  EXPECT_TRUE(asks_for_websocket(head));
  EXPECT_EQ(request_error(head), "");
  // Any case, Connection as a list.
  EXPECT_EQ(request_error(parse(request("upgrade: WebSocket\r\nconnection: keep-alive, upgrade\r\n"
                                        "sec-websocket-key: " +
                                        kKey + "\r\nsec-websocket-version: 13\r\n"))),
            "");
}

TEST(WebSocketHandshake, RefusesAnythingElse) {
  const std::string key = "Sec-WebSocket-Key: " + kKey + "\r\n";
  const std::string tail = "Sec-WebSocket-Version: 13\r\n";
  const std::string cases[] = {
      request(kGood, "POST"),
      request(kGood + "Content-Length: 2\r\n"),
      request("Upgrade: websocket, h2c\r\nConnection: Upgrade\r\n" + key + tail),
      request("Upgrade: websocket\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + key + tail),
      request("Upgrade: websocket\r\n" + key + tail),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\n" + tail),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\n" + key + key + tail),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: abc\r\n" + tail),
      // 16 bytes need 22 characters and "==", the last carrying 2 bits.
      request("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZR==\r\n" +
              tail),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25j*Q==\r\n" +
              tail),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\n" + key),
      request("Upgrade: websocket\r\nConnection: Upgrade\r\n" + key + "Sec-WebSocket-Version: 8\r\n"),
  };
  for (const std::string& text : cases) EXPECT_NE(request_error(parse(text)), "") << text;
  // HTTP/1.0 cannot upgrade.
  http::RequestHead old = parse("GET / HTTP/1.0\r\nHost: ws.example\r\n" + kGood + "\r\n");
  EXPECT_NE(request_error(old), "");
  // h2c is not WebSocket at all: the proxy refuses it as an upgrade.
  EXPECT_FALSE(asks_for_websocket(parse(request("Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n"))));
}

TEST(WebSocketHandshake, TheUpstreamMustSwitchToThisKey) {
  const std::string ok =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
  EXPECT_EQ(response_error(parse_response(ok), kKey), "");
  EXPECT_NE(response_error(parse_response(ok), "AAAAAAAAAAAAAAAAAAAAAA=="), "");
  const std::string extension =
      ok.substr(0, ok.size() - 2) + "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n";
  EXPECT_NE(response_error(parse_response(extension), kKey), "");
  EXPECT_NE(response_error(
                parse_response("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"),
                kKey),
            "");
  EXPECT_NE(response_error(parse_response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), kKey), "");
}

TEST(WebSocketHandshake, TheUpstreamRequestCarriesNoExtensionOffer) {
  http::ForwardedRequest forwarded;
  forwarded.target = "/chat?x=1";
  forwarded.headers = {{"Sec-WebSocket-Key", kKey},
                       {"Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits"},
                       {"Sec-WebSocket-Version", "13"},
                       {"Authorization", "Bearer t"}};
  const std::string head = upgrade_request_head(forwarded, "ws.example");
  EXPECT_EQ(head, "GET /chat?x=1 HTTP/1.1\r\nHost: ws.example\r\nSec-WebSocket-Key: " + kKey +
                      "\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer t\r\n"
                      "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_EQ(switching_head({{"Sec-WebSocket-Accept", "x"}, {"Content-Length", "5"}}),
            "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: x\r\nConnection: Upgrade\r\nUpgrade: "
            "websocket\r\n\r\n");
}

}  // namespace
}  // namespace zn::websocket
