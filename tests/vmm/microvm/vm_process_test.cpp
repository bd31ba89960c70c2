// A VM's process for real: another uid, no capabilities, no_new_privs, in
// its own cgroup with its limits, fds 3 and 4 and nothing else of the parent's, and
// gone with the cgroup. A stand-in process (sh) takes the VMM's place.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "vmm/microvm/vm_cgroup.h"
#include "vmm/microvm/vm_process.h"
#include "support/files.h"

namespace zn::vmm {
namespace {

using ::zn::test::read_file;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uid_t kUid = 0x7a6effa0;

class VmProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "zn-test-" + std::to_string(::getpid());
    dir_ = fs::temp_directory_path() / name_;
    fs::create_directories(dir_);
    ASSERT_EQ(::chown(dir_.c_str(), kUid, kUid), 0);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string name_;
  fs::path dir_;
};

TEST_F(VmProcessTest, UnprivilegedBoundedAndAlone) {
  VmCgroup cgroup(name_, CgroupLimits{64ull << 20, 16});
  for (const std::string& d : cgroup.directories()) EXPECT_TRUE(fs::is_directory(d)) << d;
  // Two descriptors the child must get as fds 3 and 4, and one it must not
  // get. Each is the other's target (a's write end is fd 4 and goes to 3, b's
  // is fd 3 and goes to 4): placing one must not overwrite the other.
  int a[2], b[2];
  ASSERT_EQ(::pipe2(a, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(b, O_CLOEXEC), 0);
  for (int* end : {&a[0], &a[1], &b[0], &b[1]}) {
    const int high = ::fcntl(*end, F_DUPFD_CLOEXEC, 100);
    ASSERT_GE(high, 100);
    ::close(*end);
    *end = high;
  }
  // The runner may leave descriptors 3 and 4 open to the test (ctest does);
  // they are nobody's here, and must be free to be the targets.
  ::close(3);
  ::close(4);
  ASSERT_EQ(::dup3(a[1], 4, O_CLOEXEC), 4);
  ASSERT_EQ(::dup3(b[1], 3, O_CLOEXEC), 3);
  ::close(a[1]);
  ::close(b[1]);
  const int secret = ::open("/etc/hostname", O_RDONLY);  // any fd of the parent's, not CLOEXEC
  ASSERT_GE(secret, 0);
  VmProcessSpec spec;
  spec.binary = "/bin/sh";
  spec.argv = {"sh", "-c",
               "echo uid=$(id -u) gid=$(id -g); grep -E '^(CapEff|CapPrm|NoNewPrivs)' /proc/self/status; "
               "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; echo three >&3; echo four >&4; "
               "cat /proc/self/cgroup; sleep 30"};
  spec.uid = kUid;
  spec.gid = kUid;
  spec.pass_fds = {4, 3};
  spec.cgroup_procs = cgroup.procs_files();
  spec.log_path = (dir_ / "log").string();
  spec.cwd = dir_.string();
  const pid_t pid = spawn_vm_process(spec);
  ::close(3);
  ::close(4);
  ::close(secret);
  for (const auto& [reader, want] : {std::pair{a[0], "three\n"}, std::pair{b[0], "four\n"}}) {
    char buf[16] = {};
    ASSERT_GT(::read(reader, buf, sizeof buf - 1), 0);
    EXPECT_STREQ(buf, want);
    ::close(reader);
  }
  std::string log;
  for (int i = 0; i < 100 && log.find("zeroness/" + name_) == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    log = read_file(dir_ / "log");
  }
  EXPECT_NE(log.find("uid=" + std::to_string(kUid) + " gid=" + std::to_string(kUid)), std::string::npos)
      << log;
  EXPECT_NE(log.find("CapEff:\t0000000000000000"), std::string::npos) << log;
  EXPECT_NE(log.find("CapPrm:\t0000000000000000"), std::string::npos) << log;
  EXPECT_NE(log.find("NoNewPrivs:\t1"), std::string::npos) << log;
  // 0, 1, 2, 3, 4 and the one ls itself opens: nothing of the parent's.
  EXPECT_NE(log.find("0 1 2 3 4 5 \n"), std::string::npos) << log;
  EXPECT_NE(log.find("zeroness/" + name_), std::string::npos) << log;
  EXPECT_FALSE(cgroup.empty());
  // Removing the cgroup ends what is in it.
  cgroup.remove();
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  for (const char* controller : {"memory", "pids", ""})
    EXPECT_FALSE(fs::exists(fs::path("/sys/fs/cgroup") / controller / "zeroness" / name_));
}

TEST_F(VmProcessTest, TheLimitsHold) {
  VmCgroup cgroup(name_, CgroupLimits{32ull << 20, 8});
  VmProcessSpec spec;
  spec.binary = "/bin/sh";
  // Forks past pids.max fail; the last line says how many ran.
  spec.argv = {"sh", "-c",
               "n=0; for i in $(seq 20); do sleep 5 & n=$((n+1)); done 2>/dev/null; echo forked; sleep 5"};
  spec.uid = kUid;
  spec.gid = kUid;
  spec.cgroup_procs = cgroup.procs_files();
  spec.log_path = (dir_ / "log").string();
  spec.cwd = dir_.string();
  const pid_t pid = spawn_vm_process(spec);
  std::string log;
  for (int i = 0; i < 200 && log.find("forked") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    log = read_file(dir_ / "log");
  }
  size_t procs = 0;
  std::ifstream in(cgroup.procs_files().back());
  for (pid_t p; in >> p;) ++procs;
  EXPECT_LE(procs, 8u) << log;
  EXPECT_GE(procs, 2u) << log;  // the positive control: forks did run
  cgroup.remove();
  ::waitpid(pid, nullptr, 0);
}

// PDEATHSIG follows the forking thread: a VM launched from a control
// connection's thread must outlive that thread.
TEST_F(VmProcessTest, OutlivesTheThreadThatAskedForIt) {
  VmCgroup cgroup(name_, CgroupLimits{64ull << 20, 16});
  VmProcessSpec spec;
  spec.binary = "/bin/sleep";
  spec.argv = {"sleep", "30"};
  spec.uid = kUid;
  spec.gid = kUid;
  spec.cgroup_procs = cgroup.procs_files();
  spec.log_path = (dir_ / "log").string();
  pid_t pid = -1;
  std::thread([&] { pid = spawn_vm_process(spec); }).join();
  ASSERT_GT(pid, 0);
  std::this_thread::sleep_for(300ms);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "the VM died with the thread that launched it";
  cgroup.remove();
  ::waitpid(pid, nullptr, 0);
}

TEST_F(VmProcessTest, NeverRoot) {
  VmProcessSpec spec;
  spec.binary = "/bin/true";
  spec.argv = {"true"};
  spec.log_path = (dir_ / "log").string();
  EXPECT_THROW(spawn_vm_process(spec), std::runtime_error);
}

}  // namespace
}  // namespace zn::vmm
