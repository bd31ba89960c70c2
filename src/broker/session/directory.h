// The read-only view of the sessions that the broker's answers to DNS and the
// proxy need: which session a guest address belongs to, and a session by id.
// SessionRegistry implements it; the policies' unit tests give a fake one
// (the registry needs root: TAPs, BPF maps).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "broker/session/session.h"

namespace zn::broker {

// A session as it was when looked up: immutable, shared, never copied on the
// data path (its policy JSON carries secrets). An update publishes a new
// snapshot; a verdict in flight keeps the one it started with, so it never
// sees half of an update.
using SessionPtr = std::shared_ptr<const Session>;

class SessionDirectory {
 public:
  virtual ~SessionDirectory() = default;

  // Null when there is no such session. Thread-safe, any thread, and they
  // never wait for I/O: the lock they take is held by writers only to swap
  // pointers, never across name resolution, device changes or the state
  // file (those are serialised by the control plane's own lock). Called
  // from the DNS responder's loop (SessionDnsPolicy) and the proxy's pool
  // (SessionProxyPolicy).
  virtual SessionPtr get(const std::string& id) const = 0;
  // The session a guest source address belongs to.
  virtual SessionPtr find_by_guest_ip4(in_addr addr) const = 0;
  virtual SessionPtr find_by_guest_ip6(const in6_addr& addr) const = 0;
  // The session a guest's socket address (its source, as received by DNS or
  // the proxy) belongs to, either family; null for any other family.
  SessionPtr find_by_guest(const sockaddr_storage& guest) const {
    if (guest.ss_family == AF_INET)
      return find_by_guest_ip4(reinterpret_cast<const sockaddr_in*>(&guest)->sin_addr);
    if (guest.ss_family == AF_INET6)
      return find_by_guest_ip6(reinterpret_cast<const sockaddr_in6*>(&guest)->sin6_addr);
    return nullptr;
  }
};

}  // namespace zn::broker
