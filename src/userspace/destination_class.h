// Where an upstream address points, for the proxy's "never reach the inside"
// rule: private, loopback, link-local, CGNAT, multicast and cloud metadata
// addresses — and IPv6 forms that embed such an IPv4 address (IPv4-mapped,
// IPv4-compatible, NAT64, 6to4, Teredo) — are refused unless a policy rule
// names the address itself.
#pragma once

#include <string_view>

#include "userspace/dns_address.h"

namespace zn::proxy {

enum class DestinationClass {
  kPublic,
  kUnspecified,  // 0.0.0.0/8, ::
  kLoopback,     // 127.0.0.0/8, ::1
  kPrivate,      // 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 64:ff9b:1::/48
  kLinkLocal,    // 169.254/16, fe80::/10
  kMetadata,     // 169.254.169.254, fd00:ec2::254
  kCgnat,        // 100.64.0.0/10
  kMulticast,    // 224/4, ff00::/8
  kReserved,     // 240/4 and 255.255.255.255
};

struct DestinationVerdict {
  DestinationClass cls = DestinationClass::kPublic;
  // The class was found in an IPv4 address embedded in an IPv6 one.
  bool embedded = false;
  bool internal() const { return cls != DestinationClass::kPublic; }
};

DestinationVerdict classify_destination(const dns::IpAddress& address);
std::string_view destination_class_name(DestinationClass cls);  // "private", "metadata", ...

}  // namespace zn::proxy
