#include "vmm/lab/addressing.h"

#include "vmm/host/guest_network.h"

#include <stdexcept>

namespace zn::vmm::lab_plan {
namespace {
constexpr unsigned kUpstreamFirst = 10, kUpstreamCount = 4;

}  // namespace

std::vector<in_addr> upstream_ip4() {
  std::vector<in_addr> out;
  for (unsigned i = 0; i < kUpstreamCount; ++i)
    out.push_back(net::parse_ip4("198.18.0." + std::to_string(kUpstreamFirst + i)));
  return out;
}

std::vector<in6_addr> upstream_ip6() {
  std::vector<in6_addr> out;
  for (unsigned i = 0; i < kUpstreamCount; ++i)
    out.push_back(net::parse_ip6("2001:db8:18::" + std::to_string(kUpstreamFirst + i)));
  return out;
}

LabGuest guest(const std::string& prefix, const std::string& name, unsigned index) {
  if (index >= kMaxGuests) throw std::out_of_range("lab supports at most 254 guests");
  LabGuest g;
  static_cast<GuestNetwork&>(g) = guest_network(AddressPlan::lab_default(), index);
  g.name = name;
  g.netns = prefix + "-" + name;
  return g;
}

}  // namespace zn::vmm::lab_plan
