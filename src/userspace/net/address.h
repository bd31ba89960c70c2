// An IPv4 or IPv6 address as DNS answers carry them (A / AAAA rdata).
#pragma once

#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zn::dns {

struct IpAddress {
  int family = AF_INET;              // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};   // network order; IPv4 uses the first 4

  static IpAddress v4(const std::array<uint8_t, 4>& b);
  static IpAddress v6(const std::array<uint8_t, 16>& b);
  // "192.0.2.1" or "2001:db8::1"; nullopt if neither.
  static std::optional<IpAddress> parse(std::string_view text);

  size_t size() const { return family == AF_INET ? 4 : 16; }
  std::string to_string() const;
  auto operator<=>(const IpAddress&) const = default;
};

}  // namespace zn::dns
