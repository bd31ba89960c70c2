// The Firecracker backend (issue 14): the same VM as QEMU's (the session's
// TAP, the shared guest image plus the VM's config archive as its initrd, the
// serial console to a file, the VM's own uid and cgroup), run by Firecracker
// from a config file (`--config-file vm.json`, no API calls needed; the API
// socket is there for an operator's inspection).
//
// What differs from QEMU, and why:
//  - Firecracker opens the TAP by name (there is no descriptor option): the
//    TAP is handed to the VM's uid (TUNSETOWNER/TUNSETGROUP) and zerod's
//    descriptor closed so Firecracker can attach (a single-queue TAP takes
//    one); when the VM goes the TAP is given back to root.
//  - It boots an uncompressed ELF vmlinux on x86_64. A bzImage (Debian's
//    vmlinuz) is unpacked at launch with the host's decompressor (its
//    payload's gzip, xz, lzma, lz4, zstd or bzip2), or refused saying so.
//  - It has no copy-on-write disk format (no qcow2, no LUKS): an encrypted
//    or qcow2 disk is refused; a raw base gets a reflinked copy (FICLONE),
//    or is refused where the filesystem cannot reflink.
//  - Its guest serial console is its stdout (and its stderr there too).
//  - KVM only: there is no emulation fallback.
//  - The jailer, when installed: run as root, it builds a chroot in the VM's
//    directory, drops to the VM's uid and execs Firecracker. Its privilege
//    drop clears PDEATHSIG, so a jailed VM does not die with zerod; the next
//    zerod kills it through its cgroup (VmRegistry removes leftovers).
//    Without the jailer Firecracker runs as the VM's uid through
//    spawn_vm_process, exactly as QEMU does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vmm/microvm/microvm.h"

namespace zn::vmm {

struct FirecrackerOptions {
  std::string binary;  // "" = firecracker from PATH
  // "" = `jailer` beside the binary, else on PATH, used when found; "none"
  // = never; a path = that one (required).
  std::string jailer;
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string kvm_device = "/dev/kvm";
  std::string tun_device = "/dev/net/tun";
  // A virtio-vsock device (Firecracker's own: the host end is a Unix socket
  // in the VM's directory, no /dev/vhost-vsock needed).
  bool vsock = false;
  uint32_t overhead_mib = 64;  // Firecracker's own memory past the guest's
};

// File names in the VM's directory (or the jail's root), relative: the
// config is the same in both, read from Firecracker's working directory.
inline constexpr const char* kFcConfig = "vm.json";
inline constexpr const char* kFcApiSocket = "fc.sock";
inline constexpr const char* kFcKernel = "vmlinux";
inline constexpr const char* kFcInitrd = "initrd";
inline constexpr const char* kFcDisk = "disk.raw";
inline constexpr const char* kFcLog = "firecracker.log";
inline constexpr const char* kFcVsock = "vsock.sock";
inline constexpr uint32_t kFcGuestCid = 3;

// The guest kernel's command line under Firecracker: QEMU's under KVM plus
// pci=off (Firecracker has no PCI bus; its virtio-mmio devices are put on the
// command line by Firecracker itself).
std::string firecracker_boot_args();

// vm.json for `spec` on the TAP named `tap_name`; pure, for tests. A disk
// (spec.disk set) is the raw file kFcDisk, read-write, not the root device.
nlohmann::json firecracker_config(const VmSpec& spec, const std::string& tap_name, bool vsock);

// The command lines: Firecracker run directly (in the VM's directory), and
// the jailer's, which execs `binary` chrooted in jail_root(spec, binary).
std::vector<std::string> firecracker_argv(const std::string& binary);
// `cgroup_version`: the host's (1 or 2), which the jailer must be told.
// Throws std::runtime_error when the session id is not a jailer --id.
std::vector<std::string> jailer_argv(const std::string& jailer, const std::string& binary, const VmSpec& spec,
                                     int cgroup_version);
// <directory>/jail/<binary's file name, symlinks resolved>/<id>/root, where
// the jailer builds the chroot (and where the VM's files are put before it
// runs).
std::string jail_root(const VmSpec& spec, const std::string& binary);
// The jailer's --id: the session id when it fits the jailer's rule (letters,
// digits and hyphens, at most 64), else nullopt.
std::optional<std::string> jailer_id(const std::string& name);

// Why Firecracker cannot boot `spec` whatever the host (its kernel file is
// not an ELF vmlinux nor a bzImage; its disk is encrypted or qcow2), nullopt
// when it can. Reads the kernel's and the disk's first bytes.
std::optional<std::string> firecracker_refuses(const VmSpec& spec);

// Writes the ELF vmlinux `kernel` is or holds (a bzImage's payload
// decompressed by the host's tool) to `out`. Throws std::runtime_error
// saying what it is and what is missing.
void write_vmlinux(const std::string& kernel, const std::string& out);

class FirecrackerBackend : public VmBackend {
 public:
  explicit FirecrackerBackend(FirecrackerOptions options = {});
  std::string name() const override { return "firecracker"; }
  // Every reason there is, "; "-separated: no binary (or one that does not
  // answer --version); no usable KVM (/dev/kvm must open, answer API
  // version 12 and create a VM); without the jailer (which makes its own
  // device nodes), /dev/kvm or /dev/net/tun the VM's uid cannot open; and
  // PVM (kvm_pvm), which passes those checks but does not boot stock
  // kernels (QEMU's probe falls back to TCG there, qemu.h): untested, so
  // not claimed.
  std::optional<std::string> unavailable() const override;
  std::unique_ptr<MicroVm> launch(VmSpec spec) override;

  const std::string& binary() const { return binary_; }
  const std::string& jailer() const { return jailer_; }  // "" when not used
  const std::string& version() const { return version_; }

 private:
  FirecrackerOptions options_;
  std::string binary_, jailer_, version_;
  std::vector<std::string> problems_;  // found at construction
};

}  // namespace zn::vmm
