// The datapath outlives the process that loaded it: with userspace gone the
// TAP keeps denying, steered connections find no listener and are dropped,
// and a new loader re-adopts the pinned maps with their sessions.
// Teardown of a lab with the datapath leaves nothing behind.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "broker/session/datapath_entry.h"
#include "zn-lab/governed_lab.h"
#include "common/netns.h"
#include "integration/guest_commands.h"
#include "integration/lab_datapath.h"
#include "support/verdict_fixtures.h"
#include "userspace/datapath/bpffs.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/maps.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/lab/lab.h"

namespace zn::test {
namespace {

namespace fs = std::filesystem;

struct PinRootCleanup {
  std::string path;
  ~PinRootCleanup() {
    try {
      dp::remove_pin_root(path);
    } catch (...) {
    }
  }
};

TEST(FailClosed, DatapathKeepsDenyingAfterItsLoaderExits) {
  vmm::Lab lab = vmm::Lab::up(unique_lab_prefix("zf"));
  const vmm::LabGuest& g = lab.add_guest("g0");
  PinRootCleanup pins{lab::lab_pin_root(lab.prefix())};
  constexpr uint32_t kIdx = 3;

  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int rc = 0;
    try {
      NetnsScope in_host(lab.host_netns());
      auto datapath = dp::Datapath::load({pins.path});
      dp::DatapathMaps maps(datapath->map_fds());
      maps.set_listeners({});
      maps.put_session(g.tap_ifindex, broker::session_entry_for(g, kIdx));
      dp::TcAttachment::attach(g.tap_ifindex, datapath->ingress_prog_fd(), datapath->egress_prog_fd())
          .release();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loader: %s\n", e.what());
      rc = 1;
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  {
    NetnsScope in_host(lab.host_netns());
    EXPECT_TRUE(dp::TcAttachment::is_attached(g.tap_ifindex));
  }
  // No proxy runs: the steered connection must die, never pass.
  EXPECT_NE(run_in_netns(g.netns, "curl -s -m 3 http://198.18.0.10/").exit_code, 0);
  EXPECT_NE(run_in_netns(g.netns, "nc -z -w 2 198.18.0.10 22").exit_code, 0);
  EXPECT_NE(run_in_netns(g.netns, "ping -c 1 -W 1 198.18.255.1").exit_code, 0);

  // A new loader re-adopts the pinned maps: session and counters survived.
  NetnsScope in_host(lab.host_netns());
  auto again = dp::Datapath::load({pins.path});
  dp::DatapathMaps maps(again->map_fds());
  auto s = maps.get_session(g.tap_ifindex);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->session_idx, kIdx);
  auto c = maps.counters(kIdx);
  EXPECT_GT(c[ZN_DROP_NO_LISTENER], 0u);
  EXPECT_GT(c[ZN_DROP_TCP_PORT], 0u);
  EXPECT_GT(c[ZN_DROP_ICMP], 0u);
}

bool any_netns_with_prefix(const std::string& prefix) {
  if (!fs::exists("/run/netns")) return false;
  for (const auto& e : fs::directory_iterator("/run/netns"))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(Teardown, LeavesNoNamespaceLinkRulePinOrProcess) {
  std::string prefix, pin_root;
  std::optional<pid_t> pump;
  {
    LabDatapath env({"g0"}, 5);
    prefix = env.lab().prefix();
    pin_root = env.pin_root();
    pump = env.lab().pump_pid("g0");
    ASSERT_TRUE(pump.has_value());
    ASSERT_TRUE(fs::exists(pin_root));
    ASSERT_TRUE(any_netns_with_prefix(prefix));
  }
  EXPECT_FALSE(any_netns_with_prefix(prefix));
  EXPECT_FALSE(fs::exists(pin_root));
  EXPECT_FALSE(fs::exists("/run/zeroness-lab/" + prefix));
  EXPECT_NE(::kill(*pump, 0), 0) << "pump still running";
  // Nothing of ours leaked into the root namespace.
  std::ifstream dev("/proc/net/dev");
  std::stringstream links;
  links << dev.rdbuf();
  EXPECT_EQ(links.str().find("zn-tap"), std::string::npos);
}

}  // namespace
}  // namespace zn::test
