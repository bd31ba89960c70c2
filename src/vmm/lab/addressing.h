// The lab's fixed address plan. Every address lives in namespaces the lab
// creates: 198.18.0.0/15 and 2001:db8:18::/47 (documentation/benchmark ranges).
#pragma once

#include <netinet/in.h>

#include <string>
#include <vector>

#include "vmm/host/guest_network.h"
#include "userspace/net/address.h"

namespace zn::vmm {

// One lab guest: a namespace whose eth0 (a TAP) is wired by a frame pump to
// TAP tap_name in the host namespace. Guest n has the network of address
// slot n (slot = order of addition), the plan zerod's sessions use too.
struct LabGuest : GuestNetwork {
  std::string name;     // "g0"
  std::string netns;    // "<prefix>-g0"
  int tap_ifindex = 0;  // in the host namespace
};

namespace lab_plan {

inline constexpr unsigned kMaxGuests = 254;  // n+1 must fit one MAC byte
inline constexpr unsigned kGuestMtu = 1500;
inline constexpr unsigned kGuestPrefix4 = 24;
inline constexpr unsigned kGuestPrefix6 = 64;

// host ns inet0 <-> inet ns eth0
inline constexpr char kHostUplink[] = "inet0";
inline constexpr char kInetDownlink[] = "eth0";
inline constexpr char kHostUplinkIp4[] = "198.18.255.1/30";
inline constexpr char kHostUplinkIp6[] = "2001:db8:18:ff::1/64";
inline constexpr char kInetDownlinkIp4[] = "198.18.255.2/30";
inline constexpr char kInetDownlinkIp6[] = "2001:db8:18:ff::2/64";
inline constexpr char kUpstreamNet4[] = "198.18.0.0/16";  // host -> inet
inline constexpr char kUpstreamNet6[] = "2001:db8:18::/48";
inline constexpr char kGuestNet4[] = "198.19.0.0/16";  // inet -> host
inline constexpr char kGuestNet6[] = "2001:db8:19::/48";
inline constexpr char kGuestEth[] = "eth0";  // in each guest ns

// Addresses the stand-in internet answers on (on its lo): 198.18.0.10-13, 2001:db8:18::10-13.
std::vector<in_addr> upstream_ip4();
std::vector<in6_addr> upstream_ip6();

// Everything about guest n except tap_ifindex.
LabGuest guest(const std::string& prefix, const std::string& name, unsigned index);

}  // namespace lab_plan
}  // namespace zn::vmm
