// Persistent TAP devices: what a VMM attaches a virtio-net backend to.
// All functions act in the calling thread's network namespace.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "userspace/net/address.h"
#include "userspace/net/unique_fd.h"

namespace zn::vmm {

struct TapSettings {
  std::optional<net::MacAddress> mac;  // kernel-random when unset; when set, the link-local
                                       // is its EUI-64 (eui64_link_local) whatever addr_gen_mode
  unsigned mtu = 1500;
  std::vector<std::string> addresses;  // CIDR, e.g. "198.19.0.1/24"; IPv6 added with IFA_F_NODAD
  bool up = true;
};

// Creates a persistent TAP (IFF_TAP|IFF_NO_PI, TUNSETPERSIST) named `name`,
// configures it and returns its ifindex. Throws std::system_error if the name
// is taken; a failed configuration deletes the device again.
int create_tap(const std::string& name, const TapSettings& settings = {});

// Deletes the device (any kind) named `name`; returns false if there was none.
bool delete_tap(const std::string& name);

// Attaches a new file descriptor (O_CLOEXEC, blocking) to an existing
// persistent TAP, for a frame pump or VMM. While it is open the TAP has
// carrier; a single-queue TAP accepts one such fd at a time (EBUSY otherwise).
net::UniqueFd open_tap(const std::string& name);

// The name of the TAP `tap_fd` is attached to (TUNGETIFF).
std::string tap_name(int tap_fd);

// Who may attach to the TAP `tap_fd` is attached to without CAP_NET_ADMIN
// (TUNSETOWNER and TUNSETGROUP): a process whose euid is `owner` and which
// is in group `group`. For a VMM that opens the TAP by name itself
// (Firecracker) as its own uid; root (0, 0) takes it back. A TAP with
// neither set can be attached to by any uid while no one holds it.
void set_tap_owner(int tap_fd, uid_t owner, gid_t group);

}  // namespace zn::vmm
