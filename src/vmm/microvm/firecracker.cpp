#include "vmm/microvm/firecracker.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <linux/fs.h>
#include <linux/kvm.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "vmm/host/tap_device.h"
#include "vmm/microvm/qemu.h"
#include "vmm/microvm/vm_disk.h"
#include "vmm/microvm/vm_process.h"
#include "vmm/microvm/vm_files.h"

extern char** environ;

namespace zn::vmm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

bool executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::string head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return bytes;
}

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + static_cast<size_t>(i)]);
  return v;
}

bool is_x86_64_elf(const std::string& b) {
  return b.size() >= 20 &&
         b.compare(0, 4,
                   "\x7f"
                   "ELF") == 0 &&
         b[4] == 2 && (static_cast<unsigned char>(b[18]) | static_cast<unsigned char>(b[19]) << 8) == 62;
}

bool is_bzimage(const std::string& b) { return b.size() >= 0x250 && b.compare(0x202, 4, "HdrS") == 0; }

// A bzImage's payload format, by its magic: the tool and its arguments that
// decompress it from stdin to stdout.
struct Decompressor {
  const char* magic;
  size_t magic_len;
  const char* format;
  std::vector<std::string> argv;  // argv[0]: the tool's name, found at use
};
const std::vector<Decompressor>& decompressors() {
  static const std::vector<Decompressor> all = {
      {"\x1f\x8b", 2, "gzip", {"gzip", "-dc"}},
      {"\xfd"
       "7zXZ\x00",
       6,
       "xz",
       {"xz", "-dc"}},
      {"\x5d\x00\x00", 3, "lzma", {"xz", "--format=lzma", "-dc"}},
      {"BZh", 3, "bzip2", {"bzip2", "-dc"}},
      {"\x02\x21\x4c\x18", 4, "lz4", {"lz4", "-dc"}},
      {"\x28\xb5\x2f\xfd", 4, "zstd", {"zstd", "-dc"}},
      {"\x89LZO", 4, "lzo", {"lzop", "-dc"}},
  };
  return all;
}

// Runs argv with stdin from `in` and stdout to `out` (paths), waits; the
// exit code, -1 if it did not exit; its stderr in `err`.
int run_filter(const std::vector<std::string>& argv, const std::string& in, const std::string& out,
               std::string& err) {
  const std::string err_path = out + ".err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot run " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  err = read_whole_file(err_path);
  ::unlink(err_path.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool kvm_group_can_open(const struct stat& st) {
  const group* kvm = ::getgrnam("kvm");
  return kvm != nullptr && st.st_gid == kvm->gr_gid && (st.st_mode & S_IRGRP) && (st.st_mode & S_IWGRP);
}

std::string mode_text(const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
  const passwd* u = ::getpwuid(st.st_uid);
  const group* g = ::getgrgid(st.st_gid);
  return std::string(mode) + " " + (u ? u->pw_name : std::to_string(st.st_uid)) + ":" +
         (g ? g->gr_name : std::to_string(st.st_gid));
}

// The jailer as its own process: root (it builds the chroot, then drops to
// the VM's uid), in the VM's cgroup before it runs, no_new_privs, stdout and
// stderr to the console file, nothing else of zerod's open. Not PDEATHSIG:
// the jailer's uid change clears it (kernel commit_creds) before Firecracker
// runs, and set here it would kill the jailer with the thread that launched
// it (a control connection's).
pid_t spawn_jailer(const std::vector<std::string>& argv_in, const std::vector<std::string>& cgroup_procs,
                   const std::string& console, uid_t uid, gid_t gid, const std::string& cwd) {
  std::vector<char*> argv;
  for (const std::string& a : argv_in) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<int> procs;
  for (const std::string& p : cgroup_procs) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      for (int f : procs) ::close(f);
      throw std::runtime_error("cannot open " + p + ": " + std::strerror(errno));
    }
    procs.push_back(fd);
  }
  const auto close_all = [&] {
    for (int f : procs) ::close(f);
  };
  const int log = ::open(console.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (log < 0 || ::fchown(log, uid, gid) != 0) {
    close_all();
    throw std::runtime_error("cannot open " + console + ": " + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid != 0) {
    close_all();
    ::close(log);
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    return pid;
  }
  // The child: async-signal-safe calls only.
  const auto fail = [log](const char* step) {
    (void)!::write(log, "zeroness: jailer: ", 18);
    (void)!::write(log, step, std::strlen(step));
    (void)!::write(log, "\n", 1);
    ::_exit(127);
  };
  for (int f : procs) {
    // "0" is this process in cgroup.procs.
    if (::write(f, "0", 1) != 1) fail("joining the cgroup");
  }
  if (::setsid() < 0) fail("setsid");
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0) fail("stdio");
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) fail("close_range");
  if (::chdir(cwd.c_str()) != 0) fail("chdir");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("no_new_privs");
  ::execv(argv[0], argv.data());
  fail("exec");
  return -1;
}

