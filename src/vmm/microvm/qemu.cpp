#include "vmm/microvm/qemu.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "vmm/microvm/vm_disk.h"
#include "vmm/microvm/vm_process.h"
#include "vmm/microvm/vm_files.h"

namespace zn::vmm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string find_binary(const std::string& configured) {
  if (!configured.empty()) return ::access(configured.c_str(), X_OK) == 0 ? configured : "";
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/qemu-system-x86_64";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// What a verdict is kept for: the binary, the kernel and the image as they
// are now.
std::string probe_key(const std::string& binary, const VmSpec& spec) {
  std::string key;
  for (const std::string& f : {binary, spec.kernel, spec.initrd}) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) throw std::runtime_error("cannot stat " + f);
    key += f + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + ";";
  }
  return key;
}

class QemuVm : public MicroVm {
 public:
  QemuVm(pid_t pid, std::unique_ptr<VmCgroup> cgroup, std::string console, Accel accel,
         std::vector<std::string> agent_sockets = {})
      : process_(pid),
        cgroup_(std::move(cgroup)),
        console_(std::move(console)),
        accel_(accel),
        agent_sockets_(std::move(agent_sockets)) {}
  ~QemuVm() override { stop(0ms); }

  pid_t pid() const override { return process_.pid(); }
  bool running() override { return process_.running(); }
  std::string exit_status() const override { return process_.exit_status(); }
  void stop(std::chrono::milliseconds grace) override {
    process_.stop(grace);
    if (cgroup_) cgroup_->remove();
  }
  std::string console_path() const override { return console_; }
  Accel accel() const override { return accel_; }
  std::vector<std::string> agent_sockets() const override { return agent_sockets_; }

 private:
  VmmProcess process_;
  std::unique_ptr<VmCgroup> cgroup_;
  std::string console_;
  Accel accel_;
  std::vector<std::string> agent_sockets_;
};

bool agent_over_virtio(const GuestBoot& boot) {
  return !boot.agent_config.empty() && boot.agent_transport == AgentTransport::kVirtioSerial;
}

}  // namespace

