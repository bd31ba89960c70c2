// The per-VM configuration archive: what the kernel unpacks is exactly what
// was written (checked with GNU cpio, an independent reader), and nothing
// can be written outside the archive's root.
#include "vmm/microvm/newc_archive.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "vmm/microvm/guest_config.h"
#include "support/files.h"

namespace zn::vmm {
namespace {

using ::zn::test::read_file;

namespace fs = std::filesystem;

class ArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zn-newc-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Unpacks `archive` with cpio into out/; cpio's exit code.
  int unpack(const std::string& archive) {
    std::ofstream(dir_ / "a.cpio", std::ios::binary) << archive;
    const std::string cmd = "cd " + (dir_ / "out").string() + " && cpio -id --quiet < " +
                            (dir_ / "a.cpio").string() + " 2>/dev/null";
    return std::system(cmd.c_str());
  }
  fs::path dir_;
};

TEST_F(ArchiveTest, GnuCpioReadsWhatWasWritten) {
  const std::string binary("\0\x01\xff tail", 8);
  ASSERT_EQ(unpack(newc_archive({{"zn", 0755, true, {}},
                                 {"zn/guest.conf", 0644, false, "ZN_IP4=198.19.0.2/24\n"},
                                 {"zn/bin", 0700, false, binary},
                                 {"zn/empty", 0600, false, ""}})),
            0);
  EXPECT_EQ(read_file(dir_ / "out" / "zn" / "guest.conf"), "ZN_IP4=198.19.0.2/24\n");
  EXPECT_EQ(read_file(dir_ / "out" / "zn" / "bin"), binary);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "zn" / "empty"));
  EXPECT_EQ(fs::status(dir_ / "out" / "zn" / "bin").permissions() & fs::perms::all, fs::perms::owner_all);
  // Lengths that need each padding (names and data of every size mod 4).
  std::vector<ArchiveEntry> many;
  for (int i = 1; i <= 9; ++i)
    many.push_back(
        {std::string(static_cast<size_t>(i), 'f'), 0644, false, std::string(static_cast<size_t>(i), 'x')});
  fs::remove_all(dir_ / "out");
  fs::create_directories(dir_ / "out");
  ASSERT_EQ(unpack(newc_archive(many)), 0);
  for (int i = 1; i <= 9; ++i)
    EXPECT_EQ(read_file(dir_ / "out" / std::string(static_cast<size_t>(i), 'f')),
              std::string(static_cast<size_t>(i), 'x'));
}

TEST_F(ArchiveTest, PathsStayInside) {
  for (const char* bad : {"", "/etc/passwd", "../x", "zn/../../x", "zn//x", "zn/./x", "zn/"})
    EXPECT_THROW(newc_archive({{bad, 0644, false, "x"}}), std::invalid_argument) << bad;
  EXPECT_NO_THROW(newc_archive({{"zn/ok", 0644, false, "x"}}));
}

TEST(GuestConfig, TheSessionsNetworkAndNothingElse) {
  GuestBoot boot;
  boot.network = guest_network(AddressPlan::lab_default(), 3);
  boot.hostname = "user-1";
  boot.ca_pem = "-----BEGIN CERTIFICATE-----\nMII...\n-----END CERTIFICATE-----\n";
  const std::string conf = guest_conf(boot);
  for (const char* line : {"ZN_HOSTNAME=user-1\n", "ZN_IP4=198.19.3.2/24\n", "ZN_GW4=198.19.3.1\n",
                           "ZN_IP6=2001:db8:19:3::2/64\n", "ZN_GW6=2001:db8:19:3::1\n", "ZN_DNS=198.19.3.1\n",
                           "ZN_MTU=1500\n", "ZN_MAC=02:7a:6e:00:00:04\n", "ZN_POWEROFF=0\n"})
    EXPECT_NE(conf.find(line), std::string::npos) << line << " in\n" << conf;
  // A value that would mean something to the shell sourcing it is refused.
  boot.hostname = "x;reboot";
  EXPECT_THROW(guest_conf(boot), std::invalid_argument);
  boot.hostname = "user-1";
  // The agent's transport: none without an agent; a TCP port, or the
  // virtio-serial port prefix (and then no port: it listens on none).
  EXPECT_NE(guest_conf(boot).find("ZN_AGENT_PORT=0\nZN_AGENT_VIRTIO=\n"), std::string::npos);
  GuestBoot agent = boot;
  agent.agent_binary = "ELF";
  agent.agent_config = "ZN_SESSION=user-1\n";
  agent.agent_port = 7070;
  EXPECT_NE(guest_conf(agent).find("ZN_AGENT_PORT=7070\nZN_AGENT_VIRTIO=\n"), std::string::npos);
  agent.agent_transport = AgentTransport::kVirtioSerial;
  EXPECT_NE(guest_conf(agent).find("ZN_AGENT_PORT=0\nZN_AGENT_VIRTIO=org.zeroness.agent\n"),
            std::string::npos)
      << guest_conf(agent);
  const std::string archive = guest_config_archive(boot);
  EXPECT_NE(archive.find("zn/ca.pem"), std::string::npos);
  EXPECT_EQ(archive.find("zn/user-data"), std::string::npos);  // none given
  boot.user_data = "echo hi\n";
  EXPECT_NE(guest_config_archive(boot).find("zn/user-data"), std::string::npos);
}

}  // namespace
}  // namespace zn::vmm
