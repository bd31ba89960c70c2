#include "vmm/host/guest_network.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

#include "zn_abi.h"

namespace zn::vmm {
namespace {

std::pair<std::string, unsigned> split_cidr(const std::string& cidr) {
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) throw std::invalid_argument("not a CIDR: " + cidr);
  const std::string len = cidr.substr(slash + 1);
  if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), ::isdigit))
    throw std::invalid_argument("not a CIDR: " + cidr);
  return {cidr.substr(0, slash), static_cast<unsigned>(std::stoul(len))};
}

// Bit i of a 128-bit address, 0 the most significant.
bool bit6(const in6_addr& a, unsigned i) { return (a.s6_addr[i / 8] >> (7 - i % 8)) & 1; }

// The slots a pool split into per-guest prefixes holds, saturating at 2^31.
unsigned long slots_in(unsigned pool_len, unsigned guest_len) {
  return 1ul << std::min(guest_len - pool_len, 31u);
}

// MACs carry slot+1 in two bytes; the datapath's indices stop earlier.
constexpr unsigned long kMacSlots = 0xffff;

}  // namespace

AddressPlan AddressPlan::lab_default() { return parse("198.19.0.0/16", "2001:db8:19::/48", 24, 64); }

AddressPlan AddressPlan::parse(const std::string& ip4_cidr, const std::string& ip6_cidr, unsigned guest4_len,
                               unsigned guest6_len) {
  AddressPlan plan;
  auto [a4, len4] = split_cidr(ip4_cidr);
  auto [a6, len6] = split_cidr(ip6_cidr);
  plan.ip4_base = net::parse_ip4(a4);
  plan.ip6_base = net::parse_ip6(a6);
  if (len4 > 32 || (len4 < 32 && (ntohl(plan.ip4_base.s_addr) & (0xffffffffu >> len4)) != 0))
    throw std::invalid_argument("IPv4 pool must be a network with no host bits: " + ip4_cidr);
  bool host_bits6 = len6 > 128;
  for (unsigned i = len6; i < 128; ++i) host_bits6 |= bit6(plan.ip6_base, i);
  if (host_bits6) throw std::invalid_argument("IPv6 pool must be a network with no host bits: " + ip6_cidr);
  // The gateway is the first usable address and the guest the next: an IPv4
  // prefix needs a network and a broadcast address besides (a /30 at most),
  // an IPv6 one a subnet-router anycast (::0) besides (a /126 at most).
  if (guest4_len > 30)
    throw std::invalid_argument("per-guest IPv4 prefix /" + std::to_string(guest4_len) +
                                " cannot hold a gateway and a guest: /30 at most");
  if (guest6_len > 126)
    throw std::invalid_argument("per-guest IPv6 prefix /" + std::to_string(guest6_len) +
                                " cannot hold a gateway and a guest: /126 at most");
  if (guest4_len < len4)
    throw std::invalid_argument("per-guest IPv4 prefix /" + std::to_string(guest4_len) +
                                " is larger than the pool " + ip4_cidr);
  if (guest6_len < len6)
    throw std::invalid_argument("per-guest IPv6 prefix /" + std::to_string(guest6_len) +
                                " is larger than the pool " + ip6_cidr);
  plan.pool4_len = len4;
  plan.guest4_len = guest4_len;
  plan.pool6_len = len6;
  plan.guest6_len = guest6_len;
  return plan;
}

unsigned AddressPlan::max_slots() const {
  const unsigned long pools = std::min(slots_in(pool4_len, guest4_len), slots_in(pool6_len, guest6_len));
  return static_cast<unsigned>(std::min({pools, kMacSlots, static_cast<unsigned long>(ZN_MAX_SESSIONS - 1)}));
}

std::string AddressPlan::pool4() const { return net::to_string(ip4_base) + "/" + std::to_string(pool4_len); }
std::string AddressPlan::pool6() const { return net::to_string(ip6_base) + "/" + std::to_string(pool6_len); }

GuestNetwork guest_network(const AddressPlan& plan, unsigned slot) {
  const unsigned max = plan.max_slots();
  if (slot >= max)
    throw std::out_of_range("address slot " + std::to_string(slot) + " beyond " + std::to_string(max - 1));
  const unsigned tag = slot + 1;  // below 0x10000 (max_slots)
  GuestNetwork g;
  g.slot = slot;
  g.tap_name = "zn-tap" + std::to_string(slot);
  g.guest_mac = {0x02, 0x7a, 0x6e, 0x00, static_cast<uint8_t>(tag >> 8), static_cast<uint8_t>(tag)};
  g.host_mac = {0x02, 0x7a, 0x6e, 0xff, static_cast<uint8_t>(tag >> 8), static_cast<uint8_t>(tag)};
  g.prefix4 = plan.guest4_len;
  g.prefix6 = plan.guest6_len;
  // The slot number fills the bits between the pool's and the guest's prefix.
  const uint32_t subnet = ntohl(plan.ip4_base.s_addr) | (slot << (32 - plan.guest4_len));
  g.gateway_ip4.s_addr = htonl(subnet | 1);
  g.guest_ip4.s_addr = htonl(subnet | 2);
  g.gateway_ip6 = plan.ip6_base;
  for (unsigned i = 0, bit = plan.guest6_len - 1; i < 32 && (slot >> i) != 0; ++i, --bit)
    if ((slot >> i) & 1) g.gateway_ip6.s6_addr[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
  g.guest_ip6 = g.gateway_ip6;
  g.gateway_ip6.s6_addr[15] |= 1;
  g.guest_ip6.s6_addr[15] |= 2;
  g.guest_ip6_ll = net::eui64_link_local(g.guest_mac);
  g.gateway_ip6_ll = net::eui64_link_local(g.host_mac);
  return g;
}

}  // namespace zn::vmm
