// The address types every capability shares (issue 10: one set of network
// primitives): an IPv4/IPv6 address as DNS answers carry them (A / AAAA
// rdata), a MAC address, and text conversions of the kernel's in_addr /
// in6_addr.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zn::net {

struct IpAddress {
  int family = AF_INET;             // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 uses the first 4

  static IpAddress v4(const std::array<uint8_t, 4>& b);
  static IpAddress v6(const std::array<uint8_t, 16>& b);
  // "192.0.2.1" or "2001:db8::1"; nullopt if neither.
  static std::optional<IpAddress> parse(std::string_view text);

  size_t size() const { return family == AF_INET ? 4 : 16; }
  std::string to_string() const;
  auto operator<=>(const IpAddress&) const = default;
};

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

}  // namespace zn::net
