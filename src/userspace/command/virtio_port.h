// The agent's transport in a QEMU microVM (issue 15): virtio-serial ports.
// QEMU backs each port with a UNIX socket in the VM's directory on the host;
// zerod (root, or the VM's own uid) is the only one who can connect there,
// and in the guest only root can open the port's device, which takes one
// opener at a time: the agent holds them all from boot. No network is
// involved, so the datapath admits nothing for the agent.
//
// One exchange (one envelope, its reply) per host connection: the host
// side connecting wakes the agent (SIGIO, directed at the thread serving
// the port), zerod's closing ends the exchange (a read returns 0 and poll
// reports POLLHUP while no one is connected). The close comes as a control
// message that may be handled after the next connection's first bytes, so
// during an exchange a host gone for less than a grace period is not taken
// for its end (agent.cpp, kHostGrace).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "userspace/command/agent.h"

namespace zn::command {

inline constexpr const char* kVirtioPortsDir = "/sys/class/virtio-ports";

struct VirtioPort {
  std::string name;    // what QEMU's virtserialport was named
  std::string device;  // /dev/vportNpM
};

// The ports named `prefix` followed by "." and anything, sorted by name,
// as listed under `sysfs` (each entry a directory with a `name` file).
std::vector<VirtioPort> find_virtio_ports(const std::string& prefix,
                                          const std::string& sysfs = kVirtioPortsDir);

// Whether someone is connected on the host side of a port: it reports
// POLLHUP while no one is.
bool host_connected(int fd);

// Opens a port to serve (non-blocking, close-on-exec) and asks for SIGIO on
// the calling thread when its host side connects; the caller must have
// SIGIO blocked (it is waited for, never handled). Throws std::runtime_error.
int open_virtio_port(const std::string& device);

// Serves the port for ever, one exchange per host connection; `on_exchange`
// sees each outcome (never a body, argv or file contents).
[[noreturn]] void serve_virtio_port(Agent& agent, int fd,
                                    const std::function<void(const ServeOutcome&)>& on_exchange);

}  // namespace zn::command