class FirecrackerVm : public MicroVm {
 public:
  FirecrackerVm(pid_t pid, std::unique_ptr<VmCgroup> cgroup, std::string console, std::string tap)
      : process_(pid), cgroup_(std::move(cgroup)), console_(std::move(console)), tap_(std::move(tap)) {}
  ~FirecrackerVm() override { stop(0ms); }

  pid_t pid() const override { return process_.pid(); }
  bool running() override { return process_.running(); }
  std::string exit_status() const override { return process_.exit_status(); }
  void stop(std::chrono::milliseconds grace) override {
    // Firecracker exits on SIGTERM (its handler flushes the logger).
    process_.stop(grace);
    if (cgroup_) cgroup_->remove();
    // The TAP back to root: no other uid may attach to it once the VM is gone.
    if (!tap_.empty()) {
      try {
        net::UniqueFd fd = open_tap(tap_);
        set_tap_owner(fd.get(), 0, 0);
      } catch (const std::exception&) {
        // Gone with its session, or already taken again by root: nothing to give back.
      }
      tap_.clear();
    }
  }
  std::string console_path() const override { return console_; }
  Accel accel() const override { return Accel::kKvm; }

 private:
  VmmProcess process_;
  std::unique_ptr<VmCgroup> cgroup_;
  std::string console_, tap_;
};

int cgroup_version(const std::string& root) {
  return fs::exists(fs::path(root) / "cgroup.controllers") ? 2 : 1;
}

}  // namespace

std::string firecracker_boot_args() { return kernel_command_line(Accel::kKvm) + " pci=off"; }

nlohmann::json firecracker_config(const VmSpec& spec, const std::string& tap_name, bool vsock) {
  nlohmann::json config = {
      {"boot-source",
       {{"kernel_image_path", kFcKernel},
        {"initrd_path", kFcInitrd},
        {"boot_args", firecracker_boot_args()}}},
      {"machine-config", {{"vcpu_count", spec.vcpus}, {"mem_size_mib", spec.memory_mib}}},
      {"network-interfaces",
       nlohmann::json::array({{{"iface_id", "eth0"},
                               {"host_dev_name", tap_name},
                               {"guest_mac", net::to_string(spec.boot.network.guest_mac)}}})},
      {"drives", nlohmann::json::array()},
      {"logger", {{"log_path", kFcLog}, {"level", "Info"}, {"show_level", true}}},
  };
  if (spec.disk)
    config["drives"].push_back(
        {{"drive_id", "vda"}, {"path_on_host", kFcDisk}, {"is_root_device", false}, {"is_read_only", false}});
  if (vsock) config["vsock"] = {{"guest_cid", kFcGuestCid}, {"uds_path", kFcVsock}};
  return config;
}

std::vector<std::string> firecracker_argv(const std::string& binary) {
  return {binary, "--api-sock", kFcApiSocket, "--config-file", kFcConfig};
}

std::optional<std::string> jailer_id(const std::string& name) {
  if (name.empty() || name.size() > 64) return std::nullopt;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return std::nullopt;
  return name;
}

std::string jail_root(const VmSpec& spec, const std::string& binary) {
  return (fs::path(spec.directory) / "jail" / fs::weakly_canonical(binary).filename() /
          jailer_id(spec.name).value_or("") / "root")
      .string();
}

std::vector<std::string> jailer_argv(const std::string& jailer, const std::string& binary, const VmSpec& spec,
                                     int cgroup_version) {
  const std::optional<std::string> id = jailer_id(spec.name);
  if (!id)
    throw std::runtime_error("the jailer's --id takes letters, digits and '-' (at most 64): '" + spec.name +
                             "'");
  return {jailer, "--id", *id, "--exec-file", binary, "--uid", std::to_string(spec.uid), "--gid",
          std::to_string(spec.gid), "--chroot-base-dir", (fs::path(spec.directory) / "jail").string(),
          // The VM's own cgroup (zerod's VmCgroup), where the jailer already
          // is: under v2 it moves itself into --parent-cgroup, so it is told
          // that one; it makes none of its own (no --cgroup).
          "--cgroup-version", std::to_string(cgroup_version), "--parent-cgroup", "zeroness/" + spec.name,
          "--", "--api-sock", kFcApiSocket, "--config-file", kFcConfig};
}

