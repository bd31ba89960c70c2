// QEMU's command line: the TAP comes in as a descriptor with the session's
// MAC, the sandbox and the bounds are on, and nothing of the host is opened
// by name.
#include <gtest/gtest.h>

#include <algorithm>

#include "vmm/microvm/firecracker.h"
#include "vmm/microvm/qemu.h"

namespace zn::vmm {
namespace {

bool has(const std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == flag && argv[i + 1] == value) return true;
  return false;
}

TEST(QemuArgv, TapByDescriptorSandboxedAndBounded) {
  VmSpec spec;
  spec.name = "user-1";
  spec.directory = "/var/lib/zeroness/vms/user-1";
  spec.memory_mib = 384;
  spec.boot.network = guest_network(AddressPlan::lab_default(), 0);
  const auto tcg = qemu_argv("/usr/bin/qemu-system-x86_64", spec, Accel::kTcg, true);
  EXPECT_EQ(tcg.front(), "/usr/bin/qemu-system-x86_64");
  EXPECT_TRUE(has(tcg, "-netdev", "tap,id=n0,fd=3"));
  EXPECT_TRUE(has(tcg, "-device", "virtio-net-device,netdev=n0,mac=02:7a:6e:00:00:01"));
  EXPECT_TRUE(has(tcg, "-accel", "tcg,tb-size=64"));
  EXPECT_TRUE(has(tcg, "-m", "384"));
  // In the VM's directory, its working directory (nothing above it is the VM's).
  EXPECT_TRUE(has(tcg, "-kernel", "vmlinuz"));
  EXPECT_TRUE(has(tcg, "-initrd", "initrd"));
  EXPECT_TRUE(has(tcg, "-serial", "file:console.log"));
  EXPECT_TRUE(
      has(tcg, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  EXPECT_NE(std::find(tcg.begin(), tcg.end(), "-nodefaults"), tcg.end());
  // Under TCG the guest is told the TSC's frequency (a third of boots hung
  // calibrating it), as the host has it.
  ASSERT_GT(host_tsc_khz(), 100000u);
  EXPECT_TRUE(has(tcg, "-append",
                  "console=ttyS0 quiet panic=-1 reboot=t tsc_early_khz=" + std::to_string(host_tsc_khz())));
  EXPECT_EQ(kernel_command_line(Accel::kKvm).find("tsc_early_khz"), std::string::npos);
  // No ifname= anywhere: QEMU never opens a network device itself.
  for (const std::string& a : tcg) EXPECT_EQ(a.find("ifname"), std::string::npos) << a;
  EXPECT_TRUE(has(qemu_argv("q", spec, Accel::kKvm, true), "-accel", "kvm"));
  const auto probe = qemu_argv("q", spec, Accel::kKvm, false);
  EXPECT_EQ(std::find(probe.begin(), probe.end(), "-netdev"), probe.end());
}

TEST(Backends, FirecrackerSaysWhyItCannotRun) {
  FirecrackerBackend fc("/nonexistent/firecracker");
  ASSERT_TRUE(fc.unavailable());
  EXPECT_NE(fc.unavailable()->find("not installed"), std::string::npos);
  EXPECT_THROW(fc.launch(VmSpec{}), std::runtime_error);
  QemuBackend missing(QemuOptions{"/nonexistent/qemu"});
  ASSERT_TRUE(missing.unavailable());
  EXPECT_THROW(missing.launch(VmSpec{}), std::runtime_error);
}

}  // namespace
}  // namespace zn::vmm
