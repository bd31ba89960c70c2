// Upgrades: a well-formed WebSocket handshake is marked for the policy (a
// rule must allow it); a malformed one is a 400, any other upgrade a 403,
// both audited by the proxy.
#include "userspace/proxy/filters/upgrade_filter.h"

#include "filter_fixture.h"

namespace zn::proxy::filters {
namespace {

const std::string kWebSocketFields =
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

class UpgradeFilterTest : public FilterTest {};

TEST_F(UpgradeFilterTest, APlainRequestIsNoWebSocket) {
  Request& r = get("/x");
  ASSERT_TRUE(continues(UpgradeFilter().on_head(r, connection)));
  EXPECT_FALSE(r.websocket);
  EXPECT_FALSE(r.summary.websocket);
}

TEST_F(UpgradeFilterTest, AWellFormedWebSocketHandshakeIsMarkedForThePolicy) {
  Request& r = get("/chat", kWebSocketFields);
  ASSERT_TRUE(continues(UpgradeFilter().on_head(r, connection)));
  EXPECT_TRUE(r.websocket);
  EXPECT_TRUE(r.summary.websocket);
}

TEST_F(UpgradeFilterTest, AMalformedWebSocketHandshakeIsABadRequest) {
  const std::string variants[] = {
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 12\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: c2hvcnQ=\r\n",
      "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n",
      // A WebSocket offered beside another protocol is no clean handshake.
      "Upgrade: websocket, h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
  };
  for (const std::string& fields : variants) {
    Request& r = get("/chat", fields);
    const FilterResult result = UpgradeFilter().on_head(r, connection);
    EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse) << fields;
    EXPECT_EQ(result.refusal.status, 400) << fields;
    EXPECT_NE(result.audit_error.find("bad WebSocket handshake"), std::string::npos) << fields;
    EXPECT_FALSE(r.websocket);
  }
  EXPECT_EQ(counters.bad_requests.load(), 4u);
}

TEST_F(UpgradeFilterTest, AnyOtherUpgradeLeavesPerRequestPolicyAndIsRefused) {
  for (const std::string fields :
       {"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n",
        "Upgrade: spdy/3.1\r\nConnection: Upgrade\r\n", "Upgrade: TLS/1.2\r\nConnection: Upgrade\r\n"}) {
    Request& r = get("/x", fields);
    const FilterResult result = UpgradeFilter().on_head(r, connection);
    EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse) << fields;
    EXPECT_EQ(result.refusal.status, 403) << fields;
    EXPECT_EQ(result.audit_error, "protocol upgrade not allowed") << fields;
  }
  EXPECT_EQ(counters.denied.load(), 3u);
}

TEST_F(UpgradeFilterTest, NoWebSocketToTheBrokersOwnService) {
  facts.local = true;
  Request& r = get("/chat", kWebSocketFields);
  const FilterResult result = UpgradeFilter().on_head(r, connection);
  EXPECT_EQ(result.kind, FilterResult::Kind::kRefuse);
  EXPECT_EQ(result.refusal.status, 403);
}

}  // namespace
}  // namespace zn::proxy::filters
