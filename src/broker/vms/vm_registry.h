// A session's microVM (issue 14): launched on the session's own TAP (the
// datapath's programs already on it) with the session's network and the
// deployment CA, as a uid of its own in a directory of its own; stopped, its
// directory and cgroup removed, when asked or when the session goes. One VM
// per session: the session is the sandbox, the VM what runs in it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/session/directory.h"
#include "vmm/microvm/microvm.h"

namespace zn::broker {

struct VmRunRequest {
  std::string session;
  std::string kernel, initrd;  // absolute paths on the host
  uint32_t memory_mib = 256;
  uint32_t vcpus = 1;
  std::string backend = "qemu";
  std::string user_data;  // an optional boot script (public: shown on the console)
  bool poweroff_after = false;
  // A base image (absolute path, raw or qcow2, never written): the VM gets
  // a writable overlay of its own on it, encrypted unless asked otherwise,
  // removed with the VM.
  std::string disk;
  bool encrypt_disk = true;
};

// What vm.console returns: console bytes from an offset on.
struct ConsoleChunk {
  std::string text;     // valid UTF-8 (a sequence cut at the end waits for the next call)
  uint64_t offset = 0;  // where the next call continues
  bool running = false;
};

// A refusal the operator can act on (bad request, no such session, a VM
// already running, a backend unavailable).
struct VmError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct VmRegistryOptions {
  std::string directory;  // state_dir/vms: one directory per VM
  // Names this zerod's VMs host-wide (their cgroups, QEMU's -name): two
  // zerods on one host (their own state_dirs) may both have a session
  // "vm-1", and one stopping its VM must not kill the other's through a
  // shared cgroup. Stable across restarts (leftovers are found by it).
  // Empty: the session id alone.
  std::string instance;
  std::string ca_cert_path;  // the deployment CA (public)
  uid_t uid_base = 0;        // a VM runs as uid_base + its session's slot
  // The command agent every VM boots with (issue 15): the static binary's
  // path, and the session's agent config (secret). Empty path: no agent.
  std::string agent_binary;
  std::function<std::string(const std::string& session)> agent_config;
  uint16_t agent_port = 0;
  // Told when a session's VM reaches its agent some other way than the
  // agent port (false: the datapath need not admit zerod there any more)
  // and when that VM is gone (true). May be empty.
  std::function<void(const std::string& session, bool over_tcp)> agent_over_tcp;
  std::vector<std::shared_ptr<vmm::VmBackend>> backends;
};

class VmRegistry {
 public:
  VmRegistry(const SessionDirectory& sessions, VmRegistryOptions options);
  ~VmRegistry();  // stops every VM

  // Throws VmError. Blocks (a first KVM probe, copying the image): the
  // control plane's.
  nlohmann::json run(const VmRunRequest& request);
  nlohmann::json list();
  // Stops the session's VM and removes its directory; false if it had none.
  bool stop(const std::string& session);
  // The last `max_bytes` of the VM's serial console. Throws VmError.
  std::string console(const std::string& session, size_t max_bytes);
  // Up to `max_bytes` of it from `offset` on (for following it). Throws VmError.
  ConsoleChunk console_from(const std::string& session, uint64_t offset, size_t max_bytes);
  // The backends and why any cannot run here.
  nlohmann::json backends() const;
  // The host ends of the session's agent channels (vmm::MicroVm::
  // agent_sockets): empty when it runs no VM, or one whose agent is reached
  // over TCP.
  std::vector<std::string> agent_channels(const std::string& session);

 private:
  // The VM's name host-wide: the instance tag and the session id.
  std::string vm_name(const std::string& session) const;
  struct Running {
    std::string backend;
    std::string directory;
    std::unique_ptr<vmm::MicroVm> vm;
    std::string kernel, initrd;
    std::string disk;  // the base; "" without a disk
    bool disk_encrypted = false;
    uint32_t memory_mib = 0;
    uid_t uid = 0;
    bool agent_channels = false;  // its agent is reached over virtio-serial
  };
  // Removes a VM's remains (stopped first) and reopens the agent port.
  void forget_locked(std::map<std::string, Running>::iterator it, std::chrono::milliseconds grace);
  nlohmann::json describe(const std::string& session, Running& r);

  const SessionDirectory& sessions_;
  VmRegistryOptions options_;
  std::mutex mu_;  // the map; held across a launch (one at a time)
  std::map<std::string, Running> vms_;
};

}  // namespace zn::broker
