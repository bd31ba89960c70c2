// Conversions between textual and binary IPv4/IPv6/MAC addresses.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string>

namespace zn::vmm {

using MacAddress = std::array<std::uint8_t, 6>;

// Throw std::invalid_argument on malformed text.
in_addr parse_ip4(const std::string& text);
in6_addr parse_ip6(const std::string& text);

std::string to_string(const in_addr& addr);
std::string to_string(const in6_addr& addr);
std::string to_string(const MacAddress& mac);  // "02:7a:6e:00:00:01"

// The fe80::/64 address the kernel derives from a MAC (modified EUI-64,
// addr_gen_mode 0), so callers know a guest's link-local address in advance.
in6_addr eui64_link_local(const MacAddress& mac);

}  // namespace zn::vmm
