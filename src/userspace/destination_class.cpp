#include "userspace/destination_class.h"

#include <algorithm>
#include <array>

namespace zn::proxy {
namespace {

using V4 = std::array<uint8_t, 4>;

DestinationClass classify_v4(const V4& a) {
  const uint32_t x = uint32_t{a[0]} << 24 | uint32_t{a[1]} << 16 | uint32_t{a[2]} << 8 | a[3];
  auto in = [&](uint32_t net, int bits) { return bits == 0 || (x >> (32 - bits)) == (net >> (32 - bits)); };
  if (x == 0xa9fea9fe) return DestinationClass::kMetadata;  // 169.254.169.254
  if (in(0x00000000, 8)) return DestinationClass::kUnspecified;
  if (in(0x7f000000, 8)) return DestinationClass::kLoopback;
  if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16)) return DestinationClass::kPrivate;
  if (in(0xa9fe0000, 16)) return DestinationClass::kLinkLocal;
  if (in(0x64400000, 10)) return DestinationClass::kCgnat;
  if (in(0xe0000000, 4)) return DestinationClass::kMulticast;
  if (in(0xf0000000, 4)) return DestinationClass::kReserved;  // includes 255.255.255.255
  return DestinationClass::kPublic;
}

bool prefix(const std::array<uint8_t, 16>& b, std::initializer_list<uint8_t> head) {
  return std::equal(head.begin(), head.end(), b.begin());
}

V4 v4_at(const std::array<uint8_t, 16>& b, size_t offset, bool inverted = false) {
  V4 out{};
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(inverted ? ~b[offset + i] : b[offset + i]);
  return out;
}

DestinationVerdict embedded(DestinationClass cls) { return {cls, cls != DestinationClass::kPublic}; }

// The worse of two embedded addresses (Teredo carries server and client).
DestinationVerdict worst(const V4& a, const V4& b) {
  DestinationClass ca = classify_v4(a), cb = classify_v4(b);
  return embedded(ca != DestinationClass::kPublic ? ca : cb);
}

}  // namespace

DestinationVerdict classify_destination(const dns::IpAddress& address) {
  const auto& b = address.bytes;
  if (address.family == AF_INET) return {classify_v4(v4_at(b, 0)), false};

  static const std::array<uint8_t, 16> kMetadata6 = {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0,
                                                     0,    0,    0,    0,    0, 0, 0x02, 0x54};
  if (b == kMetadata6) return {DestinationClass::kMetadata, false};
  const bool first_80_zero = std::all_of(b.begin(), b.begin() + 10, [](uint8_t v) { return v == 0; });
  if (first_80_zero && b[10] == 0xff && b[11] == 0xff) return embedded(classify_v4(v4_at(b, 12)));  // ::ffff:a.b.c.d
  if (first_80_zero && b[10] == 0 && b[11] == 0) {
    const V4 tail = v4_at(b, 12);
    if (tail == V4{0, 0, 0, 0}) return {DestinationClass::kUnspecified, false};  // ::
    if (tail == V4{0, 0, 0, 1}) return {DestinationClass::kLoopback, false};     // ::1
    return embedded(classify_v4(tail));                                          // ::a.b.c.d (deprecated)
  }
  if (prefix(b, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01})) return {DestinationClass::kPrivate, false};  // 64:ff9b:1::/48
  if (prefix(b, {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}))
    return embedded(classify_v4(v4_at(b, 12)));                        // NAT64 64:ff9b::/96
  if (prefix(b, {0x20, 0x02})) return embedded(classify_v4(v4_at(b, 2)));  // 6to4 2002:V4::/48
  if (prefix(b, {0x20, 0x01, 0x00, 0x00})) return worst(v4_at(b, 4), v4_at(b, 12, true));  // Teredo
  if ((b[0] & 0xfe) == 0xfc) return {DestinationClass::kPrivate, false};                  // fc00::/7
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return {DestinationClass::kLinkLocal, false};  // fe80::/10
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return {DestinationClass::kPrivate, false};    // fec0::/10
  if (b[0] == 0xff) return {DestinationClass::kMulticast, false};
  return {DestinationClass::kPublic, false};
}

std::string_view destination_class_name(DestinationClass cls) {
  switch (cls) {
    case DestinationClass::kPublic: return "public";
    case DestinationClass::kUnspecified: return "unspecified";
    case DestinationClass::kLoopback: return "loopback";
    case DestinationClass::kPrivate: return "private";
    case DestinationClass::kLinkLocal: return "link-local";
    case DestinationClass::kMetadata: return "metadata";
    case DestinationClass::kCgnat: return "cgnat";
    case DestinationClass::kMulticast: return "multicast";
    case DestinationClass::kReserved: return "reserved";
  }
  return "unknown";
}

}  // namespace zn::proxy
