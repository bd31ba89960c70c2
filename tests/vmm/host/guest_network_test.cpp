// The address plan: slot -> addresses for the lab's /24 + /64 plan and for the
// dense /30 + /120 plans of issue 11, and the plans it refuses (no root).
#include "vmm/host/guest_network.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "zn_abi.h"

namespace zn::vmm {
namespace {

TEST(GuestNetworkPlan, LabDefaultKeepsTheSlashTwentyFourAddresses) {
  const AddressPlan plan = AddressPlan::lab_default();
  EXPECT_EQ(plan.max_slots(), 256u);
  EXPECT_EQ(plan.pool4(), "198.19.0.0/16");
  EXPECT_EQ(plan.pool6(), "2001:db8:19::/48");
  const GuestNetwork g = guest_network(plan, 7);
  EXPECT_EQ(g.tap_name, "zn-tap7");
  EXPECT_EQ(net::to_string(g.gateway_ip4), "198.19.7.1");
  EXPECT_EQ(net::to_string(g.guest_ip4), "198.19.7.2");
  EXPECT_EQ(net::to_string(g.gateway_ip6), "2001:db8:19:7::1");
  EXPECT_EQ(net::to_string(g.guest_ip6), "2001:db8:19:7::2");
  EXPECT_EQ(net::to_string(g.guest_mac), "02:7a:6e:00:00:08");
  EXPECT_EQ(net::to_string(g.host_mac), "02:7a:6e:ff:00:08");
  EXPECT_EQ(g.prefix4, 24u);
  EXPECT_EQ(g.prefix6, 64u);
  const GuestNetwork last = guest_network(plan, 253);  // the lab's last guest
  EXPECT_EQ(net::to_string(last.guest_ip4), "198.19.253.2");
  EXPECT_EQ(net::to_string(last.guest_ip6), "2001:db8:19:fd::2");
  EXPECT_EQ(net::to_string(last.guest_mac), "02:7a:6e:00:00:fe");
}

TEST(GuestNetworkPlan, SlashThirtyAndSlashOneTwentyPlan) {
  const AddressPlan plan = AddressPlan::parse("198.19.0.0/16", "2001:db8:19::/48", 30, 120);
  // 16384 /30s in the /16; the datapath's last index caps it one lower.
  EXPECT_EQ(plan.max_slots(), ZN_MAX_SESSIONS - 1u);
  EXPECT_EQ(plan.max_slots(), 16383u);

  const GuestNetwork first = guest_network(plan, 0);
  EXPECT_EQ(net::to_string(first.gateway_ip4), "198.19.0.1");
  EXPECT_EQ(net::to_string(first.guest_ip4), "198.19.0.2");
  EXPECT_EQ(net::to_string(first.gateway_ip6), "2001:db8:19::1");
  EXPECT_EQ(net::to_string(first.guest_ip6), "2001:db8:19::2");
  EXPECT_EQ(first.prefix4, 30u);
  EXPECT_EQ(first.prefix6, 120u);

  const GuestNetwork g = guest_network(plan, 300);  // 300 = 0x12c: 4 * 300 = 1200 = 4.176
  EXPECT_EQ(net::to_string(g.gateway_ip4), "198.19.4.177");
  EXPECT_EQ(net::to_string(g.guest_ip4), "198.19.4.178");
  EXPECT_EQ(net::to_string(g.gateway_ip6), "2001:db8:19::1:2c01");
  EXPECT_EQ(net::to_string(g.guest_ip6), "2001:db8:19::1:2c02");
  EXPECT_EQ(net::to_string(g.guest_mac), "02:7a:6e:00:01:2d");  // slot+1 in two bytes
  EXPECT_EQ(net::to_string(g.host_mac), "02:7a:6e:ff:01:2d");
  EXPECT_EQ(g.tap_name, "zn-tap300");

  const GuestNetwork last = guest_network(plan, 16382);  // 4 * 16382 = 65528 = 255.248
  EXPECT_EQ(net::to_string(last.gateway_ip4), "198.19.255.249");
  EXPECT_EQ(net::to_string(last.guest_ip4), "198.19.255.250");
  EXPECT_EQ(net::to_string(last.guest_ip6), "2001:db8:19::3f:fe02");
  EXPECT_EQ(net::to_string(last.guest_mac), "02:7a:6e:00:3f:ff");
  EXPECT_THROW(guest_network(plan, 16383), std::out_of_range);
  EXPECT_THROW(guest_network(plan, 1u << 20), std::out_of_range);
}

TEST(GuestNetworkPlan, TheSmallerPoolBoundsTheSlots) {
  // A /24 of /30s is 64 slots even though the IPv6 pool holds millions.
  const AddressPlan v4 = AddressPlan::parse("10.7.3.0/24", "fd00:7::/48", 30, 120);
  EXPECT_EQ(v4.max_slots(), 64u);
  EXPECT_EQ(net::to_string(guest_network(v4, 63).guest_ip4), "10.7.3.254");
  EXPECT_THROW(guest_network(v4, 64), std::out_of_range);
  // An IPv6 /112 of /120s is 256 slots; a /126 per guest is the longest.
  const AddressPlan v6 = AddressPlan::parse("10.0.0.0/8", "fd00:7::/112", 30, 120);
  EXPECT_EQ(v6.max_slots(), 256u);
  EXPECT_EQ(net::to_string(guest_network(v6, 255).guest_ip6), "fd00:7::ff02");
  const AddressPlan tight = AddressPlan::parse("10.0.0.0/8", "fd00:7::/64", 30, 126);
  EXPECT_EQ(net::to_string(guest_network(tight, 5).gateway_ip6), "fd00:7::15");
  EXPECT_EQ(net::to_string(guest_network(tight, 5).guest_ip6), "fd00:7::16");
  // One slot when the per-guest prefix is the pool.
  EXPECT_EQ(AddressPlan::parse("10.0.0.0/30", "fd00:7::/126", 30, 126).max_slots(), 1u);
}

TEST(GuestNetworkPlan, RefusesPlansThatCannotHoldAGatewayAndAGuest) {
  const auto refused = [](const std::string& p4, const std::string& p6, unsigned g4, unsigned g6) {
    try {
      AddressPlan::parse(p4, p6, g4, g6);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::/48", 31, 64).find("/30 at most"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::/48", 32, 64).find("/30 at most"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::/48", 24, 127).find("/126 at most"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::/48", 24, 128).find("/126 at most"), std::string::npos);
  // Pool smaller than one guest's prefix.
  EXPECT_NE(refused("198.19.0.0/25", "2001:db8:19::/48", 24, 64).find("larger than the pool"),
            std::string::npos);
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::/80", 24, 64).find("larger than the pool"),
            std::string::npos);
  // Host bits, garbage, wrong family.
  EXPECT_NE(refused("198.19.0.1/16", "2001:db8:19::/48", 24, 64).find("no host bits"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0/16", "2001:db8:19::1/48", 24, 64).find("no host bits"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0/33", "2001:db8:19::/48", 24, 64).find("no host bits"), std::string::npos);
  EXPECT_NE(refused("198.19.0.0", "2001:db8:19::/48", 24, 64), "accepted");
  EXPECT_NE(refused("198.19.0.0/x", "2001:db8:19::/48", 24, 64), "accepted");
  EXPECT_THROW(AddressPlan::parse("2001:db8::/48", "2001:db8:19::/48"), std::exception);
  EXPECT_EQ(refused("198.19.0.0/16", "2001:db8:19::/48", 30, 126), "accepted");
}

}  // namespace
}  // namespace zn::vmm
