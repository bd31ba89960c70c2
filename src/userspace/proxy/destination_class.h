// Where an upstream address points, from IANA's special-purpose address
// registries (IPv4 and IPv6): every entry that is not globally reachable has
// a class, and so do the IPv6 transition forms (6to4, Teredo, NAT64, the
// deprecated IPv4-compatible form) whatever IPv4 address they carry, because
// a relay or translator would reach that address from its own vantage point.
// IPv4-mapped addresses (::ffff:a.b.c.d) are the IPv4 address: a connect to
// one reaches it. Unicast IPv6 outside 2000::/3 is reserved by the IETF and
// not routed, so it is refused too. The classifier knows nothing of this
// host: DestinationGuard adds the local table, the guest pools and zerod's
// configured allowances.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "userspace/net/address.h"
#include "userspace/net/prefix.h"

namespace zn::proxy {

enum class DestinationClass {
  kPublic,
  kUnspecified,          // 0.0.0.0/8 ("this network"), ::/128
  kLoopback,             // 127.0.0.0/8, ::1
  kPrivate,              // 10/8, 172.16/12, 192.168/16, fc00::/7
  kLinkLocal,            // 169.254/16, fe80::/10
  kMetadata,             // 169.254.169.254, fd00:ec2::254 (cloud instance metadata)
  kCgnat,                // 100.64.0.0/10 shared address space
  kMulticast,            // 224/4, ff00::/8
  kReserved,             // 240/4, 255.255.255.255, IPv6 outside 2000::/3
  kDocumentation,        // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
  kBenchmarking,         // 198.18.0.0/15, 2001:2::/48
  kProtocolAssignments,  // 192.0.0.0/24, 2001::/23 (less their globally reachable exceptions)
  kDiscard,              // 100::/64, 100:0:0:1::/64
  kLocalTranslation,     // 64:ff9b:1::/48 local-use IPv4/IPv6 translation
  kNat64,                // 64:ff9b::/96 well-known NAT64 prefix
  kSixToFour,            // 2002::/16, and the 6to4 relay anycast 192.88.99.0/24
  kTeredo,               // 2001::/32
  kIpv4Compatible,       // ::a.b.c.d, deprecated (RFC 4291)
  kSegmentRouting,       // 5f00::/16 SRv6 SIDs
  kDeprecated,           // fec0::/10 site-local, 2001:10::/28 ORCHID
};

struct DestinationVerdict {
  DestinationClass cls = DestinationClass::kPublic;
  // The class was found in the IPv4 address of an IPv4-mapped IPv6 one.
  bool embedded = false;
  // A transition form (6to4, Teredo, NAT64, IPv4-compatible): the worst
  // class of the IPv4 address(es) it carries, for the audit reason.
  std::optional<DestinationClass> carried;
  bool internal() const { return cls != DestinationClass::kPublic; }
};

DestinationVerdict classify_destination(const net::IpAddress& address);
std::string_view destination_class_name(DestinationClass cls);  // "private", "documentation", ...
// "special-purpose: documentation", "special-purpose: 6to4 (carries private)".
std::string describe_destination(const DestinationVerdict& verdict);

}  // namespace zn::proxy
