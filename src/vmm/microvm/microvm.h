// A microVM on a governed TAP (issue 14): the interface every backend
// launches behind, and what a running VM is. A VM gets exactly what a lab
// guest gets: the session's TAP (already under the datapath's programs), the
// session's MAC and addresses, the deployment CA; nothing secret.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/net/unique_fd.h"
#include "vmm/microvm/guest_config.h"
#include "vmm/microvm/vm_cgroup.h"

namespace zn::vmm {

// The VM's disk: a writable overlay of its own, in its directory, on a base
// the VMs share and never write (vmm/microvm/vm_disk.h).
struct VmDisk {
  std::string base;     // absolute path on the host: a raw or qcow2 image
  bool encrypt = true;  // the overlay under a per-VM key zerod holds
  std::string format;   // the base's ("raw", "qcow2"): the backend fills it in
};

struct VmSpec {
  std::string name;       // the session id: names the cgroup and the directory
  std::string directory;  // the VM's own (created by the caller, owned by uid, 0700)
  std::string kernel;     // the guest kernel
  std::string initrd;     // the shared guest image (scripts/build-guest.sh)
  uint32_t memory_mib = 256;
  uint32_t vcpus = 1;
  uid_t uid = 0;  // the VM's own; never 0
  gid_t gid = 0;
  net::UniqueFd tap;  // the session's TAP, attached (vmm::open_tap)
  GuestBoot boot;
  std::optional<VmDisk> disk;  // the guest's /dev/vda
};

enum class Accel { kKvm, kTcg };
std::string_view accel_name(Accel);

class MicroVm {
 public:
  virtual ~MicroVm() = default;
  virtual pid_t pid() const = 0;
  // Whether the VMM process still runs (reaps it once it has exited).
  virtual bool running() = 0;
  // Exit status text once exited ("exited 0", "killed by signal 9").
  virtual std::string exit_status() const = 0;
  // SIGTERM, then SIGKILL after `grace`; the process reaped and the cgroup
  // removed. Idempotent.
  virtual void stop(std::chrono::milliseconds grace) = 0;
  virtual std::string console_path() const = 0;  // the guest's serial output
  virtual Accel accel() const = 0;
  // The host ends of the agent's virtio-serial channels (UNIX sockets, one
  // exchange per connection); empty when the agent is reached over TCP or
  // the VM has none.
  virtual std::vector<std::string> agent_sockets() const { return {}; }
};

class VmBackend {
 public:
  virtual ~VmBackend() = default;
  virtual std::string name() const = 0;
  // Why this backend cannot run VMs on this host, nullopt when it can.
  virtual std::optional<std::string> unavailable() const = 0;
  // How this backend's VMs reach their agent.
  virtual AgentTransport agent_transport() const { return AgentTransport::kTcp; }
  // Throws std::runtime_error (what could not be done).
  virtual std::unique_ptr<MicroVm> launch(VmSpec spec) = 0;
};

}  // namespace zn::vmm