std::optional<std::string> firecracker_refuses(const VmSpec& spec) {
  const std::string kernel = head(spec.kernel, 0x250);
  if (!is_x86_64_elf(kernel) && !is_bzimage(kernel))
    return spec.kernel +
           " is neither an x86_64 ELF vmlinux nor a bzImage: Firecracker boots an uncompressed ELF vmlinux";
  if (spec.disk) {
    if (spec.disk->encrypt)
      return std::string(
          "Firecracker reads raw disk files only, and an encrypted overlay is a LUKS container that only "
          "QEMU opens: use --encrypt no with a raw base, or --backend qemu");
    if (head(spec.disk->base, 4) == "QFI\xfb")
      return spec.disk->base +
             " is a qcow2 image, which Firecracker cannot read (raw only): convert it (qemu-img convert -O "
             "raw) "
             "or use --backend qemu";
  }
  return std::nullopt;
}

void write_vmlinux(const std::string& kernel, const std::string& out) {
  const std::string bytes = read_whole_file(kernel);
  if (is_x86_64_elf(bytes)) {
    std::ofstream o(out, std::ios::binary | std::ios::trunc);
    o << bytes;
    if (!o.flush()) throw std::runtime_error("cannot write " + out);
    return;
  }
  if (!is_bzimage(bytes))
    throw std::runtime_error(kernel + " is neither an x86_64 ELF vmlinux nor a bzImage");
  // The boot protocol (2.08 on) gives where the compressed kernel is:
  // payload_offset from the start of the protected-mode code, which follows
  // setup_sects 512-byte sectors of setup and the boot sector.
  const unsigned version = static_cast<unsigned char>(bytes[0x206]) | static_cast<unsigned char>(bytes[0x207])
                                                                          << 8;
  if (version < 0x208) throw std::runtime_error(kernel + " is a bzImage too old to say where its kernel is");
  const unsigned setup_sects =
      static_cast<unsigned char>(bytes[0x1f1]) ? static_cast<unsigned char>(bytes[0x1f1]) : 4;
  const uint64_t start = (static_cast<uint64_t>(setup_sects) + 1) * 512 + le32(bytes, 0x248);
  const uint64_t length = le32(bytes, 0x24c);
  if (length < 8 || start + length > bytes.size())
    throw std::runtime_error(kernel + ": its bzImage header is out of bounds");
  std::string payload = bytes.substr(start, length);
  const Decompressor* d = nullptr;
  for (const Decompressor& c : decompressors())
    if (payload.compare(0, c.magic_len, std::string(c.magic, c.magic_len)) == 0) d = &c;
  if (!d) throw std::runtime_error(kernel + ": a bzImage whose payload's compression is unknown");
  // The kernel's build appends the decompressed size (little-endian u32)
  // to every format but gzip, whose own trailer ends with it: cut, it is
  // what the output must measure.
  const uint32_t expected = le32(payload, payload.size() - 4);
  if (std::string(d->format) != "gzip") payload.resize(payload.size() - 4);
  std::vector<std::string> argv = d->argv;
  argv[0] = find_tool(d->argv[0]);
  if (argv[0].empty())
    throw std::runtime_error(kernel + " is a bzImage holding a " + d->format +
                             "-compressed vmlinux, and Firecracker needs it uncompressed: " + d->argv[0] +
                             " is not installed to unpack it");
  const std::string payload_path = out + ".payload";
  {
    std::ofstream p(payload_path, std::ios::binary | std::ios::trunc);
    p << payload;
    if (!p.flush()) throw std::runtime_error("cannot write " + payload_path);
  }
  std::string err;
  const int status = run_filter(argv, payload_path, out, err);
  ::unlink(payload_path.c_str());
  // Decoders differ on what follows the stream (gzip warns, exit 2): what
  // counts is an ELF of exactly the size the kernel's build recorded.
  struct stat st {};
  const bool ok = ::stat(out.c_str(), &st) == 0 && static_cast<uint32_t>(st.st_size) == expected &&
                  is_x86_64_elf(head(out, 64));
  if (!ok) {
    ::unlink(out.c_str());
    throw std::runtime_error("could not unpack the vmlinux in " + kernel + " (" + d->format + ", " + argv[0] +
                             " exit " + std::to_string(status) + "): " + err.substr(0, 200));
  }
}

