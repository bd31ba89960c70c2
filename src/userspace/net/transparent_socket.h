// Sockets of the DNS listener: transparent (the datapath assigns guest
// packets for any destination to them), marked so TC egress lets their
// replies reach the guest, and UDP replies sent from the address and port the
// guest asked (e.g. 8.8.8.8:53).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

namespace zn::net {

// "1.2.3.4" / "::1" plus port; throws std::invalid_argument on a bad address.
sockaddr_storage make_endpoint(const std::string& ip, uint16_t port);
socklen_t endpoint_len(const sockaddr_storage& ss);
uint16_t endpoint_port(const sockaddr_storage& ss);
bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b);
std::string endpoint_text(const sockaddr_storage& ss);  // "1.2.3.4:53" / "[::1]:53"

// A non-blocking transparent socket bound to addr (SOCK_DGRAM: with
// IP(V6)_RECVORIGDSTADDR; SOCK_STREAM: listening). Throws std::system_error.
int open_transparent_listener(const sockaddr_storage& addr, int type, int backlog = 128);
uint16_t bound_port(int fd);  // throws std::system_error

// A service's listeners on one port number: open(port) opens them all and
// returns the number taken (for port 0, what its first bind picked); close()
// undoes what a failed open() made. With port 0 another socket type or
// address may already hold the number the first bind picked (a TCP client's
// ephemeral port beside a UDP listener's): then a new one is picked, up to
// 16 times. Any other failure, and a fixed port in use, is thrown.
uint16_t open_on_one_port(uint16_t port, const std::function<uint16_t(uint16_t)>& open,
                          const std::function<void()>& close);

struct ReceivedDatagram {
  size_t size = 0;
  sockaddr_storage source{};
  sockaddr_storage original_dst{};  // where the guest sent it
};
// One datagram into buf; nullopt when none is waiting (or on error).
std::optional<ReceivedDatagram> receive_datagram(int fd, std::span<uint8_t> buf);

// Sends payload to `to` from `from`. If `from` is the listener's own
// address the listener socket is used, otherwise a short-lived transparent
// socket bound to `from`. Returns false on failure (errno set).
bool send_datagram_from(int listener_fd, const sockaddr_storage& listener_addr, const sockaddr_storage& from,
                        const sockaddr_storage& to, std::span<const uint8_t> payload);

}  // namespace zn::net
