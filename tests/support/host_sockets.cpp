#include "support/host_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "userspace/dns_transparent.h"
#include "zn_abi.h"

namespace zn::test {
namespace {

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
}

void set_int(int fd, int level, int opt, int value, const char* what) {
  check(setsockopt(fd, level, opt, &value, sizeof(value)), what);
}

void make_transparent(int fd, int family) {
  if (family == AF_INET)
    set_int(fd, SOL_IP, IP_TRANSPARENT, 1, "IP_TRANSPARENT");
  else
    set_int(fd, SOL_IPV6, IPV6_TRANSPARENT, 1, "IPV6_TRANSPARENT");
  set_int(fd, SOL_SOCKET, SO_MARK, ZN_MARK_HOST_REPLY, "SO_MARK");
  set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR");
}

bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

TransparentTcpListener::TransparentTcpListener(const std::string& ip, uint16_t port) {
  sockaddr_storage ss = make_sockaddr(ip, port);
  fd_ = Fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  check(fd_.get(), "socket");
  make_transparent(fd_.get(), ss.ss_family);
  check(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&ss), dns::endpoint_len(ss)), "bind");
  check(::listen(fd_.get(), 64), "listen");
  port_ = dns::bound_port(fd_.get());
}

std::optional<Accepted> TransparentTcpListener::accept_for(std::chrono::milliseconds timeout) {
  if (!wait_readable(fd_.get(), timeout)) return std::nullopt;
  sockaddr_storage peer{};
  socklen_t len = sizeof(peer);
  Fd conn(::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC));
  if (conn.get() < 0) return std::nullopt;
  sockaddr_storage local{};
  len = sizeof(local);
  check(getsockname(conn.get(), reinterpret_cast<sockaddr*>(&local), &len), "getsockname");
  return Accepted{std::move(conn), sockaddr_text(local), sockaddr_text(peer)};
}

TransparentUdpSocket::TransparentUdpSocket(const std::string& ip, uint16_t port) {
  sockaddr_storage ss = make_sockaddr(ip, port);
  family_ = ss.ss_family;
  fd_ = Fd(::socket(family_, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  check(fd_.get(), "socket");
  make_transparent(fd_.get(), family_);
  if (family_ == AF_INET)
    set_int(fd_.get(), SOL_IP, IP_RECVORIGDSTADDR, 1, "IP_RECVORIGDSTADDR");
  else
    set_int(fd_.get(), SOL_IPV6, IPV6_RECVORIGDSTADDR, 1, "IPV6_RECVORIGDSTADDR");
  check(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&ss), dns::endpoint_len(ss)), "bind");
  port_ = dns::bound_port(fd_.get());
}

std::optional<Datagram> TransparentUdpSocket::recv_for(std::chrono::milliseconds timeout) {
  if (!wait_readable(fd_.get(), timeout)) return std::nullopt;
  Datagram d;
  d.payload.resize(65536);
  iovec iov{d.payload.data(), d.payload.size()};
  alignas(cmsghdr) char control[256];
  msghdr msg{};
  msg.msg_name = &d.peer_addr;
  msg.msg_namelen = sizeof(d.peer_addr);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = ::recvmsg(fd_.get(), &msg, 0);
  if (n < 0) return std::nullopt;
  d.payload.resize(static_cast<size_t>(n));
  d.peer = sockaddr_text(d.peer_addr);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if ((c->cmsg_level == SOL_IP && c->cmsg_type == IP_ORIGDSTADDR) ||
        (c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_ORIGDSTADDR))
      std::memcpy(&d.original_dst, CMSG_DATA(c),
                  std::min<size_t>(c->cmsg_len - CMSG_LEN(0), sizeof(d.original_dst)));
  }
  return d;
}

void TransparentUdpSocket::reply(const Datagram& to, const std::vector<uint8_t>& payload) {
  // Only a socket bound to the original destination answers with its port.
  Fd s(::socket(to.original_dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  check(s.get(), "socket");
  make_transparent(s.get(), to.original_dst.ss_family);
  check(::bind(s.get(), reinterpret_cast<const sockaddr*>(&to.original_dst), dns::endpoint_len(to.original_dst)),
        "bind original destination");
  check(static_cast<int>(::sendto(s.get(), payload.data(), payload.size(), 0,
                                  reinterpret_cast<const sockaddr*>(&to.peer_addr),
                                  dns::endpoint_len(to.peer_addr))),
        "sendto");
}

}  // namespace zn::test
