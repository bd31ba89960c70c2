// Finding the agent's virtio-serial ports by name (the serving itself needs
// a real port: the microVM integration test runs it).
#include "userspace/command/virtio_port.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace zn::command {
namespace {

namespace fs = std::filesystem;

class VirtioPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("zn-vport-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void port(const std::string& dev, const std::string& name) {
    fs::create_directories(dir_ / dev);
    std::ofstream(dir_ / dev / "name") << name << "\n";
  }
  fs::path dir_;
};

TEST_F(VirtioPortTest, OnlyThePortsNamedPrefixDotSomethingAreTheAgents) {
  port("vport1p3", "org.zeroness.agent.2");
  port("vport1p1", "org.zeroness.agent.0");
  port("vport1p2", "org.zeroness.agent.1");
  port("vport2p1", "org.qemu.guest_agent.0");
  port("vport2p2", "org.zeroness.agent");     // the prefix alone
  port("vport2p3", "org.zeroness.agentx.0");  // a longer name sharing it
  port("vport2p4", "org.zeroness.agent.");    // nothing after the dot
  const auto ports = find_virtio_ports("org.zeroness.agent", dir_.string());
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].name, "org.zeroness.agent.0");
  EXPECT_EQ(ports[0].device, "/dev/vport1p1");
  EXPECT_EQ(ports[2].name, "org.zeroness.agent.2");
  EXPECT_EQ(ports[2].device, "/dev/vport1p3");
}

TEST_F(VirtioPortTest, NoDirectoryIsNoPorts) {
  EXPECT_TRUE(find_virtio_ports("org.zeroness.agent", (dir_ / "absent").string()).empty());
}

TEST_F(VirtioPortTest, AnUnopenableDeviceSaysWhich) {
  try {
    open_virtio_port((dir_ / "vport9p9").string());
    FAIL() << "opened a device that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("vport9p9"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zn::command
