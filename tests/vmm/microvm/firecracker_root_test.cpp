// Firecracker for real (root). The TAP handed to a VM's uid, which
// Firecracker opens by name: that uid can attach to it, another cannot, and
// once given back to root neither can. And a real guest booted by
// Firecracker where the backend says it can run; where it cannot, what is
// tested is that launching is refused with that very reason (printed: no
// VM is claimed). Not a skip: tests/support/skip_policy.h allows only a
// kernel's missing feature, and a host without Firecracker is not that.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "vmm/host/tap_device.h"
#include "vmm/microvm/firecracker.h"
#include "support/files.h"

namespace zn::vmm {
namespace {

using ::zn::test::read_file;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uid_t kRootUid = 0x7a6effb0;
const std::string kGuestDir = ZN_GUEST_DIR;

std::string sysfs(const std::string& tap, const char* attr) {
  std::string v = read_file(fs::path("/sys/class/net") / tap / attr);
  while (!v.empty() && v.back() == '\n') v.pop_back();
  return v;
}

// Attaches to `tap` by name as `uid` (as Firecracker does: IFF_VNET_HDR);
// 0, or the errno.
int attach_as(uid_t uid, const std::string& tap) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Opened first: what is tested is the TAP's owner, not /dev/net/tun's
    // mode (0600 on some hosts; the jailer makes its own node).
    const int fd = ::open("/dev/net/tun", O_RDWR);
    if (fd < 0) ::_exit(201);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0)
      ::_exit(200);
    ifreq ifr{};
    std::memcpy(ifr.ifr_name, tap.c_str(), tap.size());
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    ::_exit(::ioctl(fd, TUNSETIFF, &ifr) == 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

class FirecrackerRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    tap_ = "znfc" + std::to_string(::getpid() % 100000);
    create_tap(tap_);
  }
  void TearDown() override { delete_tap(tap_); }
  std::string tap_;
};

// Before any hand-over, a TAP zerod made is root's alone: no other uid can
// attach to it and speak as the session's guest.
TEST_F(FirecrackerRoot, AFreshTapAttachesToNoOtherUid) { EXPECT_EQ(attach_as(kRootUid, tap_), EPERM); }

TEST_F(FirecrackerRoot, TheTapIsTheVmsUidsWhileItRuns) {
  {
    net::UniqueFd fd = open_tap(tap_);
    EXPECT_EQ(tap_name(fd.get()), tap_);
    set_tap_owner(fd.get(), kRootUid, kRootUid);
  }  // let go, as the launcher does, so the VMM can attach
  EXPECT_EQ(sysfs(tap_, "owner"), std::to_string(kRootUid));
  EXPECT_EQ(sysfs(tap_, "group"), std::to_string(kRootUid));
  EXPECT_EQ(attach_as(kRootUid + 1, tap_), EPERM) << "another VM's uid attached";
  EXPECT_EQ(attach_as(kRootUid, tap_), 0);
  {
    net::UniqueFd fd = open_tap(tap_);
    set_tap_owner(fd.get(), 0, 0);
  }
  EXPECT_EQ(attach_as(kRootUid, tap_), EPERM) << "the VM's uid kept the TAP after it was given back";
}

TEST_F(FirecrackerRoot, BootsTheGuestWhereFirecrackerCanRun) {
  FirecrackerBackend fc;
  const fs::path dir = fs::temp_directory_path() / ("zn-fc-vm-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ASSERT_EQ(::chown(dir.c_str(), kRootUid, kRootUid), 0);
  ::chmod(dir.c_str(), 0700);
  VmSpec spec;
  spec.name = "zn-fc-test-" + std::to_string(::getpid());
  spec.directory = dir.string();
  spec.kernel = kGuestDir + "/vmlinuz";
  spec.initrd = kGuestDir + "/initramfs.cpio.gz";
  spec.memory_mib = 128;
  spec.uid = kRootUid;
  spec.gid = kRootUid;
  spec.boot.network = guest_network(AddressPlan::lab_default(), 0);
  spec.boot.hostname = "fc-test";
  spec.tap = open_tap(tap_);
  if (const auto why = fc.unavailable()) {
    std::cout << "[ NOT BOOTED ] Firecracker is unavailable on this host: " << *why << std::endl;
    RecordProperty("firecracker_not_booted", *why);
    try {
      fc.launch(std::move(spec));
      ADD_FAILURE() << "launched although unavailable: " << *why;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), *why);
    }
    EXPECT_TRUE(fs::is_empty(dir)) << "a refused launch left files";
    fs::remove_all(dir);
    return;
  }
  ASSERT_TRUE(fs::exists(spec.kernel) && fs::exists(spec.initrd))
      << "the guest is missing: scripts/build-guest.sh " << kGuestDir;
  std::cout << "booting with " << fc.version() << (fc.jailer().empty() ? "" : " under " + fc.jailer())
            << std::endl;
  auto vm = fc.launch(std::move(spec));
  EXPECT_EQ(vm->accel(), Accel::kKvm);
  EXPECT_EQ(sysfs(tap_, "owner"), std::to_string(kRootUid));
  bool ready = false;
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!ready && vm->running() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(100ms);
    ready = read_file(vm->console_path()).find("ZN-GUEST-READY") != std::string::npos;
  }
  EXPECT_TRUE(ready) << vm->exit_status() << "\n" << read_file(vm->console_path());
  EXPECT_TRUE(vm->running());
  vm->stop(2s);
  EXPECT_FALSE(vm->running());
  EXPECT_EQ(sysfs(tap_, "owner"), "0");  // given back
  vm.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zn::vmm
