// A guest's network identity by slot: MACs, addresses, gateway. The lab and
// zerod's address pool share this plan, so a lab guest n and a zerod session
// in slot n agree on every address.
#pragma once

#include <netinet/in.h>

#include <string>

#include "userspace/net/address.h"

namespace zn::vmm {

struct AddressPlan {
  static constexpr unsigned kMaxSlots = 254;  // slot+1 fits one MAC byte
  in_addr ip4_base{};                         // a /16: slot n is <base>.n.0/24
  in6_addr ip6_base{};                        // a /48: slot n is <base>:n::/64
  static AddressPlan lab_default();           // 198.19.0.0/16, 2001:db8:19::/48
  // Throws std::invalid_argument unless a /16 and a /48 with host bits clear.
  static AddressPlan parse(const std::string& ip4_cidr, const std::string& ip6_cidr);
};

struct GuestNetwork {
  unsigned slot = 0;
  std::string tap_name;         // "zn-tap<slot>"
  net::MacAddress guest_mac{};  // 02:7a:6e:00:00:<slot+1>
  net::MacAddress host_mac{};   // 02:7a:6e:ff:00:<slot+1>
  in_addr guest_ip4{};          // .2 of the slot's /24
  in_addr gateway_ip4{};        // .1, on the host TAP
  in6_addr guest_ip6{};         // ::2 of the slot's /64
  in6_addr guest_ip6_ll{};      // EUI-64 link-local of guest_mac
  in6_addr gateway_ip6{};       // ::1
  // EUI-64 link-local of host_mac: what the kernel gives a TAP created with
  // host_mac (addr_gen_mode 0); neighbour discovery is checked against it.
  in6_addr gateway_ip6_ll{};
  static constexpr unsigned kPrefix4 = 24, kPrefix6 = 64, kMtu = 1500;
};

// Throws std::out_of_range for slot >= kMaxSlots.
GuestNetwork guest_network(const AddressPlan& plan, unsigned slot);

}  // namespace zn::vmm
