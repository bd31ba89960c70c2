#include "userspace/net/transparent_socket.h"

#include "userspace/net/unique_fd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "zn_abi.h"

namespace zn::net {
namespace {

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
}

int set_int(int fd, int level, int opt, int value) {
  return setsockopt(fd, level, opt, &value, sizeof(value));
}

// Transparent, marked, reusable. Returns -1 with errno on failure.
int open_marked(int family, int type) {
  int fd = ::socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  const bool ok = (family == AF_INET ? set_int(fd, SOL_IP, IP_TRANSPARENT, 1)
                                     : set_int(fd, SOL_IPV6, IPV6_TRANSPARENT, 1)) == 0 &&
                  set_int(fd, SOL_SOCKET, SO_MARK, ZN_MARK_HOST_REPLY) == 0 &&
                  set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) == 0 &&
                  (family == AF_INET || set_int(fd, SOL_IPV6, IPV6_V6ONLY, 1) == 0);
  if (!ok) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

sockaddr_storage make_endpoint(const std::string& ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &sin->sin_addr) == 1) {
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, ip.c_str(), &sin6->sin6_addr) == 1) {
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
  } else {
    throw std::invalid_argument("bad address " + ip);
  }
  return ss;
}

socklen_t endpoint_len(const sockaddr_storage& ss) {
  return ss.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
}

uint16_t endpoint_port(const sockaddr_storage& ss) {
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in*>(&ss)->sin_port
                                       : reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
}

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    auto* x = reinterpret_cast<const sockaddr_in*>(&a);
    auto* y = reinterpret_cast<const sockaddr_in*>(&b);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    auto* x = reinterpret_cast<const sockaddr_in6*>(&a);
    auto* y = reinterpret_cast<const sockaddr_in6*>(&b);
    return x->sin6_port == y->sin6_port && std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict on
// chained std::string operator+ (GCC PR 105329), which -Werror would make an
// error in a Release build.
std::string endpoint_text(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = "?";
  const bool v4 = ss.ss_family == AF_INET;
  if (v4) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  }
  std::string out;
  out.reserve(INET6_ADDRSTRLEN + 8);
  if (!v4) out.push_back('[');
  out.append(buf);
  out.append(v4 ? ":" : "]:");
  out.append(std::to_string(endpoint_port(ss)));
  return out;
}

int open_transparent_listener(const sockaddr_storage& addr, int type, int backlog) {
  const int raw = open_marked(addr.ss_family, type);
  check(raw, "transparent socket");
  UniqueFd guard(raw);
  if (type == SOCK_DGRAM)
    check(addr.ss_family == AF_INET ? set_int(raw, SOL_IP, IP_RECVORIGDSTADDR, 1)
                                    : set_int(raw, SOL_IPV6, IPV6_RECVORIGDSTADDR, 1),
          "RECVORIGDSTADDR");
  check(::bind(raw, reinterpret_cast<const sockaddr*>(&addr), endpoint_len(addr)),
        ("bind " + endpoint_text(addr)).c_str());
  if (type == SOCK_STREAM) check(::listen(raw, backlog), "listen");
  return guard.release();
}

uint16_t bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  check(getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len), "getsockname");
  return endpoint_port(ss);
}

uint16_t open_on_one_port(uint16_t port, const std::function<uint16_t(uint16_t)>& open,
                          const std::function<void()>& close) {
  for (int attempt = 1;; ++attempt) {
    try {
      return open(port);
    } catch (const std::system_error& e) {
      close();
      if (port != 0 || e.code() != std::errc::address_in_use || attempt == 16) throw;
    }
  }
}

std::optional<ReceivedDatagram> receive_datagram(int fd, std::span<uint8_t> buf) {
  ReceivedDatagram d;
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[256];
  msghdr msg{};
  msg.msg_name = &d.source;
  msg.msg_namelen = sizeof(d.source);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) return std::nullopt;
  d.size = static_cast<size_t>(n);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_ORIGDSTADDR) ||
        (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_ORIGDSTADDR))
      std::memcpy(&d.original_dst, CMSG_DATA(c),
                  std::min<size_t>(c->cmsg_len - CMSG_LEN(0), sizeof(d.original_dst)));
  }
  return d;
}

bool send_datagram_from(int listener_fd, const sockaddr_storage& listener_addr, const sockaddr_storage& from,
                        const sockaddr_storage& to, std::span<const uint8_t> payload) {
  auto send_on = [&](int fd) {
    ssize_t n;
    do
      n = ::sendto(fd, payload.data(), payload.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                   reinterpret_cast<const sockaddr*>(&to), endpoint_len(to));
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(payload.size());
  };
  if (from.ss_family != AF_INET && from.ss_family != AF_INET6) {
    errno = EAFNOSUPPORT;
    return false;
  }
  if (same_endpoint(from, listener_addr)) return send_on(listener_fd);
  // Only a socket bound to the original destination answers with its
  // address and port (53); IP_TRANSPARENT lets it bind a foreign address.
  const int fd = open_marked(from.ss_family, SOCK_DGRAM);
  if (fd < 0) return false;
  UniqueFd guard(fd);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), endpoint_len(from)) < 0) return false;
  return send_on(fd);
}

}  // namespace zn::net