FirecrackerBackend::FirecrackerBackend(FirecrackerOptions options) : options_(std::move(options)) {
  if (options_.binary.empty()) {
    binary_ = on_path("firecracker");
    if (binary_.empty())
      problems_.push_back(
          "firecracker is not installed (not on PATH; Debian 12 does not package it: a release's "
          "firecracker and jailer from github.com/firecracker-microvm/firecracker, or "
          "FirecrackerOptions::binary)");
  } else if (executable_file(options_.binary)) {
    binary_ = options_.binary;
  } else {
    problems_.push_back("firecracker is not installed at " + options_.binary + " (not an executable file)");
  }
  if (!binary_.empty()) {
    // It must answer as Firecracker does: a file of that name is not one.
    const ToolResult r = run_tool({binary_, "--version"});
    std::istringstream lines(r.output);
    std::getline(lines, version_);
    if (r.status != 0 || version_.find("Firecracker v") == std::string::npos) {
      problems_.push_back(
          binary_ + " --version " +
          (r.status != 0 ? "failed (exit " + std::to_string(r.status) + ")" : "did not say Firecracker") +
          (version_.empty() ? "" : ": " + version_.substr(0, 120)));
      binary_.clear();
      version_.clear();
    }
  }
  if (options_.jailer == "none") return;
  if (!options_.jailer.empty()) {
    if (executable_file(options_.jailer))
      jailer_ = options_.jailer;
    else
      problems_.push_back("the jailer " + options_.jailer + " is not an executable file");
    return;
  }
  if (!binary_.empty()) {
    const std::string beside = (fs::path(binary_).parent_path() / "jailer").string();
    jailer_ = executable_file(beside) ? beside : on_path("jailer");
  }
}

std::optional<std::string> FirecrackerBackend::unavailable() const {
  std::vector<std::string> why = problems_;
  // KVM as Firecracker uses it: no emulation fallback, unlike QEMU's TCG.
  const char* dev = options_.kvm_device.c_str();
  net::UniqueFd kvm(::open(dev, O_RDWR | O_CLOEXEC));
  if (!kvm) {
    why.push_back(options_.kvm_device + " cannot be opened (" + std::strerror(errno) +
                  "): Firecracker needs KVM, it has no emulation");
  } else if (const int api = ::ioctl(kvm.get(), KVM_GET_API_VERSION, 0); api != KVM_API_VERSION) {
    why.push_back(options_.kvm_device + " answers KVM API version " + std::to_string(api) + ", not " +
                  std::to_string(KVM_API_VERSION));
  } else if (net::UniqueFd vm(::ioctl(kvm.get(), KVM_CREATE_VM, 0)); !vm) {
    why.push_back(options_.kvm_device + " cannot create a VM (KVM_CREATE_VM: " + std::strerror(errno) + ")");
  } else if (fs::exists("/sys/module/kvm_pvm")) {
    // It opens and creates VMs, but stock kernels do not boot on it (the
    // QEMU backend's probe falls back to TCG there): never tried with
    // Firecracker, so not claimed.
    why.push_back(
        "KVM here is the PVM backend (kvm_pvm), on which stock guest kernels do not boot: "
        "Firecracker is untested on it and not offered");
  }
  // Without the jailer (which makes its own /dev/kvm node for the VM's uid),
  // Firecracker opens /dev/kvm as the VM's uid, through the kvm group.
  struct stat st {};
  if (kvm && jailer_.empty() && ::fstat(kvm.get(), &st) == 0 && !kvm_group_can_open(st) &&
      !((st.st_mode & S_IROTH) && (st.st_mode & S_IWOTH)))
    why.push_back(
        options_.kvm_device + " is " + mode_text(st) +
        ": a VM's uid cannot open it (Debian's udev rule makes it 0660 root:kvm; or install the jailer)");
  // Likewise /dev/net/tun, through which Firecracker opens the TAP by name
  // (the TAP itself is handed to the VM's uid at launch).
  if (jailer_.empty() && ::stat(options_.tun_device.c_str(), &st) == 0 &&
      !((st.st_mode & S_IROTH) && (st.st_mode & S_IWOTH)))
    why.push_back(
        options_.tun_device + " is " + mode_text(st) +
        ": a VM's uid cannot open it to attach to its TAP (it is 0666 by default; or install the jailer)");
  if (why.empty()) return std::nullopt;
  std::string text;
  for (const std::string& w : why) text += (text.empty() ? "" : "; ") + w;
  return text;
}

