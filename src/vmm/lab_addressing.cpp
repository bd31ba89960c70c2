#include "vmm/lab_addressing.h"

#include <stdexcept>

namespace zn::vmm::lab_plan {
namespace {
constexpr unsigned kUpstreamFirst = 10, kUpstreamCount = 4;

std::string hex(unsigned v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), kDigits[v % 16]);
    v /= 16;
  } while (v);
  return out;
}
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
  const auto n = std::to_string(index);
  const auto tag = static_cast<std::uint8_t>(index + 1);
  LabGuest g;
  g.name = name;
  g.netns = prefix + "-" + name;
  g.index = index;
  g.tap_name = "zn-tap" + n;
  g.guest_mac = {0x02, 0x7a, 0x6e, 0x00, 0x00, tag};
  g.host_mac = {0x02, 0x7a, 0x6e, 0xff, 0x00, tag};
  g.guest_ip4 = parse_ip4("198.19." + n + ".2");
  g.gateway_ip4 = parse_ip4("198.19." + n + ".1");
  // IPv6 text is hex: guest n=10 is 2001:db8:19:a::2.
  g.guest_ip6 = parse_ip6("2001:db8:19:" + hex(index) + "::2");
  g.gateway_ip6 = parse_ip6("2001:db8:19:" + hex(index) + "::1");
  g.guest_ip6_ll = eui64_link_local(g.guest_mac);
  return g;
}

}  // namespace zn::vmm::lab_plan
