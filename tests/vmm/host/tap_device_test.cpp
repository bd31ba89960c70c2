#include <gtest/gtest.h>
#include <linux/if_tun.h>
#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <system_error>

#include "common/netns.h"
#include "support/test_names.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/tap_device.h"

namespace zn::vmm {
namespace {

using testing::TestNetns;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(TapDevice, CreateConfigureDelete) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("tap");
  NetnsScope in_ns(ns.name());
  const zn::net::MacAddress mac{0x02, 0x7a, 0x6e, 0x01, 0x02, 0x03};
  int ifindex = create_tap("zt0", {mac, 1400, {"198.19.250.1/24", "2001:db8:19:fa::1/64"}});
  EXPECT_GT(ifindex, 1);

  RouteNetlink nl;
  auto link = nl.find_link("zt0");
  ASSERT_TRUE(link);
  EXPECT_EQ(link->ifindex, ifindex);
  EXPECT_EQ(link->mac, mac);
  EXPECT_EQ(link->mtu, 1400u);
  EXPECT_TRUE(link->up);
  auto addrs = nl.addresses(ifindex);
  EXPECT_TRUE(contains(addrs, "198.19.250.1/24"));
  EXPECT_TRUE(contains(addrs, "2001:db8:19:fa::1/64"));

  EXPECT_TRUE(delete_tap("zt0"));
  EXPECT_FALSE(nl.find_link("zt0"));
  EXPECT_FALSE(delete_tap("zt0"));
}

// The datapath checks neighbour discovery against the gateway's link-local,
// computed from the host MAC: the TAP must have exactly that one even where
// the namespace's default would make another (here: random).
TEST(TapDevice, LinkLocalIsEui64OfItsMacWhateverTheDefaultMode) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("tapll");
  NetnsScope in_ns(ns.name());
  {
    std::ofstream mode("/proc/sys/net/ipv6/conf/default/addr_gen_mode");
    mode << "3";  // IN6_ADDR_GEN_MODE_RANDOM
  }
  const zn::net::MacAddress mac{0x02, 0x7a, 0x6e, 0xff, 0x00, 0x09};
  int ifindex = create_tap("zt0", {mac, 1500, {}});
  zn::net::UniqueFd fd = open_tap("zt0");  // carrier: the kernel makes the link-local now
  const std::string want = zn::net::to_string(zn::net::eui64_link_local(mac)) + "/64";
  RouteNetlink nl;
  std::vector<std::string> addrs;
  for (int i = 0; i < 300; ++i) {
    addrs = nl.addresses(ifindex);
    if (std::any_of(addrs.begin(), addrs.end(),
                    [](const std::string& a) { return a.rfind("fe80:", 0) == 0; }))
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(contains(addrs, want)) << "want " << want << ", have "
                                     << (addrs.empty() ? "none" : addrs.front());
}

TEST(TapDevice, CreateRefusesExistingName) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("tapx");
  NetnsScope in_ns(ns.name());
  create_tap("zt0");
  EXPECT_THROW(create_tap("zt0"), std::system_error);
  EXPECT_THROW(create_tap("this-name-is-too-long"), std::invalid_argument);
}

TEST(TapDevice, OpenAttachesToPersistentTap) {
  ZN_REQUIRE_ROOT();
  TestNetns ns("tapo");
  NetnsScope in_ns(ns.name());
  create_tap("zt0");
  {
    zn::net::UniqueFd fd = open_tap("zt0");
    EXPECT_TRUE(fd);
    // Single-queue: a second attach while the first is open is refused.
    EXPECT_THROW(open_tap("zt0"), std::system_error);
  }
  EXPECT_TRUE(open_tap("zt0"));  // free again once closed
  EXPECT_THROW(open_tap("zt-missing"), std::system_error);
  EXPECT_FALSE(RouteNetlink().find_link("zt-missing"));  // and none left behind
}

}  // namespace
}  // namespace zn::vmm
