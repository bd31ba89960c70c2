#include "support/host_sockets.h"

#include <netinet/in.h>
#include <poll.h>

#include <cerrno>
#include <system_error>

namespace zn::test {
namespace {

void check(int rc, const char* what) {
  if (rc < 0) throw std::system_error(errno, std::generic_category(), what);
}

bool wait_readable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (rc < 0 && errno == EINTR);
  return rc > 0;
}

}  // namespace

// The same transparent, marked sockets the DNS responder and proxy open.
TransparentTcpListener::TransparentTcpListener(const std::string& ip, uint16_t port)
    : fd_(zn::net::open_transparent_listener(make_sockaddr(ip, port), SOCK_STREAM, 64)),
      port_(zn::net::bound_port(fd_.get())) {}

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

TransparentUdpSocket::TransparentUdpSocket(const std::string& ip, uint16_t port)
    : address_(make_sockaddr(ip, port)),
      fd_(zn::net::open_transparent_listener(address_, SOCK_DGRAM)),
      port_(zn::net::bound_port(fd_.get())) {}

std::optional<Datagram> TransparentUdpSocket::recv_for(std::chrono::milliseconds timeout) {
  if (!wait_readable(fd_.get(), timeout)) return std::nullopt;
  Datagram d;
  d.payload.resize(65536);
  auto received = zn::net::receive_datagram(fd_.get(), d.payload);
  if (!received) return std::nullopt;
  d.payload.resize(received->size);
  d.peer_addr = received->source;
  d.original_dst = received->original_dst;
  d.peer = sockaddr_text(d.peer_addr);
  return d;
}

void TransparentUdpSocket::reply(const Datagram& to, const std::vector<uint8_t>& payload) {
  // From the address and port the guest sent to (e.g. 8.8.8.8:53).
  if (!zn::net::send_datagram_from(fd_.get(), address_, to.original_dst, to.peer_addr, payload))
    throw std::system_error(errno, std::generic_category(), "reply from " + sockaddr_text(to.original_dst));
}

}  // namespace zn::test
