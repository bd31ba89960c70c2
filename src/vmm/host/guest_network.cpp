#include "vmm/host/guest_network.h"

#include <arpa/inet.h>

#include <cstring>
#include <stdexcept>

namespace zn::vmm {
namespace {

std::pair<std::string, unsigned> split_cidr(const std::string& cidr) {
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) throw std::invalid_argument("not a CIDR: " + cidr);
  return {cidr.substr(0, slash), static_cast<unsigned>(std::stoul(cidr.substr(slash + 1)))};
}

}  // namespace

AddressPlan AddressPlan::lab_default() { return parse("198.19.0.0/16", "2001:db8:19::/48"); }

AddressPlan AddressPlan::parse(const std::string& ip4_cidr, const std::string& ip6_cidr) {
  AddressPlan plan;
  auto [a4, len4] = split_cidr(ip4_cidr);
  auto [a6, len6] = split_cidr(ip6_cidr);
  plan.ip4_base = net::parse_ip4(a4);
  plan.ip6_base = net::parse_ip6(a6);
  if (len4 != 16 || (ntohl(plan.ip4_base.s_addr) & 0xffff) != 0)
    throw std::invalid_argument("IPv4 pool must be a /16 network: " + ip4_cidr);
  for (int i = 6; i < 16; ++i)
    if (len6 != 48 || plan.ip6_base.s6_addr[i] != 0)
      throw std::invalid_argument("IPv6 pool must be a /48 network: " + ip6_cidr);
  return plan;
}

GuestNetwork guest_network(const AddressPlan& plan, unsigned slot) {
  if (slot >= AddressPlan::kMaxSlots)
    throw std::out_of_range("address slot " + std::to_string(slot) + " beyond " +
                            std::to_string(AddressPlan::kMaxSlots - 1));
  const auto tag = static_cast<uint8_t>(slot + 1);
  GuestNetwork g;
  g.slot = slot;
  g.tap_name = "zn-tap" + std::to_string(slot);
  g.guest_mac = {0x02, 0x7a, 0x6e, 0x00, 0x00, tag};
  g.host_mac = {0x02, 0x7a, 0x6e, 0xff, 0x00, tag};
  const uint32_t subnet = ntohl(plan.ip4_base.s_addr) | (slot << 8);
  g.gateway_ip4.s_addr = htonl(subnet | 1);
  g.guest_ip4.s_addr = htonl(subnet | 2);
  g.gateway_ip6 = plan.ip6_base;
  g.gateway_ip6.s6_addr[6] = static_cast<uint8_t>(slot >> 8);
  g.gateway_ip6.s6_addr[7] = static_cast<uint8_t>(slot);
  g.guest_ip6 = g.gateway_ip6;
  g.gateway_ip6.s6_addr[15] = 1;
  g.guest_ip6.s6_addr[15] = 2;
  g.guest_ip6_ll = net::eui64_link_local(g.guest_mac);
  g.gateway_ip6_ll = net::eui64_link_local(g.host_mac);
  return g;
}

}  // namespace zn::vmm
