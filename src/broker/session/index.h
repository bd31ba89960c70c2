// Every live session, indexed by what the data path knows of a packet or a
// connection: the guest's address (DNS, proxy), the TAP's ifindex and the
// datapath's session index (drop events), and by id (control plane).
// Entries are immutable snapshots swapped whole; the lock is held only for a
// lookup or a swap, so a reader never waits for a writer's I/O.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/session/directory.h"

namespace zn::broker {

class SessionIndex {
 public:
  // Adds the session, or replaces the one of the same id (its keys
  // re-indexed). Thread-safe.
  void put(SessionPtr s);
  // Removes the session of this id; returns it (null if absent). Thread-safe.
  SessionPtr erase(const std::string& id);

  // Null when absent. Thread-safe; never blocks on more than a swap.
  SessionPtr by_id(const std::string& id) const;
  SessionPtr by_guest_ip4(in_addr addr) const;
  SessionPtr by_guest_ip6(const in6_addr& addr) const;
  SessionPtr by_ifindex(int ifindex) const;
  SessionPtr by_session_idx(uint32_t idx) const;

  // Id order. A copy of the pointers, not of the sessions.
  std::vector<SessionPtr> all() const;
  size_t size() const;

 private:
  using Ip6Key = std::array<uint8_t, 16>;
  struct Ip6Hash {
    size_t operator()(const Ip6Key& k) const noexcept;
  };
  void unindex_locked(const Session& s);

  mutable std::shared_mutex mu_;
  std::map<std::string, SessionPtr> by_id_;
  std::unordered_map<uint32_t, SessionPtr> by_ip4_;  // network order s_addr
  std::unordered_map<Ip6Key, SessionPtr, Ip6Hash> by_ip6_;
  std::unordered_map<int, SessionPtr> by_ifindex_;
  std::unordered_map<uint32_t, SessionPtr> by_idx_;
};

}  // namespace zn::broker
