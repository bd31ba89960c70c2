// The QEMU backend: `-M microvm` with virtio-net on the session's TAP (passed
// as a descriptor: QEMU never opens a network device itself), the guest
// image plus the VM's config archive as its initrd, the serial console to a
// file, QEMU's seccomp sandbox on, run as the VM's own uid in its cgroup.
// A disk is virtio-blk on a qcow2 overlay in the VM's directory backed by the
// shared base, which QEMU gets as a read-only descriptor (vm_disk.h); an
// encrypted overlay's key comes in on a pipe.
//
// Acceleration: KVM when it boots the guest, else TCG. Whether it does is
// learnt by a short probe (boot the image with KVM, wait for its ready line)
// and kept in the cache directory per QEMU binary, kernel and image, since a
// /dev/kvm that opens may still not run a stock kernel (the PVM backend on
// this project's CI hosts: MACHINE-FACTS.md).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vmm/microvm/microvm.h"

namespace zn::vmm {

struct QemuOptions {
  std::string binary;     // "" = qemu-system-x86_64 from PATH
  std::string cache_dir;  // the probe's verdicts; "" = probe at every launch
  std::string cgroup_root = "/sys/fs/cgroup";
  // "auto" probes; "tcg" never tries KVM; "kvm" requires it.
  std::string accel = "auto";
  std::chrono::milliseconds probe_timeout{8000};
  // Memory the VMM itself may use past the guest's (TCG's translation cache
  // is bounded to 64 MiB by the command line).
  uint32_t overhead_mib = 192;
};

// The host's TSC frequency in kHz (/proc/cpuinfo), 0 when unknown.
uint64_t host_tsc_khz();
// The guest kernel's command line: a serial console, and under TCG the TSC
// frequency (a microvm guest cannot calibrate it reliably under TCG).
std::string kernel_command_line(Accel accel);

// The host end of the agent's virtio-serial channel `i`: a UNIX socket QEMU
// listens on, relative to the VM's directory.
std::string agent_socket_name(int i);

// The command line for `spec` (paths inside spec.directory); pure, for tests.
// A VM with an agent over virtio-serial gets kAgentChannels ports, each
// backed by a listening UNIX socket in its directory (agent_socket_name).
// Inherited descriptors from 3 on: the TAP (with_tap), then with a disk its
// base (read-only) and, encrypted, the pipe holding its key.
std::vector<std::string> qemu_argv(const std::string& binary, const VmSpec& spec, Accel accel, bool with_tap);

class QemuBackend : public VmBackend {
 public:
  explicit QemuBackend(QemuOptions options);
  std::string name() const override { return "qemu"; }
  std::optional<std::string> unavailable() const override;
  AgentTransport agent_transport() const override { return AgentTransport::kVirtioSerial; }
  std::unique_ptr<MicroVm> launch(VmSpec spec) override;

 private:
  Accel accel_for(const VmSpec& spec);
  bool kvm_boots(const VmSpec& spec);

  QemuOptions options_;
  std::string binary_;                 // resolved; "" when missing
  std::string qemu_img_, cryptsetup_;  // for disks; "" when missing
  std::mutex probe_mu_;
};

}  // namespace zn::vmm
