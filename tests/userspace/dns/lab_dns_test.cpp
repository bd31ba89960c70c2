// Real guest traffic: the datapath on a lab TAP steers dig's packets, sent to
// public resolvers the guest names, to the responder in the lab's host
// namespace, which answers from 8.8.8.8:53 through TC egress. Needs root.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/netns.h"
#include "support/dns_messages.h"
#include "integration/guest_commands.h"
#include "integration/lab_datapath.h"
#include "userspace/dns/responder.h"
#include "userspace/dns/static_resolver.h"
#include "userspace/net/address.h"

namespace zn::dns::test {
namespace {

using zn::test::LabDatapath;

// Not LabDatapath's stand-in DNS port (15053), which its own sockets hold.
constexpr uint16_t kResponderPort = 15153;

class LabDnsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    // A setup failure must fail every test, not skip it (gtest 1.12 skips a
    // suite whose SetUpTestSuite throws): keep the reason for SetUp.
    try {
      set_up_lab();
    } catch (const std::exception& e) {
      setup_error_ = e.what();
      TearDownTestSuite();
    }
  }
  static void set_up_lab() {
    env_ = new LabDatapath({"g0"}, 1);
    policy_ = new RecordingPolicy();
    const auto& g = env_->guest(0);
    policy_->sessions = {{zn::net::to_string(g.guest_ip4), "g0"}, {zn::net::to_string(g.guest_ip6), "g0"}};
    resolver_ = new StaticResolver(
        {{"api.allowed.test",
          {*zn::net::IpAddress::parse("198.18.0.10"), *zn::net::IpAddress::parse("2001:db8:18::10")}}});
    dp::Listeners listeners;  // 127.0.0.1 and ::1
    listeners.proxy_port = LabDatapath::kProxyPort;
    listeners.dns_port = kResponderPort;
    NetnsScope in_host(env_->lab().host_netns());
    responder_ = new Responder(responder_config_for(listeners), *policy_, *resolver_);
    env_->maps().set_listeners(listeners);
  }
  static void TearDownTestSuite() {
    delete responder_;
    delete resolver_;
    delete policy_;
    delete env_;
    responder_ = nullptr;
    resolver_ = nullptr;
    policy_ = nullptr;
    env_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << "suite setup failed: " << setup_error_;
    if (!env_) GTEST_SKIP() << "needs root";
  }
  static zn::test::CommandResult dig(const std::string& args) {
    return zn::test::run_in_netns(env_->guest(0).netns, "dig +tries=1 +time=3 " + args);
  }

  static inline std::string setup_error_;
  static LabDatapath* env_;
  static RecordingPolicy* policy_;
  static StaticResolver* resolver_;
  static Responder* responder_;
};
LabDatapath* LabDnsTest::env_ = nullptr;
RecordingPolicy* LabDnsTest::policy_ = nullptr;
StaticResolver* LabDnsTest::resolver_ = nullptr;
Responder* LabDnsTest::responder_ = nullptr;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST_F(LabDnsTest, AllowedNameFromHardcodedResolverIsAnswered) {
  auto r = dig("@8.8.8.8 api.allowed.test");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "status: NOERROR")) << r.output;
  EXPECT_TRUE(has(r.output, "198.18.0.10")) << r.output;
  EXPECT_TRUE(has(r.output, "SERVER: 8.8.8.8#53")) << r.output;
  bool recorded = false;
  for (const auto& a : policy_->answers()) recorded |= a.session == "g0" && a.qname == "api.allowed.test";
  EXPECT_TRUE(recorded);
}

TEST_F(LabDnsTest, DeniedNameIsNxdomainAndNeverResolved) {
  const uint64_t calls = resolver_->calls();
  auto r = dig("@8.8.8.8 secret-data.evil.test");
  EXPECT_TRUE(has(r.output, "status: NXDOMAIN")) << r.output;
  EXPECT_TRUE(has(r.output, "SERVER: 8.8.8.8#53")) << r.output;
  EXPECT_EQ(resolver_->calls(), calls);
  bool reported = false;
  for (const auto& d : policy_->denials())
    reported |= d.session == "g0" && d.qname == "secret-data.evil.test";
  EXPECT_TRUE(reported);
}

TEST_F(LabDnsTest, TcpQueryIsAnswered) {
  auto r = dig("+tcp @9.9.9.9 api.allowed.test");
  EXPECT_TRUE(has(r.output, "198.18.0.10")) << r.output;
  EXPECT_TRUE(has(r.output, "SERVER: 9.9.9.9#53")) << r.output;
  EXPECT_TRUE(has(r.output, "(TCP)")) << r.output;
}

TEST_F(LabDnsTest, Ipv6ResolverIsAnswered) {
  auto r = dig("@2001:4860:4860::8888 api.allowed.test AAAA");
  EXPECT_TRUE(has(r.output, "status: NOERROR")) << r.output;
  EXPECT_TRUE(has(r.output, "2001:db8:18::10")) << r.output;
  EXPECT_TRUE(has(r.output, "SERVER: 2001:4860:4860::8888#53")) << r.output;
  auto tcp = dig("+tcp @2001:4860:4860::8888 api.allowed.test");
  EXPECT_TRUE(has(tcp.output, "198.18.0.10")) << tcp.output;
}

TEST_F(LabDnsTest, CountersSeeTheGuestTraffic) {
  const auto before = responder_->counters();
  dig("@1.1.1.1 api.allowed.test");
  dig("@1.1.1.1 blocked.evil.test");
  auto c = responder_->counters();
  EXPECT_EQ(c.queries - before.queries, 2u);
  EXPECT_EQ(c.allowed - before.allowed, 1u);
  EXPECT_EQ(c.denied - before.denied, 1u);
  EXPECT_EQ(c.refused, 0u);  // the guest's addresses map to its session
  EXPECT_EQ(c.send_errors, 0u);
}

}  // namespace
}  // namespace zn::dns::test
