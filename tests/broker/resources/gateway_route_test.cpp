#include "broker/resources/gateway_route.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zn::broker {
namespace {

const std::string kHandle = "cap:abcdefghijklmnopqrstuvwxyz234567";

TEST(GatewayRoute, ReadsEachShape) {
  auto kv = parse_gateway_route("/v1/kv/" + kHandle + "/a%20b/c?x=/v1/blob");
  ASSERT_TRUE(kv.matched);
  EXPECT_EQ(kv.kind, CapabilityKind::kKv);
  EXPECT_EQ(kv.handle, kHandle);
  EXPECT_EQ(kv.rest, "a%20b/c");  // as sent: decoded only for a resolved handle

  auto blob = parse_gateway_route("/v1/blob/cap%3a" + kHandle.substr(4) + "/");
  ASSERT_TRUE(blob.matched);
  EXPECT_EQ(blob.kind, CapabilityKind::kBlob);
  EXPECT_EQ(blob.handle, kHandle);
  EXPECT_EQ(blob.rest, "");

  auto sql = parse_gateway_route("/v1/sql/" + kHandle + "?");
  ASSERT_TRUE(sql.matched);
  EXPECT_EQ(sql.kind, CapabilityKind::kSql);

  for (auto [name, op] : {std::pair{"send", QueueOp::kSend}, std::pair{"receive", QueueOp::kReceive},
                          std::pair{"ack", QueueOp::kAck}}) {
    auto q = parse_gateway_route("/v1/queue/" + kHandle + "/" + name);
    ASSERT_TRUE(q.matched) << name;
    EXPECT_EQ(q.kind, CapabilityKind::kQueue);
    EXPECT_EQ(q.queue_op, op);
  }
}

TEST(GatewayRoute, RefusesOtherShapes) {
  for (const std::string& target : std::vector<std::string>{
           "", "/", "*", "v1/kv/" + kHandle + "/k", "/v1", "/v1/kv", "/v1/kv/" + kHandle,
           "/v1/sql/" + kHandle + "/", "/v1/sql/" + kHandle + "/x", "/v1/queue/" + kHandle,
           "/v1/queue/" + kHandle + "/purge", "/v1/queue/" + kHandle + "/send/", "/v2/kv/" + kHandle + "/k",
           "/v1/KV/" + kHandle + "/k", "/v1/kv/cap%3z" + kHandle.substr(5) + "/k",
           "https://cap.zeroness.internal/v1/kv/" + kHandle + "/k"}) {
    EXPECT_FALSE(parse_gateway_route(target).matched) << target;
  }
  EXPECT_EQ(parse_gateway_route("/v1/kv/" + kHandle).kind, CapabilityKind::kKv);  // known, for the audit
  EXPECT_FALSE(parse_gateway_route("/v1/list").kind.has_value());
}

TEST(GatewayRoute, HandleShape) {
  EXPECT_TRUE(well_formed_handle(kHandle));
  EXPECT_FALSE(well_formed_handle(kHandle.substr(0, 35)));
  EXPECT_FALSE(well_formed_handle(kHandle + "a"));
  EXPECT_FALSE(well_formed_handle("CAP:" + kHandle.substr(4)));
  EXPECT_FALSE(well_formed_handle("cap:abcdefghijklmnopqrstuvwxyz234561"));  // '1' is not base32
  EXPECT_FALSE(well_formed_handle("cap:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"));
  EXPECT_FALSE(well_formed_handle(""));
}

TEST(GatewayRoute, PercentDecodingIsStrictAndLeavesPlus) {
  EXPECT_EQ(percent_decode_path("a%20b+c%2Fd%2f"), "a b+c/d/");
  EXPECT_EQ(percent_decode_path("%00"), std::string(1, '\0'));
  EXPECT_EQ(percent_decode_path(""), "");
  for (const char* bad : {"%", "%2", "a%zz", "%g0", "%%"})
    EXPECT_EQ(percent_decode_path(bad), std::nullopt) << bad;
}

}  // namespace
}  // namespace zn::broker
