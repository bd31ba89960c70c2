// The Firecracker backend without Firecracker: its config file and command
// lines, what it refuses and why, the vmlinux it unpacks from a bzImage, and
// that it says exactly why it cannot run (no binary, a binary that is not
// Firecracker, no usable KVM), through `vm backends` too. Fake `firecracker`
// scripts here only answer --version: no VM is ever claimed to have run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "broker/vms/vm_registry.h"
#include "vmm/microvm/firecracker.h"
#include "vmm/microvm/qemu.h"
#include "vmm/microvm/vm_disk.h"
#include "support/files.h"

namespace zn::vmm {
namespace {

using ::zn::test::read_file;

namespace fs = std::filesystem;
using json = nlohmann::json;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "zn-fc-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name, const std::string& bytes,
                   fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
    fs::permissions(p, mode);
    return p.string();
  }

 private:
  fs::path path_;
};

constexpr fs::perms kExec = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec;

// PATH for the life of the object.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& path) {
    if (const char* old = std::getenv("PATH")) old_ = old;
    ::setenv("PATH", path.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

VmSpec spec_for_test() {
  VmSpec spec;
  spec.name = "user-1";
  spec.directory = "/var/lib/zeroness/vms/user-1";
  spec.kernel = "/srv/guest/vmlinuz";
  spec.initrd = "/srv/guest/initramfs.cpio.gz";
  spec.memory_mib = 384;
  spec.vcpus = 2;
  spec.uid = 70001;
  spec.gid = 70001;
  spec.boot.network = guest_network(AddressPlan::lab_default(), 0);
  return spec;
}

// The ELF header of an x86_64 vmlinux (what Firecracker checks first), and
// some bytes after it.
std::string fake_vmlinux() {
  std::string elf(64, '\0');
  elf.replace(0, 4,
              "\x7f"
              "ELF");
  elf[4] = 2;    // 64-bit
  elf[5] = 1;    // little-endian
  elf[18] = 62;  // EM_X86_64
  for (int i = 0; i < 5000; ++i) elf += "kernel text " + std::to_string(i) + "\n";
  return elf;
}

void put_le32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A bzImage as the kernel's build lays it out: one setup sector after the
// boot sector, the header's payload_offset/length locating the compressed
// vmlinux in the protected-mode part, and (but for gzip) its size appended.
std::string fake_bzimage(const std::string& compressed, bool append_size, uint32_t size) {
  std::string image(1024, '\0');
  image[0x1f1] = 1;  // setup_sects
  image.replace(0x202, 4, "HdrS");
  image[0x206] = 0x0f;  // boot protocol 2.15
  image[0x207] = 0x02;
  std::string payload = compressed;
  if (append_size) {
    payload += std::string(4, '\0');
    put_le32(payload, payload.size() - 4, size);
  }
  const uint32_t offset = 100;  // into the protected-mode part
  put_le32(image, 0x248, offset);
  put_le32(image, 0x24c, static_cast<uint32_t>(payload.size()));
  image += std::string(offset, 'P') + payload + std::string(64, '\0');
  return image;
}

std::string compress(const TempDir& dir, const std::string& tool, const std::string& bytes) {
  const std::string in = dir.file("plain", bytes);
  const std::string out = (dir.path() / "packed").string();
  const std::string cmd = tool + " < " + in + " > " + out;
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error(cmd + " failed");
  std::ifstream f(out, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(FirecrackerConfig, TheVmQemuWouldRunAsAConfigFile) {
  const VmSpec spec = spec_for_test();
  const json c = firecracker_config(spec, "zn-s1", false);
  EXPECT_EQ(c["boot-source"]["kernel_image_path"], "vmlinux");
  EXPECT_EQ(c["boot-source"]["initrd_path"], "initrd");
  // QEMU's command line under KVM (a serial console, panic and reboot end
  // the VM), and no PCI bus to probe.
  EXPECT_EQ(c["boot-source"]["boot_args"], kernel_command_line(Accel::kKvm) + " pci=off");
  const std::string args = c["boot-source"]["boot_args"];
  for (const char* want : {"console=ttyS0", "quiet", "panic=-1"})
    EXPECT_NE(args.find(want), std::string::npos) << args;
  EXPECT_EQ(args.find("tsc_early_khz"), std::string::npos);
  EXPECT_EQ(c["machine-config"]["vcpu_count"], 2);
  EXPECT_EQ(c["machine-config"]["mem_size_mib"], 384);
  ASSERT_EQ(c["network-interfaces"].size(), 1u);
  EXPECT_EQ(c["network-interfaces"][0]["iface_id"], "eth0");
  EXPECT_EQ(c["network-interfaces"][0]["host_dev_name"], "zn-s1");
  EXPECT_EQ(c["network-interfaces"][0]["guest_mac"], "02:7a:6e:00:00:01");
  EXPECT_EQ(c["logger"]["log_path"], "firecracker.log");
  EXPECT_TRUE(c["drives"].empty());
  EXPECT_FALSE(c.contains("vsock"));
  // Nothing of the host by name: every file is relative to Firecracker's
  // working directory (the VM's own, or the jail's root).
  for (const std::string& host_path : {spec.directory, spec.kernel, spec.initrd, std::string("/dev/")})
    EXPECT_EQ(c.dump().find(host_path), std::string::npos) << host_path;
}

TEST(FirecrackerConfig, VsockOnlyWhenAskedAndARawDiskWhenGiven) {
  VmSpec spec = spec_for_test();
  const json with_vsock = firecracker_config(spec, "zn-s1", true);
  ASSERT_TRUE(with_vsock.contains("vsock"));
  EXPECT_EQ(with_vsock["vsock"]["guest_cid"], 3);
  EXPECT_EQ(with_vsock["vsock"]["uds_path"], "vsock.sock");

  spec.disk = VmDisk{"/srv/images/base.img", false, "raw"};
  const json with_disk = firecracker_config(spec, "zn-s1", false);
  ASSERT_EQ(with_disk["drives"].size(), 1u);
  const json& d = with_disk["drives"][0];
  EXPECT_EQ(d["drive_id"], "vda");
  EXPECT_EQ(d["path_on_host"], "disk.raw");  // the VM's copy, never the base
  EXPECT_EQ(d["is_root_device"], false);     // the root is the initramfs
  EXPECT_EQ(d["is_read_only"], false);
  EXPECT_EQ(with_disk.dump().find("/srv/images"), std::string::npos);
}

TEST(FirecrackerArgv, DirectAndJailed) {
  EXPECT_EQ(firecracker_argv("/usr/local/bin/firecracker"),
            (std::vector<std::string>{"/usr/local/bin/firecracker", "--api-sock", "fc.sock", "--config-file",
                                      "vm.json"}));
  const VmSpec spec = spec_for_test();
  const auto jailed = jailer_argv("/usr/local/bin/jailer", "/usr/local/bin/firecracker", spec, 1);
  EXPECT_EQ(jailed, (std::vector<std::string>{"/usr/local/bin/jailer",
                                              "--id",
                                              "user-1",
                                              "--exec-file",
                                              "/usr/local/bin/firecracker",
                                              "--uid",
                                              "70001",
                                              "--gid",
                                              "70001",
                                              "--chroot-base-dir",
                                              "/var/lib/zeroness/vms/user-1/jail",
                                              "--cgroup-version",
                                              "1",
                                              "--parent-cgroup",
                                              "zeroness/user-1",
                                              "--",
                                              "--api-sock",
                                              "fc.sock",
                                              "--config-file",
                                              "vm.json"}));
  EXPECT_EQ(jailer_argv("j", "f", spec, 2)[12], "2");
  // The chroot is in the VM's directory: it goes with the VM.
  EXPECT_EQ(jail_root(spec, "/nonexistent/firecracker"),
            "/var/lib/zeroness/vms/user-1/jail/firecracker/user-1/root");
  // The jailer's --id: letters, digits and hyphens, at most 64.
  EXPECT_EQ(jailer_id("sbx-1"), "sbx-1");
  EXPECT_FALSE(jailer_id("sbx_1"));
  EXPECT_FALSE(jailer_id("../x"));
  EXPECT_FALSE(jailer_id(""));
  EXPECT_FALSE(jailer_id(std::string(65, 'a')));
  VmSpec odd = spec_for_test();
  odd.name = "a_b";
  EXPECT_THROW(jailer_argv("j", "f", odd, 1), std::runtime_error);
}

TEST(FirecrackerRefuses, KernelsItCannotBootAndDisksItCannotRead) {
  TempDir dir;
  VmSpec spec = spec_for_test();
  spec.kernel = dir.file("vmlinux", fake_vmlinux());
  EXPECT_EQ(firecracker_refuses(spec), std::nullopt);
  spec.kernel = dir.file("bzImage", fake_bzimage("\x1f\x8b\x08", false, 0));
  EXPECT_EQ(firecracker_refuses(spec), std::nullopt);  // unpacked at launch
  spec.kernel = dir.file("Image", "MZ an arm64 Image or anything else" + std::string(1000, '\0'));
  ASSERT_TRUE(firecracker_refuses(spec));
  EXPECT_NE(firecracker_refuses(spec)->find("uncompressed ELF vmlinux"), std::string::npos);

  spec.kernel = dir.file("vmlinux", fake_vmlinux());
  spec.disk = VmDisk{dir.file("base.img", std::string(4096, '\0')), true, ""};
  ASSERT_TRUE(firecracker_refuses(spec));
  EXPECT_NE(firecracker_refuses(spec)->find("encrypted overlay is a LUKS container"), std::string::npos);
  spec.disk->encrypt = false;
  EXPECT_EQ(firecracker_refuses(spec), std::nullopt);
  spec.disk->base = dir.file("base.qcow2", std::string("QFI\xfb", 4) + std::string(100, '\0'));
  ASSERT_TRUE(firecracker_refuses(spec));
  EXPECT_NE(firecracker_refuses(spec)->find("qcow2 image, which Firecracker cannot read"), std::string::npos);
}

// Debian's vmlinuz is a bzImage (its payload lz4 on Debian 12's kernels);
// Firecracker boots the ELF inside it.
TEST(FirecrackerKernel, UnpacksTheVmlinuxInABzImage) {
  TempDir dir;
  const std::string vmlinux = fake_vmlinux();
  const std::string out = (dir.path() / "vmlinux").string();

  write_vmlinux(dir.file("elf", vmlinux), out);
  EXPECT_EQ(read_file(out), vmlinux);

  struct Case {
    const char* tool;  // the name find_tool looks for
    const char* compress;
    bool append_size;
  };
  for (const Case& c : {Case{"gzip", "gzip -9n", false}, Case{"xz", "xz --check=crc32", true},
                        Case{"lz4", "lz4 -l -9 -q", true}}) {
    SCOPED_TRACE(c.tool);
    fs::remove(out);
    const std::string kernel =
        dir.file(std::string("bzImage-") + c.tool,
                 fake_bzimage(find_tool(c.tool).empty() ? std::string("\x1f\x8b", 2)
                                                        : compress(dir, c.compress, vmlinux),
                              c.append_size, static_cast<uint32_t>(vmlinux.size())));
    if (find_tool(c.tool).empty()) {
      // No decompressor: a refusal naming what is missing, nothing written.
      try {
        write_vmlinux(kernel, out);
        ADD_FAILURE() << "unpacked without " << c.tool;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(c.tool) + " is not installed"), std::string::npos)
            << e.what();
      }
      continue;
    }
    write_vmlinux(kernel, out);
    EXPECT_EQ(read_file(out), vmlinux);
    EXPECT_FALSE(fs::exists(out + ".payload"));
  }

  // A payload cut short: refused, nothing left behind.
  std::string packed = compress(dir, "gzip -9n", vmlinux);
  packed.resize(packed.size() / 2);
  const std::string cut = dir.file("bzImage-cut", fake_bzimage(packed, false, 0));
  EXPECT_THROW(write_vmlinux(cut, out), std::runtime_error);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(write_vmlinux(dir.file("junk", std::string(2000, 'j')), out), std::runtime_error);
}

TEST(FirecrackerAvailability, NoBinary) {
  TempDir empty;
  // Not on PATH; on PATH but not executable; configured and missing.
  ScopedPath path(empty.path().string());
  EXPECT_NE(FirecrackerBackend().unavailable().value_or("").find("firecracker is not installed"),
            std::string::npos);
  empty.file("firecracker", "#!/bin/sh\necho 'Firecracker v1.7.0'\n");  // 0600
  const FirecrackerBackend not_executable;
  EXPECT_EQ(not_executable.binary(), "");
  EXPECT_NE(not_executable.unavailable().value_or("").find("firecracker is not installed"),
            std::string::npos);
  const FirecrackerBackend configured(FirecrackerOptions{"/nonexistent/firecracker"});
  EXPECT_NE(configured.unavailable().value_or("").find("not installed at /nonexistent/firecracker"),
            std::string::npos);
  EXPECT_THROW(FirecrackerBackend().launch(VmSpec{}), std::runtime_error);
}

TEST(FirecrackerAvailability, ABinaryMustAnswerAsFirecracker) {
  TempDir bin;
  ScopedPath path(bin.path().string());
  bin.file("firecracker", "#!/bin/sh\necho 'Firecracker v1.7.0'\necho\n", kExec);
  const FirecrackerBackend found;
  EXPECT_EQ(found.binary(), (bin.path() / "firecracker").string());
  EXPECT_EQ(found.version(), "Firecracker v1.7.0");
  // Whatever else this host lacks, the binary is not what is missing.
  if (auto why = found.unavailable()) {
    EXPECT_EQ(why->find("not installed"), std::string::npos) << *why;
  }
  EXPECT_EQ(found.jailer(), "");  // none beside it, none on PATH

  bin.file("jailer", "#!/bin/sh\nexit 1\n", kExec);
  EXPECT_EQ(FirecrackerBackend().jailer(), (bin.path() / "jailer").string());
  EXPECT_EQ(FirecrackerBackend(FirecrackerOptions{"", "none"}).jailer(), "");
  EXPECT_NE(FirecrackerBackend(FirecrackerOptions{"", "/nonexistent/jailer"})
                .unavailable()
                .value_or("")
                .find("the jailer /nonexistent/jailer is not an executable file"),
            std::string::npos);

  bin.file("firecracker", "#!/bin/sh\necho 'QEMU emulator version 7.2.0'\n", kExec);
  const FirecrackerBackend impostor;
  EXPECT_EQ(impostor.binary(), "");
  EXPECT_NE(impostor.unavailable().value_or("").find("--version did not say Firecracker: QEMU emulator"),
            std::string::npos);

  bin.file("firecracker", "#!/bin/sh\necho 'cannot run here' >&2\nexit 3\n", kExec);
  EXPECT_NE(
      FirecrackerBackend().unavailable().value_or("").find("--version failed (exit 3): cannot run here"),
      std::string::npos);
}

TEST(FirecrackerAvailability, KvmMustOpenAndCreateAVm) {
  TempDir bin;
  const std::string fc = bin.file("firecracker", "#!/bin/sh\necho 'Firecracker v1.7.0'\n", kExec);
  FirecrackerOptions missing{fc, "none"};
  missing.kvm_device = "/nonexistent/kvm";
  const auto no_kvm = FirecrackerBackend(missing).unavailable();
  ASSERT_TRUE(no_kvm);
  EXPECT_NE(
      no_kvm->find("/nonexistent/kvm cannot be opened (No such file or directory): Firecracker needs KVM"),
      std::string::npos)
      << *no_kvm;
  // A device that opens but is not KVM.
  FirecrackerOptions not_kvm{fc, "none"};
  not_kvm.kvm_device = "/dev/null";
  const auto wrong = FirecrackerBackend(not_kvm).unavailable();
  ASSERT_TRUE(wrong);
  EXPECT_NE(wrong->find("/dev/null answers KVM API version -1, not 12"), std::string::npos) << *wrong;
  EXPECT_EQ(wrong->find("not installed"), std::string::npos);
}

// The reasons reach the operator: `znctl vm backends` prints what
// vm.backends returns, VmRegistry::backends(); `vm run --backend
// firecracker` is refused with the same words.
class NoSessions : public broker::SessionDirectory {
 public:
  broker::SessionPtr get(const std::string&) const override { return nullptr; }
  broker::SessionPtr find_by_guest_ip4(in_addr) const override { return nullptr; }
  broker::SessionPtr find_by_guest_ip6(const in6_addr&) const override { return nullptr; }
};

TEST(FirecrackerAvailability, VmBackendsSaysWhy) {
  TempDir dir, empty;
  ScopedPath path(empty.path().string());
  auto fc = std::make_shared<FirecrackerBackend>();
  const std::string why = fc->unavailable().value_or("");
  ASSERT_NE(why.find("firecracker is not installed"), std::string::npos);
  NoSessions sessions;
  broker::VmRegistryOptions options;
  options.directory = (dir.path() / "vms").string();
  options.ca_cert_path = dir.file("ca.pem", "");
  options.uid_base = 70000;
  options.backends = {std::make_shared<QemuBackend>(QemuOptions{"/nonexistent/qemu"}), fc};
  broker::VmRegistry vms(sessions, options);
  const json backends = vms.backends();
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_EQ(backends[1]["name"], "firecracker");
  EXPECT_EQ(backends[1]["available"], false);
  EXPECT_EQ(backends[1]["reason"], why);

  broker::VmRunRequest run;
  run.session = "s1";
  run.kernel = dir.file("vmlinuz", "k");
  run.initrd = dir.file("initrd", "i");
  run.backend = "firecracker";
  try {
    vms.run(run);
    ADD_FAILURE() << "launched";
  } catch (const broker::VmError& e) {
    EXPECT_EQ(std::string(e.what()), "firecracker is unavailable here: " + why);
  }
}

}  // namespace
}  // namespace zn::vmm
