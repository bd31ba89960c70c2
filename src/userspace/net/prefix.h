// An IP address prefix: parsed strictly (host bits must be zero) and
// compared bit by bit. Shared by the local-address table, the destination
// guard and zerod's config.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "userspace/net/address.h"

namespace zn::net {

// An address prefix ("198.18.0.0/16", "2001:db8:18::/48", a bare address is
// a /32 or /128). Host bits must be zero: "10.1.2.3/8" is a typo, not a
// network, and is refused by parse().
struct AddressPrefix {
  IpAddress network;
  unsigned length = 0;

  static std::optional<AddressPrefix> parse(std::string_view text);
  bool contains(const IpAddress& address) const;
  // This prefix lies entirely inside `outer` (same family, at least as long).
  bool within(const AddressPrefix& outer) const;
  std::string to_string() const;
  auto operator<=>(const AddressPrefix&) const = default;
};

// ::ffff:a.b.c.d -> a.b.c.d; anything else unchanged. A connect to the mapped
// form reaches the IPv4 address, so every check looks at that.
IpAddress unmap_ipv4(const IpAddress& address);

}  // namespace zn::net