std::unique_ptr<MicroVm> FirecrackerBackend::launch(VmSpec spec) {
  if (auto why = unavailable()) throw std::runtime_error(*why);
  if (auto why = firecracker_refuses(spec)) throw std::runtime_error(*why);
  if (!spec.tap) throw std::runtime_error("no TAP for the VM");
  const bool jailed = !jailer_.empty();
  if (jailed && !jailer_id(spec.name))
    throw std::runtime_error("the jailer's --id takes letters, digits and '-' (at most 64): '" + spec.name +
                             "'");
  const fs::path dir(spec.directory);
  // Firecracker's working directory: the VM's, or the jail's root (made
  // here, owned by root until the jailer hands it to the VM's uid).
  const fs::path root = jailed ? fs::path(jail_root(spec, binary_)) : dir;
  if (jailed) fs::create_directories(root);
  write_vmlinux(spec.kernel, (root / kFcKernel).string());
  if (::chown((root / kFcKernel).c_str(), spec.uid, spec.gid) != 0 ||
      ::chmod((root / kFcKernel).c_str(), 0600) != 0)
    throw std::runtime_error("cannot hand the kernel to the VM: " + std::string(std::strerror(errno)));
  write_owned(root / kFcInitrd, read_whole_file(spec.initrd) + guest_config_archive(spec.boot), spec.uid,
              spec.gid);
  if (spec.disk) {
    // No backing files in Firecracker: the VM's disk is a copy of the base
    // sharing its blocks (a reflink), opened once as zerod.
    net::UniqueFd base(::open(spec.disk->base.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!base)
      throw std::runtime_error("cannot open the base image " + spec.disk->base + ": " + std::strerror(errno));
    const fs::path disk = root / kFcDisk;
    net::UniqueFd copy(::open(disk.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!copy) throw std::runtime_error("cannot create " + disk.string() + ": " + std::strerror(errno));
    if (::ioctl(copy.get(), FICLONE, base.get()) != 0) {
      const int e = errno;
      ::unlink(disk.c_str());
      throw std::runtime_error(
          "Firecracker has no copy-on-write disk format, so the VM's disk is a reflink of " +
          spec.disk->base + ", which this filesystem cannot make (FICLONE: " + std::strerror(e) +
          "): put the base and the VMs on btrfs or xfs, or use --backend qemu");
    }
    if (::fchown(copy.get(), spec.uid, spec.gid) != 0)
      throw std::runtime_error("cannot hand " + disk.string() + " to the VM: " + std::strerror(errno));
    spec.disk->format = "raw";
  }
  // Firecracker opens the TAP by name as the VM's uid: the TAP becomes
  // that uid's, and zerod lets go of it (a single-queue TAP takes one
  // holder). Given back to root when the VM goes, or if this launch fails.
  const std::string tap = tap_name(spec.tap.get());
  set_tap_owner(spec.tap.get(), spec.uid, spec.gid);
  spec.tap.reset();
  try {
    write_owned(root / kFcConfig, firecracker_config(spec, tap, options_.vsock).dump(2) + "\n", spec.uid,
                spec.gid);
    // The logger appends to a file that must exist.
    write_owned(root / kFcLog, "", spec.uid, spec.gid);
    const uint64_t memory = (static_cast<uint64_t>(spec.memory_mib) + options_.overhead_mib) << 20;
    auto cgroup = std::make_unique<VmCgroup>(spec.name, CgroupLimits{memory, 64}, options_.cgroup_root);
    const std::string console = (dir / "console.log").string();
    pid_t pid = -1;
    if (jailed) {
      pid = spawn_jailer(jailer_argv(jailer_, binary_, spec, cgroup_version(options_.cgroup_root)),
                         cgroup->procs_files(), console, spec.uid, spec.gid, spec.directory);
    } else {
      VmProcessSpec ps;
      ps.binary = binary_;
      ps.argv = firecracker_argv(binary_);
      ps.uid = spec.uid;
      ps.gid = spec.gid;
      if (const group* kvm = ::getgrnam("kvm")) ps.groups.push_back(kvm->gr_gid);
      ps.cgroup_procs = cgroup->procs_files();
      // Its stdout is the guest's serial console; its stderr (a config it
      // refuses, a panic) goes there too, where `vm console` shows it.
      ps.log_path = console;
      ps.cwd = spec.directory;
      pid = spawn_vm_process(ps);
    }
    return std::make_unique<FirecrackerVm>(pid, std::move(cgroup), console, tap);
  } catch (...) {
    try {
      net::UniqueFd fd = open_tap(tap);
      set_tap_owner(fd.get(), 0, 0);
    } catch (const std::exception&) {
    }
    throw;
  }
}

}  // namespace zn::vmm
