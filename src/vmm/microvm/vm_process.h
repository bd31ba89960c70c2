// The VMM as a process of its own: another uid (its own, per VM: one VM
// cannot signal, trace or read another's), no capabilities (a non-root uid
// after exec keeps none, and no_new_privs stops setuid binaries giving any
// back), in the VM's cgroup before it runs a line of the VMM, one inherited
// descriptors (the TAP as fd 3, then a disk's base and key pipe), and killed when zerod goes (PDEATHSIG, from
// a thread that lives as long as zerod).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace zn::vmm {

struct VmProcessSpec {
  std::string binary;             // absolute path
  std::vector<std::string> argv;  // argv[0] included
  uid_t uid = 0;                  // never 0: refused
  gid_t gid = 0;
  std::vector<gid_t> groups;              // supplementary (e.g. kvm); may be empty
  std::vector<int> pass_fds;              // become fds 3, 4, ... in the child (at most 8)
  std::vector<std::string> cgroup_procs;  // joined before exec
  std::string log_path;                   // stdout and stderr (created 0600, owned by uid)
  std::string cwd;                        // the VM's directory
};

// Starts it; the child is reaped by whoever waits for the pid (MicroVm).
// Throws std::runtime_error when the process cannot be made; a failure in
// the child before exec (joining the cgroup, dropping privileges) makes it
// exit 127 with the reason in the log.
pid_t spawn_vm_process(const VmProcessSpec& spec);

// A VMM process this zerod forked (QEMU, Firecracker or its jailer): reaped
// once, its exit described, stopped with SIGTERM then SIGKILL. The caller's
// thread only; not thread-safe.
class VmmProcess {
 public:
  explicit VmmProcess(pid_t pid) : pid_(pid) {}
  pid_t pid() const { return pid_; }
  // Whether it still runs; reaps it once it has exited.
  bool running();
  // "exited N", "killed by signal N", "gone"; "" while it runs.
  const std::string& exit_status() const { return status_; }
  // SIGTERM, then SIGKILL after `grace`; reaped. Idempotent.
  void stop(std::chrono::milliseconds grace);

 private:
  pid_t pid_;
  bool exited_ = false;
  std::string status_;
};

}  // namespace zn::vmm
