// An Asio endpoint for a resolved address (the proxy's upstream connects).
#pragma once

#include <algorithm>
#include <asio.hpp>

#include "userspace/net/address.h"

namespace zn::net {

inline asio::ip::tcp::endpoint endpoint_of(const IpAddress& a, uint16_t port) {
  if (a.family == AF_INET) {
    asio::ip::address_v4::bytes_type b;
    std::copy(a.bytes.begin(), a.bytes.begin() + 4, b.begin());
    return {asio::ip::address_v4(b), port};
  }
  asio::ip::address_v6::bytes_type b;
  std::copy(a.bytes.begin(), a.bytes.end(), b.begin());
  return {asio::ip::address_v6(b), port};
}

}  // namespace zn::net
