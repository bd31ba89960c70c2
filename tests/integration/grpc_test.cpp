// gRPC through interception (issue 17's HTTP/2 both ways, and trailers):
// python3-grpcio as the guest's client and as the lab's upstream
// (grpc.example, 198.18.0.16:443). Each call is one HTTP/2 stream decided by
// the method's path, with the rule's identity; the upstream's trailers
// (grpc-status, metadata) reach the guest, scrubbed.
#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

class GrpcTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    issue_upstream_cert("grpc.example");
    config["dns_static"]["grpc.example"] = {"198.18.0.16"};
    config["proxy_http2"] = true;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string inet = lab_->inet_netns();
    ASSERT_EQ(run_in_netns(inet, "ip addr add 198.18.0.16/32 dev lo").exit_code, 0);
    servers_.push_back(spawn_in_inet({"/usr/bin/python3", ZN_GRPC_UPSTREAM, "198.18.0.16:443",
                                      p("grpc.example.pem"), p("grpc.example.key")}));
    ASSERT_TRUE(inet_accepts("198.18.0.16 443")) << "the gRPC server never accepted";
    json r = call("session.update", {{"id", "user-1"}, {"policy", grpc_policy()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    ASSERT_EQ(dig("grpc.example"), "198.18.0.16\n");
  }
  static std::string grpc_policy() {
    return std::string(R"({"policy":{"allow":[
        {"host":"grpc.example","methods":["POST"],"paths":["/zn.Echo/Who","/zn.Echo/Reflect","/zn.Echo/Fail"],
         "identity":"cap:stripe"},
        {"host":"grpc.example","methods":["POST"],"paths":["/zn.Echo/Echo"]}]},
      "resources":{"stripe":{"accessToken":")") +
           kSecret + R"("}}})";
  }
  std::string grpc(const std::string& method, const std::string& request) {
    return guest("GRPC_VERBOSITY=NONE timeout 30 /usr/bin/python3 " ZN_GRPC_CLIENT " 198.18.0.16:443 " +
                 p("guest-trust.pem") + " " + method + " " + request + " 2>&1")
        .output;
  }
};

// Calls allowed by path, with the identity on the one that has it; a
// method no rule names is refused on its stream (HTTP 403: the client's
// PERMISSION_DENIED); the upstream's own error status arrives in trailers.
TEST_F(GrpcTest, CallsAreDecidedByMethodWithTheirIdentity) {
  EXPECT_EQ(grpc("/zn.Echo/Who", "x"), "ok auth:" + sha256_hex(std::string("Bearer ") + kSecret) + "\n");
  EXPECT_EQ(grpc("/zn.Echo/Echo", "hello"), "ok hello\n");
  const std::string denied = grpc("/zn.Echo/Admin", "x");
  // (grpcio would log that the refusal's content-type is not gRPC's.)
  EXPECT_EQ(denied, "error PERMISSION_DENIED Received http2 header with status: 403\n");
  EXPECT_EQ(grpc("/zn.Echo/Fail", "x"), "error NOT_FOUND no such thing\n");
  // Each call's record is written once its answer is out: wait for the last.
  const std::string events = egress_events({"/zn.Echo/Admin", "/zn.Echo/Fail"});
  EXPECT_NE(events.find("\"path\":\"/zn.Echo/Admin\""), std::string::npos) << events;
  EXPECT_EQ(count(events, "\"identity\":\"stripe\""), 2u) << events;  // Who, Fail
}

// The upstream hands the credential back in trailing metadata: the guest
// gets the call's answer and a scrubbed trailer.
TEST_F(GrpcTest, AReflectedSecretInTrailersIsScrubbed) {
  const std::string r = grpc("/zn.Echo/Reflect", "x");
  EXPECT_EQ(r.rfind("ok reflected x-echo=", 0), 0u) << r;
  EXPECT_EQ(r.find(kSecret), std::string::npos) << r;
  EXPECT_NE(audit_events("secret:reflected", {"secret:reflected"}).find("secret:reflected"),
            std::string::npos);
}

}  // namespace
}  // namespace zn::test