uint64_t host_tsc_khz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return 0;
    try {
      return static_cast<uint64_t>(std::stod(line.substr(colon + 1)) * 1000);
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

std::string kernel_command_line(Accel accel) {
  std::string cmdline = "console=ttyS0 quiet panic=-1 reboot=t";
  // -M microvm has neither HPET nor ACPI PM timer: the guest calibrates its
  // TSC against the PIT, which under TCG races the host's clock, and about a
  // third of boots hung there (docs/guest-image.md). The guest's TSC is the
  // host's under TCG: its frequency is given instead of measured.
  if (accel == Accel::kTcg)
    if (const uint64_t khz = host_tsc_khz(); khz > 0) cmdline += " tsc_early_khz=" + std::to_string(khz);
  return cmdline;
}

std::string_view accel_name(Accel a) { return a == Accel::kKvm ? "kvm" : "tcg"; }

std::string agent_socket_name(int i) { return "agent-" + std::to_string(i) + ".sock"; }

std::vector<std::string> qemu_argv(const std::string& binary, const VmSpec& spec, Accel accel,
                                   bool with_tap) {
  // Relative to the VM's directory, its working directory: the uid it runs
  // as may not traverse the directories above it (zerod's state is 0700).
  std::vector<std::string> a = {
      binary,
      "-name",
      "zeroness-" + spec.name,
      "-M",
      "microvm,x-option-roms=off,rtc=on",
      // TCG's translation cache is 1 GiB by default on 64-bit hosts: bounded.
      "-accel",
      accel == Accel::kKvm ? "kvm" : "tcg,tb-size=64",
      "-cpu",
      accel == Accel::kKvm ? "host" : "max",
      "-m",
      std::to_string(spec.memory_mib),
      "-smp",
      std::to_string(spec.vcpus),
      "-nodefaults",
      "-no-user-config",
      "-display",
      "none",
      "-monitor",
      "none",
      "-serial",
      "file:console.log",
      "-no-reboot",
      // QEMU's own seccomp filter: no new processes, no privilege changes.
      "-sandbox",
      "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
      "-kernel",
      "vmlinuz",
      "-initrd",
      "initrd",
      "-append",
      kernel_command_line(accel),
  };
  int next_fd = 3;
  if (with_tap) {
    const std::string mac = net::to_string(spec.boot.network.guest_mac);
    for (const std::string& x : {std::string("-netdev"), "tap,id=n0,fd=" + std::to_string(next_fd++),
                                 std::string("-device"), "virtio-net-device,netdev=n0,mac=" + mac})
      a.push_back(x);
  }
  if (agent_over_virtio(spec.boot)) {
    // QEMU listens (wait=off: the guest boots whether or not anyone is
    // connected) and takes one connection at a time per port; the guest
    // sees each connect and close as the port's host side opening and
    // closing. The sockets are in the VM's directory: its uid's and root's.
    a.insert(a.end(), {"-device", "virtio-serial-device"});
    for (int i = 0; i < kAgentChannels; ++i) {
      const std::string id = "zn-agent-" + std::to_string(i);
      a.insert(
          a.end(),
          {"-chardev", "socket,id=" + id + ",path=" + agent_socket_name(i) + ",server=on,wait=off", "-device",
           "virtserialport,chardev=" + id + ",name=" + kAgentPortPrefix + "." + std::to_string(i)});
    }
  }
  if (spec.disk) {
    // The base by descriptor (an fd set QEMU dups from), read-only: the VM's
    // uid needs no access to it, nor to the directories above it. The
    // overlay's header names the base too, but QEMU is told its backing
    // explicitly and never opens that name.
    const auto add = [&a](std::initializer_list<std::string> xs) { a.insert(a.end(), xs); };
    add({"-add-fd", "fd=" + std::to_string(next_fd++) + ",set=1"});
    add({"-blockdev", "driver=file,node-name=zn-base-file,filename=/dev/fdset/1,read-only=on"});
    add({"-blockdev", "driver=" + spec.disk->format + ",node-name=zn-base,file=zn-base-file,read-only=on"});
    const std::string overlay = overlay_name(spec.disk->encrypt);
    add({"-blockdev", "driver=file,node-name=zn-overlay-file,filename=" + overlay});
    std::string qcow2_file = "zn-overlay-file";
    if (spec.disk->encrypt) {
      // The key from the pipe (read once: after it, the pipe is empty).
      add({"-object", "secret,id=zn-disk-key,file=/proc/self/fd/" + std::to_string(next_fd++)});
      add({"-blockdev", "driver=luks,node-name=zn-overlay-luks,file=zn-overlay-file,key-secret=zn-disk-key"});
      qcow2_file = "zn-overlay-luks";
    }
    add({"-blockdev", "driver=qcow2,node-name=zn-disk,file=" + qcow2_file + ",backing=zn-base"});
    add({"-device", "virtio-blk-device,drive=zn-disk"});
  }
  return a;
}

QemuBackend::QemuBackend(QemuOptions options)
    : options_(std::move(options)),
      binary_(find_binary(options_.binary)),
      qemu_img_(find_tool("qemu-img", binary_)),
      cryptsetup_(find_tool("cryptsetup")) {}

std::optional<std::string> QemuBackend::unavailable() const {
  if (binary_.empty())
    return options_.binary.empty() ? "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
                                   : options_.binary + " is not executable";
  return std::nullopt;
}

// Boots the image with KVM in a scratch directory and no network, waiting
// for its ready line.
bool QemuBackend::kvm_boots(const VmSpec& spec) {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) return false;
  VmSpec probe;
  probe.name = spec.name + "-kvm-probe";
  probe.directory = (fs::path(spec.directory) / "kvm-probe").string();
  probe.kernel = spec.kernel;
  probe.initrd = spec.initrd;
  probe.memory_mib = 128;
  probe.uid = spec.uid;
  probe.gid = spec.gid;
  probe.boot = spec.boot;
  probe.boot.user_data.clear();
  probe.boot.poweroff_after = true;
  fs::create_directories(probe.directory);
  ::chown(probe.directory.c_str(), spec.uid, spec.gid);
  write_owned(fs::path(probe.directory) / "vmlinuz", read_whole_file(spec.kernel), spec.uid, spec.gid);
  write_owned(fs::path(probe.directory) / "initrd",
              read_whole_file(spec.initrd) + guest_config_archive(probe.boot), spec.uid, spec.gid);
  const fs::path console = fs::path(probe.directory) / "console.log";
  bool booted = false;
  {
    auto cgroup = std::make_unique<VmCgroup>(
        probe.name, CgroupLimits{(128ull + options_.overhead_mib) << 20, 64}, options_.cgroup_root);
    VmProcessSpec ps;
    ps.binary = binary_;
    ps.argv = qemu_argv(binary_, probe, Accel::kKvm, false);
    ps.uid = spec.uid;
    ps.gid = spec.gid;
    if (const group* kvm = ::getgrnam("kvm")) ps.groups.push_back(kvm->gr_gid);
    ps.cgroup_procs = cgroup->procs_files();
    ps.log_path = (fs::path(probe.directory) / "qemu.log").string();
    ps.cwd = probe.directory;
    QemuVm vm(spawn_vm_process(ps), std::move(cgroup), console.string(), Accel::kKvm);
    const auto until = std::chrono::steady_clock::now() + options_.probe_timeout;
    while (!booted && vm.running() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(50ms);
      booted = read_whole_file(console).find("ZN-GUEST-READY") != std::string::npos;
    }
    vm.stop(1s);
  }
  std::error_code ignored;
  fs::remove_all(probe.directory, ignored);
  return booted;
}

