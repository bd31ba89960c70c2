// Host-side sockets that stand where the proxy and the DNS responder will:
// transparent (IP_TRANSPARENT), marked as allowed to answer guests.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "userspace/net/transparent_socket.h"
#include "userspace/net/unique_fd.h"

namespace zn::test {

// "1.2.3.4:80" / "[::1]:80"
inline std::string sockaddr_text(const sockaddr_storage& ss) { return zn::net::endpoint_text(ss); }
inline sockaddr_storage make_sockaddr(const std::string& ip, uint16_t port) {
  return zn::net::make_endpoint(ip, port);
}

using Fd = zn::net::UniqueFd;

struct Accepted {
  Fd fd;
  std::string original_dst;  // getsockname() of the accepted socket
  std::string peer;
};

class TransparentTcpListener {
 public:
  // ip "127.0.0.1" or "::1"; port 0 picks a free one.
  TransparentTcpListener(const std::string& ip, uint16_t port);
  uint16_t port() const { return port_; }
  int fd() const { return fd_.get(); }
  std::optional<Accepted> accept_for(std::chrono::milliseconds timeout);

 private:
  Fd fd_;
  uint16_t port_ = 0;
};

struct Datagram {
  std::vector<uint8_t> payload;
  std::string peer;
  sockaddr_storage peer_addr{};
  sockaddr_storage original_dst{};
};

class TransparentUdpSocket {
 public:
  TransparentUdpSocket(const std::string& ip, uint16_t port);
  uint16_t port() const { return port_; }
  std::optional<Datagram> recv_for(std::chrono::milliseconds timeout);
  // Answers from the address the guest sent to (e.g. 8.8.8.8:53).
  void reply(const Datagram& to, const std::vector<uint8_t>& payload);

 private:
  sockaddr_storage address_;
  Fd fd_;
  uint16_t port_ = 0;
};

}  // namespace zn::test
