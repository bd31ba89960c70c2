#include "vmm/lab_addressing.h"

#include "vmm/guest_network.h"

#include <stdexcept>

namespace zn::vmm::lab_plan {
namespace {
constexpr unsigned kUpstreamFirst = 10, kUpstreamCount = 4;

}  // namespace

std::vector<in_addr> upstream_ip4() {
  std::vector<in_addr> out;
  for (unsigned i = 0; i < kUpstreamCount; ++i)
    out.push_back(parse_ip4("198.18.0." + std::to_string(kUpstreamFirst + i)));
  return out;
}

std::vector<in6_addr> upstream_ip6() {
  std::vector<in6_addr> out;
  for (unsigned i = 0; i < kUpstreamCount; ++i)
    out.push_back(parse_ip6("2001:db8:18::" + std::to_string(kUpstreamFirst + i)));
  return out;
}

LabGuest guest(const std::string& prefix, const std::string& name, unsigned index) {
  if (index >= kMaxGuests) throw std::out_of_range("lab supports at most 254 guests");
  const GuestNetwork net = guest_network(AddressPlan::lab_default(), index);
  LabGuest g;
  g.name = name;
  g.netns = prefix + "-" + name;
  g.index = index;
  g.tap_name = net.tap_name;
  g.guest_mac = net.guest_mac;
  g.host_mac = net.host_mac;
  g.guest_ip4 = net.guest_ip4;
  g.gateway_ip4 = net.gateway_ip4;
  g.guest_ip6 = net.guest_ip6;
  g.gateway_ip6 = net.gateway_ip6;
  g.guest_ip6_ll = net.guest_ip6_ll;
  return g;
}

}  // namespace zn::vmm::lab_plan
