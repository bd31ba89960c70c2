#include "userspace/proxy/destination_class.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace zn::proxy {
namespace {

using C = DestinationClass;

struct Entry {
  net::AddressPrefix prefix;
  C cls;  // kPublic: a globally reachable exception inside a refused entry
};

net::AddressPrefix must_parse(std::string_view text) {
  auto p = net::AddressPrefix::parse(text);
  if (!p) std::abort();  // a typo in the table below: caught by the first test run
  return *p;
}

// IANA IPv4 and IPv6 Special-Purpose Address Registries, every entry with
// "Globally Reachable" False or N/A, with the entries marked True that lie
// inside a refused one (longest prefix wins), plus multicast and the cloud
// metadata addresses. The transition forms are classes of their own.
const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    const std::pair<const char*, C> rows[] = {
        // IPv4
        {"0.0.0.0/8", C::kUnspecified},
        {"10.0.0.0/8", C::kPrivate},
        {"100.64.0.0/10", C::kCgnat},
        {"127.0.0.0/8", C::kLoopback},
        {"169.254.0.0/16", C::kLinkLocal},
        {"169.254.169.254/32", C::kMetadata},
        {"172.16.0.0/12", C::kPrivate},
        {"192.0.0.0/24", C::kProtocolAssignments},
        {"192.0.0.9/32", C::kPublic},   // PCP anycast
        {"192.0.0.10/32", C::kPublic},  // TURN anycast
        {"192.0.2.0/24", C::kDocumentation},
        {"192.88.99.0/24", C::kSixToFour},  // deprecated 6to4 relay anycast
        {"192.168.0.0/16", C::kPrivate},
        {"198.18.0.0/15", C::kBenchmarking},
        {"198.51.100.0/24", C::kDocumentation},
        {"203.0.113.0/24", C::kDocumentation},
        {"224.0.0.0/4", C::kMulticast},
        {"240.0.0.0/4", C::kReserved},
        {"255.255.255.255/32", C::kReserved},
        // IPv6
        {"::/128", C::kUnspecified},
        {"::1/128", C::kLoopback},
        {"::/96", C::kIpv4Compatible},
        {"64:ff9b::/96", C::kNat64},
        {"64:ff9b:1::/48", C::kLocalTranslation},
        {"100::/64", C::kDiscard},
        {"100:0:0:1::/64", C::kDiscard},
        {"2001::/23", C::kProtocolAssignments},
        {"2001::/32", C::kTeredo},
        {"2001:1::1/128", C::kPublic},  // PCP anycast
        {"2001:1::2/128", C::kPublic},  // TURN anycast
        {"2001:1::3/128", C::kPublic},  // DNS-SD SRP anycast
        {"2001:2::/48", C::kBenchmarking},
        {"2001:3::/32", C::kPublic},       // AMT
        {"2001:4:112::/48", C::kPublic},   // AS112-v6
        {"2001:10::/28", C::kDeprecated},  // ORCHID
        {"2001:20::/28", C::kPublic},      // ORCHIDv2
        {"2001:30::/28", C::kPublic},      // drone remote ID
        {"2001:db8::/32", C::kDocumentation},
        {"2002::/16", C::kSixToFour},
        {"3fff::/20", C::kDocumentation},
        {"5f00::/16", C::kSegmentRouting},
        {"fc00::/7", C::kPrivate},
        {"fd00:ec2::254/128", C::kMetadata},
        {"fe80::/10", C::kLinkLocal},
        {"fec0::/10", C::kDeprecated},
        {"ff00::/8", C::kMulticast},
    };
    std::vector<Entry> out;
    for (const auto& [text, cls] : rows) out.push_back({must_parse(text), cls});
    return out;
  }();
  return entries;
}

C lookup(const net::IpAddress& a) {
  const Entry* best = nullptr;
  for (const Entry& e : table())
    if (e.prefix.contains(a) && (!best || e.prefix.length > best->prefix.length)) best = &e;
  if (best) return best->cls;
  // IPv6 unicast is allocated from 2000::/3 only; the rest is reserved by
  // the IETF (the IPv6 Address Space registry) and never routed.
  if (a.family == AF_INET6 && (a.bytes[0] & 0xe0) != 0x20) return C::kReserved;
  return C::kPublic;
}

net::IpAddress v4_at(const net::IpAddress& a, size_t offset, bool inverted = false) {
  std::array<uint8_t, 4> b{};
  for (size_t i = 0; i < 4; ++i)
    b[i] = static_cast<uint8_t>(inverted ? ~a.bytes[offset + i] : a.bytes[offset + i]);
  return net::IpAddress::v4(b);
}

bool is_mapped(const net::IpAddress& a) {
  const auto& b = a.bytes;
  return a.family == AF_INET6 && std::all_of(b.begin(), b.begin() + 10, [](uint8_t v) { return v == 0; }) &&
         b[10] == 0xff && b[11] == 0xff;
}

// The worst class among the IPv4 addresses a transition form carries.
C carried(const std::vector<net::IpAddress>& inner) {
  for (const auto& a : inner)
    if (C c = lookup(a); c != C::kPublic) return c;
  return C::kPublic;
}

}  // namespace

DestinationVerdict classify_destination(const net::IpAddress& address) {
  if (is_mapped(address)) return {lookup(v4_at(address, 12)), true, std::nullopt};
  DestinationVerdict v{lookup(address), false, std::nullopt};
  switch (v.cls) {
    case C::kNat64:
    case C::kIpv4Compatible:
      v.carried = carried({v4_at(address, 12)});
      break;
    case C::kSixToFour:
      if (address.family == AF_INET6) v.carried = carried({v4_at(address, 2)});
      break;
    case C::kTeredo:
      // Server address, then the client's, stored inverted.
      v.carried = carried({v4_at(address, 4), v4_at(address, 12, true)});
      break;
    default:
      break;
  }
  return v;
}

std::string_view destination_class_name(DestinationClass cls) {
  switch (cls) {
    case C::kPublic:
      return "public";
    case C::kUnspecified:
      return "unspecified";
    case C::kLoopback:
      return "loopback";
    case C::kPrivate:
      return "private";
    case C::kLinkLocal:
      return "link-local";
    case C::kMetadata:
      return "metadata";
    case C::kCgnat:
      return "shared address space";
    case C::kMulticast:
      return "multicast";
    case C::kReserved:
      return "reserved";
    case C::kDocumentation:
      return "documentation";
    case C::kBenchmarking:
      return "benchmarking";
    case C::kProtocolAssignments:
      return "protocol assignments";
    case C::kDiscard:
      return "discard-only";
    case C::kLocalTranslation:
      return "local-use translation";
    case C::kNat64:
      return "nat64";
    case C::kSixToFour:
      return "6to4";
    case C::kTeredo:
      return "teredo";
    case C::kIpv4Compatible:
      return "ipv4-compatible";
    case C::kSegmentRouting:
      return "segment routing";
    case C::kDeprecated:
      return "deprecated";
  }
  return "unknown";
}

std::string describe_destination(const DestinationVerdict& v) {
  std::string out = "special-purpose: " + std::string(destination_class_name(v.cls));
  if (v.carried && *v.carried != C::kPublic)
    out += " (carries " + std::string(destination_class_name(*v.carried)) + ")";
  return out;
}

}  // namespace zn::proxy
