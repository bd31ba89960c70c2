#include <signal.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

#include "common/netns.h"
#include "support/test_names.h"
#include "support/udp_probe.h"
#include "vmm/lab/frame_pump.h"
#include "vmm/host/named_netns.h"
#include "vmm/lab/pump_process.h"
#include "vmm/host/tap_device.h"

namespace zn::vmm {
namespace {

using testing::TestNetns;

// Two namespaces, each with a TAP "zt0" on 198.19.250.0/24 and
// 2001:db8:19:fa::/64, and nothing connecting them but a pump.
class FramePumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::root()) GTEST_SKIP() << "needs root";
    a_ = std::make_unique<TestNetns>("pa");
    b_ = std::make_unique<TestNetns>("pb");
    tap_a_ = make_tap(a_->name(), 1);
    tap_b_ = make_tap(b_->name(), 2);
  }

  static zn::net::UniqueFd make_tap(const std::string& ns, int host) {
    NetnsScope in_ns(ns);
    create_tap("zt0", {zn::net::MacAddress{0x02, 0x7a, 0x6e, 0xee, 0, static_cast<std::uint8_t>(host)},
                       1500,
                       {"198.19.250." + std::to_string(host) + "/24",
                        "2001:db8:19:fa::" + std::to_string(host) + "/64"}});
    return open_tap("zt0");
  }

  bool a_reaches_b(const std::string& b_ip) { return testing::udp_round_trip(a_->name(), b_->name(), b_ip); }

  std::unique_ptr<TestNetns> a_, b_;
  zn::net::UniqueFd tap_a_, tap_b_;
};

TEST_F(FramePumpTest, ThreadCarriesFramesBothWaysUntilStopped) {
  {
    FramePump pump(std::move(tap_a_), std::move(tap_b_));
    EXPECT_TRUE(a_reaches_b("198.19.250.2"));
    EXPECT_TRUE(a_reaches_b("2001:db8:19:fa::2"));
  }
  // Pump gone, fds closed: the wire is cut (and the ARP entry must be refreshed
  // too, so a stale cache cannot make this pass).
  run_in_netns(a_->name(), {"ip", "neigh", "flush", "all"});
  EXPECT_FALSE(a_reaches_b("198.19.250.2"));
}

TEST_F(FramePumpTest, ProcessCarriesFramesAndStopsOnRequest) {
  pid_t pid = spawn_pump_process(tap_a_.get(), tap_b_.get());
  tap_a_.reset();
  tap_b_.reset();
  EXPECT_TRUE(pump_process_running(pid));
  EXPECT_TRUE(a_reaches_b("198.19.250.2"));
  EXPECT_TRUE(stop_pump_process(pid));
  EXPECT_FALSE(pump_process_running(pid));
  // Reaped, not left a zombie (kill(pid, 0) succeeds on a zombie).
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_FALSE(stop_pump_process(pid));
}

// A pump that dies by itself is reaped by the first look that finds it gone,
// never left a zombie: looked at again and again while it dies.
TEST_F(FramePumpTest, APumpThatDiesIsReapedNotLeftAZombie) {
  for (int i = 0; i < 20; ++i) {
    pid_t pid = spawn_pump_process(tap_a_.get(), tap_b_.get());
    ASSERT_TRUE(pump_process_running(pid));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    while (pump_process_running(pid)) {
    }
    EXPECT_EQ(::kill(pid, 0), -1) << "left a zombie";
    EXPECT_EQ(errno, ESRCH);
  }
}

}  // namespace
}  // namespace zn::vmm
