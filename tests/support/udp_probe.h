// Reachability check without external tools (ping may not be installed): a
// UDP datagram from one namespace to a socket in another, and its echo back.
#pragma once

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>
#include <string>
#include <system_error>

#include "common/netns.h"
#include "userspace/net/unique_fd.h"

namespace zn::vmm::testing {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// "198.19.0.1", "2001:db8::1" or "fe80::1%dev" (dev resolved in the current netns).
inline SockAddr make_addr(const std::string& text, std::uint16_t port) {
  SockAddr out;
  auto pct = text.find('%');
  std::string ip = text.substr(0, pct);
  if (ip.find(':') == std::string::npos) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&out.storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    if (::inet_pton(AF_INET, ip.c_str(), &sin->sin_addr) != 1) throw std::invalid_argument(text);
    out.len = sizeof *sin;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    if (::inet_pton(AF_INET6, ip.c_str(), &sin6->sin6_addr) != 1) throw std::invalid_argument(text);
    if (pct != std::string::npos) sin6->sin6_scope_id = ::if_nametoindex(text.c_str() + pct + 1);
    out.len = sizeof *sin6;
  }
  return out;
}

inline zn::net::UniqueFd udp_socket(int family) {
  zn::net::UniqueFd fd(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) throw std::system_error(errno, std::generic_category(), "socket");
  timeval tv{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// True if a datagram sent from client_ns reaches server_ip in server_ns and
// the reply comes back (three tries, 1 s each). A link-local server_ip needs
// "%dev" naming the client's outgoing device; the server then listens on any.
inline bool udp_round_trip(const std::string& client_ns, const std::string& server_ns,
                           const std::string& server_ip) {
  const bool link_local = server_ip.find('%') != std::string::npos;
  const int family = server_ip.find(':') == std::string::npos ? AF_INET : AF_INET6;
  zn::net::UniqueFd server, client;
  std::uint16_t port = 0;
  {
    NetnsScope in_server(server_ns);
    server = udp_socket(family);
    SockAddr bind_addr = make_addr(link_local ? "::" : server_ip, 0);
    if (::bind(server.get(), bind_addr.get(), bind_addr.len) != 0)
      throw std::system_error(errno, std::generic_category(), "bind " + server_ip);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(server.get(), reinterpret_cast<sockaddr*>(&bound), &len);
    port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);  // same offset for v6
  }
  SockAddr dst;
  {
    NetnsScope in_client(client_ns);
    client = udp_socket(family);
    dst = make_addr(server_ip, port);
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (::sendto(client.get(), "probe", 5, 0, dst.get(), dst.len) != 5) continue;
    char buf[16];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    ssize_t n = ::recvfrom(server.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n != 5) continue;
    ::sendto(server.get(), buf, 5, 0, reinterpret_cast<sockaddr*>(&from), from_len);
    if (::recv(client.get(), buf, sizeof buf, 0) == 5 && std::memcmp(buf, "probe", 5) == 0) return true;
  }
  return false;
}

}  // namespace zn::vmm::testing
