#include "userspace/net/prefix.h"

#include <algorithm>
#include <charconv>

namespace zn::net {

std::optional<AddressPrefix> AddressPrefix::parse(std::string_view text) {
  const size_t slash = text.find('/');
  auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) return std::nullopt;
  AddressPrefix p{*address, address->family == AF_INET ? 32u : 128u};
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    unsigned n = 0;
    auto [end, ec] = std::from_chars(len.data(), len.data() + len.size(), n);
    if (len.empty() || ec != std::errc() || end != len.data() + len.size() || n > p.length)
      return std::nullopt;
    p.length = n;
  }
  for (unsigned bit = p.length; bit < p.network.size() * 8; ++bit)
    if (p.network.bytes[bit / 8] & (0x80 >> (bit % 8))) return std::nullopt;  // host bits set
  return p;
}

bool AddressPrefix::contains(const IpAddress& a) const {
  if (a.family != network.family) return false;
  const unsigned full = length / 8;
  if (!std::equal(network.bytes.begin(), network.bytes.begin() + full, a.bytes.begin())) return false;
  if (length % 8 == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - length % 8));
  return (network.bytes[full] & mask) == (a.bytes[full] & mask);
}

bool AddressPrefix::within(const AddressPrefix& outer) const {
  return network.family == outer.network.family && length >= outer.length && outer.contains(network);
}

std::string AddressPrefix::to_string() const { return network.to_string() + "/" + std::to_string(length); }

IpAddress unmap_ipv4(const IpAddress& a) {
  const bool mapped = a.family == AF_INET6 &&
                      std::all_of(a.bytes.begin(), a.bytes.begin() + 10, [](uint8_t b) { return b == 0; }) &&
                      a.bytes[10] == 0xff && a.bytes[11] == 0xff;
  if (!mapped) return a;
  IpAddress v4;
  v4.family = AF_INET;
  std::copy(a.bytes.begin() + 12, a.bytes.begin() + 16, v4.bytes.begin());
  return v4;
}

}  // namespace zn::net
