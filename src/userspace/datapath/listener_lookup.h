// The host namespace's listener lookup for governed devices
// (bpf/listener_lookup.bpf.c): a SYN that TC ingress handed to a four-tuple
// the host still holds in TIME_WAIT reaches zerod's listener at once instead
// of being answered with the old connection's ACK (the guest then resets and
// retries its SYN: 10-16 ms, or a second, per affected connect).
#pragma once

#include <cstdint>

#include "userspace/datapath/datapath.h"
#include "userspace/net/unique_fd.h"
#include "zn_listener_slots.h"

struct listener_lookup;

namespace zn::dp {

enum class ListenerKind { kProxy, kDns };

class ListenerLookup {
 public:
  // Loads the program over the datapath's maps and attaches it (a BPF link,
  // held by this object) to the calling thread's network namespace. Throws
  // with the reason when the kernel refuses either.
  explicit ListenerLookup(const Datapath& datapath);
  ~ListenerLookup();
  ListenerLookup(const ListenerLookup&) = delete;
  ListenerLookup& operator=(const ListenerLookup&) = delete;

  // A listening TCP socket of that kind (its family read from the socket):
  // steered TCP re-looked-up on a governed device goes there. A closed
  // socket leaves its slot by itself; until one is set, such a packet is
  // dropped.
  void set(ListenerKind kind, int listener_fd);

 private:
  struct listener_lookup* skel_ = nullptr;
  net::UniqueFd link_;
};

}  // namespace zn::dp
