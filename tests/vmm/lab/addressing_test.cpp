#include <gtest/gtest.h>

#include "userspace/net/address.h"
#include "vmm/lab/addressing.h"

namespace zn::vmm {
namespace {

TEST(LabAddressing, GuestPlanFollowsIndex) {
  LabGuest g = lab_plan::guest("zn", "g1", 1);
  EXPECT_EQ(g.netns, "zn-g1");
  EXPECT_EQ(g.tap_name, "zn-tap1");
  EXPECT_EQ(zn::net::to_string(g.guest_mac), "02:7a:6e:00:00:02");
  EXPECT_EQ(zn::net::to_string(g.host_mac), "02:7a:6e:ff:00:02");
  EXPECT_EQ(zn::net::to_string(g.guest_ip4), "198.19.1.2");
  EXPECT_EQ(zn::net::to_string(g.gateway_ip4), "198.19.1.1");
  EXPECT_EQ(zn::net::to_string(g.guest_ip6), "2001:db8:19:1::2");
  EXPECT_EQ(zn::net::to_string(g.gateway_ip6), "2001:db8:19:1::1");
  EXPECT_EQ(zn::net::to_string(g.guest_ip6_ll), "fe80::7a:6eff:fe00:2");
}

TEST(LabAddressing, RejectsTooManyGuests) {
  EXPECT_THROW(lab_plan::guest("zn", "x", lab_plan::kMaxGuests), std::out_of_range);
}

TEST(LabAddressing, Upstreams) {
  auto v4 = lab_plan::upstream_ip4();
  auto v6 = lab_plan::upstream_ip6();
  ASSERT_EQ(v4.size(), 4u);
  ASSERT_EQ(v6.size(), 4u);
  EXPECT_EQ(zn::net::to_string(v4.front()), "198.18.0.10");
  EXPECT_EQ(zn::net::to_string(v6.back()), "2001:db8:18::13");
}

TEST(IpAddress, ParseRejectsGarbage) {
  EXPECT_THROW(zn::net::parse_ip4("198.19.0"), std::invalid_argument);
  EXPECT_THROW(zn::net::parse_ip6("zz::1"), std::invalid_argument);
}

}  // namespace
}  // namespace zn::vmm
