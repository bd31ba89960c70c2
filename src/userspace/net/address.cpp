#include "userspace/net/address.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace zn::net {

IpAddress IpAddress::v4(const std::array<uint8_t, 4>& b) {
  IpAddress a;
  a.family = AF_INET;
  std::memcpy(a.bytes.data(), b.data(), 4);
  return a;
}

IpAddress IpAddress::v6(const std::array<uint8_t, 16>& b) {
  IpAddress a;
  a.family = AF_INET6;
  a.bytes = b;
  return a;
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  const std::string s(text);
  IpAddress a;
  if (inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return std::nullopt;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN] = "";
  inet_ntop(family, bytes.data(), buf, sizeof(buf));
  return buf;
}

in_addr parse_ip4(const std::string& text) {
  in_addr addr{};
  if (::inet_pton(AF_INET, text.c_str(), &addr) != 1)
    throw std::invalid_argument("not an IPv4 address: '" + text + "'");
  return addr;
}

in6_addr parse_ip6(const std::string& text) {
  in6_addr addr{};
  if (::inet_pton(AF_INET6, text.c_str(), &addr) != 1)
    throw std::invalid_argument("not an IPv6 address: '" + text + "'");
  return addr;
}

std::string to_string(const in_addr& addr) {
  char buf[INET_ADDRSTRLEN];
  return ::inet_ntop(AF_INET, &addr, buf, sizeof buf);
}

std::string to_string(const in6_addr& addr) {
  char buf[INET6_ADDRSTRLEN];
  return ::inet_ntop(AF_INET6, &addr, buf, sizeof buf);
}

std::string to_string(const MacAddress& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
                mac[5]);
  return buf;
}

in6_addr eui64_link_local(const MacAddress& mac) {
  in6_addr addr{};
  addr.s6_addr[0] = 0xfe;
  addr.s6_addr[1] = 0x80;
  addr.s6_addr[8] = mac[0] ^ 0x02;  // flip the universal/local bit
  addr.s6_addr[9] = mac[1];
  addr.s6_addr[10] = mac[2];
  addr.s6_addr[11] = 0xff;
  addr.s6_addr[12] = 0xfe;
  addr.s6_addr[13] = mac[3];
  addr.s6_addr[14] = mac[4];
  addr.s6_addr[15] = mac[5];
  return addr;
}

}  // namespace zn::net