Accel QemuBackend::accel_for(const VmSpec& spec) {
  if (options_.accel == "tcg") return Accel::kTcg;
  if (options_.accel == "kvm") return Accel::kKvm;
  std::lock_guard lock(probe_mu_);
  const std::string key = probe_key(binary_, spec);
  const fs::path cache =
      options_.cache_dir.empty() ? fs::path() : fs::path(options_.cache_dir) / "qemu-accel";
  if (!cache.empty()) {
    std::istringstream lines(read_whole_file(cache));
    std::string verdict, cached_key;
    while (lines >> verdict && std::getline(lines >> std::ws, cached_key))
      if (cached_key == key) return verdict == "kvm" ? Accel::kKvm : Accel::kTcg;
  }
  const Accel found = kvm_boots(spec) ? Accel::kKvm : Accel::kTcg;
  if (!cache.empty()) {
    fs::create_directories(cache.parent_path());
    std::ofstream(cache, std::ios::app) << accel_name(found) << " " << key << "\n";
  }
  return found;
}

std::unique_ptr<MicroVm> QemuBackend::launch(VmSpec spec) {
  if (auto why = unavailable()) throw std::runtime_error(*why);
  if (!spec.tap) throw std::runtime_error("no TAP for the VM");
  const fs::path dir(spec.directory);
  // The disk first: a base that cannot be used is refused before a probe.
  net::UniqueFd base_fd, key_fd;
  if (spec.disk) {
    if (qemu_img_.empty()) throw std::runtime_error("a disk needs qemu-img (apt-get install qemu-utils)");
    if (spec.disk->encrypt && cryptsetup_.empty())
      throw std::runtime_error("an encrypted disk needs cryptsetup (apt-get install cryptsetup-bin)");
    // Opened once, as zerod: what is inspected is what the VM reads.
    base_fd.reset(::open(spec.disk->base.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!base_fd)
      throw std::runtime_error("cannot open the base image " + spec.disk->base + ": " + std::strerror(errno));
    const BaseImage base = inspect_base(qemu_img_, spec.disk->base, base_fd.get());
    spec.disk->format = base.format;
    // The key exists only for this launch: the overlay dies with the VM, so
    // nothing ever needs it again.
    std::optional<DiskKey> key;
    if (spec.disk->encrypt) key.emplace();
    create_overlay({qemu_img_, cryptsetup_}, spec.directory, base, key ? &*key : nullptr, spec.uid, spec.gid);
    if (key) key_fd.reset(key_pipe(key->text(), spec.uid, spec.gid));
  }
  const Accel accel = accel_for(spec);
  // The VMM reads copies in its own directory: the operator's files need
  // not be readable by the VM's uid, and the initrd carries this VM's
  // configuration after the shared image.
  write_owned(dir / "vmlinuz", read_whole_file(spec.kernel), spec.uid, spec.gid);
  write_owned(dir / "initrd", read_whole_file(spec.initrd) + guest_config_archive(spec.boot), spec.uid,
              spec.gid);
  const uint64_t memory = (static_cast<uint64_t>(spec.memory_mib) + options_.overhead_mib) << 20;
  auto cgroup = std::make_unique<VmCgroup>(spec.name, CgroupLimits{memory, 64}, options_.cgroup_root);
  VmProcessSpec ps;
  ps.binary = binary_;
  ps.argv = qemu_argv(binary_, spec, accel, true);
  ps.uid = spec.uid;
  ps.gid = spec.gid;
  if (accel == Accel::kKvm)
    if (const group* kvm = ::getgrnam("kvm")) ps.groups.push_back(kvm->gr_gid);
  ps.pass_fds = {spec.tap.get()};
  if (base_fd) ps.pass_fds.push_back(base_fd.get());
  if (key_fd) ps.pass_fds.push_back(key_fd.get());
  ps.cgroup_procs = cgroup->procs_files();
  ps.log_path = (dir / "qemu.log").string();
  ps.cwd = spec.directory;
  std::vector<std::string> agent_sockets;
  if (agent_over_virtio(spec.boot))
    for (int i = 0; i < kAgentChannels; ++i) agent_sockets.push_back((dir / agent_socket_name(i)).string());
  const pid_t pid = spawn_vm_process(ps);
  return std::make_unique<QemuVm>(pid, std::move(cgroup), (dir / "console.log").string(), accel,
                                  std::move(agent_sockets));
}

}  // namespace zn::vmm
