// A guest's network identity by slot: MACs, addresses, gateway. The lab and
// zerod's address pool share this plan, so a lab guest n and a zerod session
// in slot n agree on every address.
#pragma once

#include <netinet/in.h>

#include <string>

#include "userspace/net/address.h"

namespace zn::vmm {

// Slot n owns the n-th per-guest prefix of each pool: in it the first usable
// address is the gateway (on the host TAP) and the next one the guest's. The
// lab default is a /24 per guest in 198.19.0.0/16 (198.19.<n>.1 and .2) and a
// /64 in 2001:db8:19::/48 (2001:db8:19:<n>::1 and ::2); a /30 and a /120 give
// a host 16k guests from the same pools.
struct AddressPlan {
  in_addr ip4_base{};  // the IPv4 pool's network, host bits clear
  in6_addr ip6_base{};
  unsigned pool4_len = 16, guest4_len = 24;
  unsigned pool6_len = 48, guest6_len = 64;

  static AddressPlan lab_default();  // 198.19.0.0/16 by /24, 2001:db8:19::/48 by /64
  // Throws std::invalid_argument for a pool that is not a prefix with host
  // bits clear, a per-guest prefix outside its pool or too long to hold a
  // gateway and a guest (IPv4 /31 and /32, IPv6 /127 and /128).
  static AddressPlan parse(const std::string& ip4_cidr, const std::string& ip6_cidr, unsigned guest4_len = 24,
                           unsigned guest6_len = 64);
  // How many guests the plan holds: the per-guest prefixes of the smaller
  // pool, capped by what the datapath (ZN_MAX_SESSIONS) and the MAC scheme
  // (slot+1 in two bytes) can tell apart.
  unsigned max_slots() const;
  std::string pool4() const;  // "198.19.0.0/16"
  std::string pool6() const;
};

struct GuestNetwork {
  unsigned slot = 0;
  std::string tap_name;         // "zn-tap<slot>"
  net::MacAddress guest_mac{};  // 02:7a:6e:00:<slot+1, two bytes>
  net::MacAddress host_mac{};   // 02:7a:6e:ff:<slot+1, two bytes>
  in_addr guest_ip4{};          // the second usable address of the slot's prefix
  in_addr gateway_ip4{};        // the first, on the host TAP
  in6_addr guest_ip6{};         // ::2 of the slot's prefix
  in6_addr guest_ip6_ll{};      // EUI-64 link-local of guest_mac
  in6_addr gateway_ip6{};       // ::1
  // EUI-64 link-local of host_mac: what the kernel gives a TAP created with
  // host_mac (addr_gen_mode 0); neighbour discovery is checked against it.
  in6_addr gateway_ip6_ll{};
  unsigned prefix4 = 24, prefix6 = 64;  // the plan's per-guest prefix lengths
  static constexpr unsigned kMtu = 1500;
};

// Throws std::out_of_range for slot >= plan.max_slots().
GuestNetwork guest_network(const AddressPlan& plan, unsigned slot);

}  // namespace zn::vmm
