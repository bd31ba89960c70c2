#include "userspace/net/address.h"

#include <arpa/inet.h>

#include <cstring>

namespace zn::dns {

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

}  // namespace zn::dns
