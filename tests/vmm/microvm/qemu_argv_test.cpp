// QEMU's command line: the TAP comes in as a descriptor with the session's
// MAC, the sandbox and the bounds are on, and nothing of the host is opened
// by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>

#include "vmm/microvm/firecracker.h"
#include "vmm/microvm/qemu.h"
#include "vmm/microvm/vm_disk.h"

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

// A VM with an agent gets its virtio-serial channels, each a UNIX socket
// QEMU listens on in the VM's directory; one without an agent, or with one
// reached over TCP, gets none.
TEST(QemuArgv, AnAgentOverVirtioSerialGetsItsChannels) {
  VmSpec spec;
  spec.name = "user-1";
  spec.boot.network = guest_network(AddressPlan::lab_default(), 0);
  const auto none = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_EQ(std::find(none.begin(), none.end(), "-chardev"), none.end());
  spec.boot.agent_binary = "ELF";
  spec.boot.agent_config = "ZN_SESSION=user-1\n";
  spec.boot.agent_port = 7070;
  spec.boot.agent_transport = AgentTransport::kTcp;
  const auto tcp = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_EQ(std::find(tcp.begin(), tcp.end(), "-chardev"), tcp.end());
  spec.boot.agent_transport = AgentTransport::kVirtioSerial;
  const auto virtio = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_TRUE(has(virtio, "-device", "virtio-serial-device"));
  for (int i = 0; i < kAgentChannels; ++i) {
    const std::string n = std::to_string(i);
    EXPECT_EQ(agent_socket_name(i), "agent-" + n + ".sock");
    EXPECT_TRUE(
        has(virtio, "-chardev", "socket,id=zn-agent-" + n + ",path=agent-" + n + ".sock,server=on,wait=off"));
    EXPECT_TRUE(
        has(virtio, "-device", "virtserialport,chardev=zn-agent-" + n + ",name=org.zeroness.agent." + n));
  }
  EXPECT_EQ(std::count(virtio.begin(), virtio.end(), "-chardev"), kAgentChannels);
}

// A disk: the base by descriptor and read-only, the overlay in the VM's
// directory, and encrypted, the key from a pipe: never on the command line.
TEST(QemuArgv, DiskOverlayOnADescriptorBase) {
  VmSpec spec;
  spec.name = "user-1";
  spec.boot.network = guest_network(AddressPlan::lab_default(), 0);
  spec.disk = VmDisk{"/srv/images/base.img", false, "raw"};
  const auto plain = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_TRUE(has(plain, "-netdev", "tap,id=n0,fd=3"));
  EXPECT_TRUE(has(plain, "-add-fd", "fd=4,set=1"));
  EXPECT_TRUE(
      has(plain, "-blockdev", "driver=file,node-name=zn-base-file,filename=/dev/fdset/1,read-only=on"));
  EXPECT_TRUE(has(plain, "-blockdev", "driver=raw,node-name=zn-base,file=zn-base-file,read-only=on"));
  EXPECT_TRUE(has(plain, "-blockdev", "driver=file,node-name=zn-overlay-file,filename=overlay.qcow2"));
  EXPECT_TRUE(has(plain, "-blockdev", "driver=qcow2,node-name=zn-disk,file=zn-overlay-file,backing=zn-base"));
  EXPECT_TRUE(has(plain, "-device", "virtio-blk-device,drive=zn-disk"));
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "-object"), plain.end());
  for (const std::string& a : plain) {
    // The base is never opened by name, and never writable.
    EXPECT_EQ(a.find("/srv/images"), std::string::npos) << a;
    EXPECT_EQ(a.find("luks"), std::string::npos) << a;
  }

  spec.disk = VmDisk{"/srv/images/base.qcow2", true, "qcow2"};
  const auto encrypted = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_TRUE(has(encrypted, "-add-fd", "fd=4,set=1"));
  EXPECT_TRUE(has(encrypted, "-blockdev", "driver=qcow2,node-name=zn-base,file=zn-base-file,read-only=on"));
  EXPECT_TRUE(has(encrypted, "-object", "secret,id=zn-disk-key,file=/proc/self/fd/5"));
  EXPECT_TRUE(has(encrypted, "-blockdev", "driver=file,node-name=zn-overlay-file,filename=overlay.luks"));
  EXPECT_TRUE(has(encrypted, "-blockdev",
                  "driver=luks,node-name=zn-overlay-luks,file=zn-overlay-file,key-secret=zn-disk-key"));
  EXPECT_TRUE(
      has(encrypted, "-blockdev", "driver=qcow2,node-name=zn-disk,file=zn-overlay-luks,backing=zn-base"));
  EXPECT_TRUE(has(encrypted, "-device", "virtio-blk-device,drive=zn-disk"));
  // The key's only way in is the secret object's file: no data=, no iv,
  // nothing that could carry key bytes.
  for (const std::string& a : encrypted) {
    EXPECT_EQ(a.find("data="), std::string::npos) << a;
    EXPECT_EQ(a.find("keyid="), std::string::npos) << a;
    EXPECT_EQ(a.find("/srv/images"), std::string::npos) << a;
  }
  // No disk, no block device.
  spec.disk.reset();
  const auto none = qemu_argv("q", spec, Accel::kTcg, true);
  EXPECT_EQ(std::find(none.begin(), none.end(), "-blockdev"), none.end());
  EXPECT_EQ(std::find(none.begin(), none.end(), "-add-fd"), none.end());
}

// The key: 32 random bytes as base64 text, different per VM; the pipe hands
// exactly those bytes to a reader and then EOF.
TEST(DiskKey, RandomTextThroughAPipe) {
  DiskKey a, b;
  EXPECT_EQ(a.text().size(), 44u);
  EXPECT_NE(a.text(), b.text());
  const int fd = key_pipe(a.text(), ::getuid(), ::getgid());
  char buf[128];
  std::string got;
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(got, a.text());
}

TEST(Backends, FirecrackerSaysWhyItCannotRun) {
  FirecrackerBackend fc(FirecrackerOptions{"/nonexistent/firecracker"});
  ASSERT_TRUE(fc.unavailable());
  EXPECT_NE(fc.unavailable()->find("not installed"), std::string::npos);
  EXPECT_THROW(fc.launch(VmSpec{}), std::runtime_error);
  QemuBackend missing(QemuOptions{"/nonexistent/qemu"});
  ASSERT_TRUE(missing.unavailable());
  EXPECT_THROW(missing.launch(VmSpec{}), std::runtime_error);
}

}  // namespace
}  // namespace zn::vmm
