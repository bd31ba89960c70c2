// The read-only view of the sessions that the broker's answers to DNS and the
// proxy need: which session a guest address belongs to, and a session by id.
// SessionRegistry implements it; the policies' unit tests give a fake one
// (the registry needs root: TAPs, BPF maps).
#pragma once

#include <netinet/in.h>

#include <optional>
#include <string>

#include "broker/session/session.h"

namespace zn::broker {

class SessionDirectory {
 public:
  virtual ~SessionDirectory() = default;

  // Each returns a copy (its policy a shared immutable snapshot), so a
  // verdict in flight never sees half of an update. Thread-safe, any thread,
  // but may block: the registry's lock is held by the control plane across
  // name resolution and the state file's writes (issue 11). Called from the
  // DNS responder's loop (SessionDnsPolicy) and the proxy's pool
  // (SessionProxyPolicy).
  virtual std::optional<Session> get(const std::string& id) const = 0;
  // The session a guest source address belongs to.
  virtual std::optional<Session> find_by_guest_ip4(in_addr addr) const = 0;
  virtual std::optional<Session> find_by_guest_ip6(const in6_addr& addr) const = 0;
};

}  // namespace zn::broker
