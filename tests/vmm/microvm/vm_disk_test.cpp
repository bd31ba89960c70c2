// A VM's disk with the real tools (qemu-img, cryptsetup; no VM): what a base
// may be, and the overlay made on it, plain and encrypted. The encrypted one
// is LUKS on the outside, opens with its key and not without, and no tool's
// output ever carries the key.
#include "vmm/microvm/vm_disk.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "userspace/net/unique_fd.h"
#include "support/files.h"

namespace zn::vmm {
namespace {

using ::zn::test::read_file;

namespace fs = std::filesystem;

class VmDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    qemu_img_ = find_tool("qemu-img");
    cryptsetup_ = find_tool("cryptsetup");
    ASSERT_FALSE(qemu_img_.empty()) << "qemu-img is missing: scripts/install-deps.sh";
    ASSERT_FALSE(cryptsetup_.empty()) << "cryptsetup is missing: scripts/install-deps.sh";
    dir_ = fs::temp_directory_path() / ("zn-vmdisk-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    base_path_ = (dir_ / "base.img").string();
    std::ofstream(base_path_, std::ios::binary) << std::string(4 << 20, '\0');
  }
  void TearDown() override { fs::remove_all(dir_); }
  BaseImage inspect(const std::string& path) {
    const net::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd) << path;
    return inspect_base(qemu_img_, path, fd.get());
  }
  std::string qemu_img_, cryptsetup_;
  fs::path dir_;
  std::string base_path_;
};

TEST_F(VmDiskTest, ABaseIsAStandaloneRawOrQcow2Image) {
  const BaseImage raw = inspect(base_path_);
  EXPECT_EQ(raw.format, "raw");
  EXPECT_EQ(raw.virtual_size, 4u << 20);
  const std::string qcow2 = (dir_ / "base.qcow2").string();
  ASSERT_EQ(run_tool({qemu_img_, "create", "-q", "-f", "qcow2", qcow2, "8M"}).status, 0);
  EXPECT_EQ(inspect(qcow2).format, "qcow2");
  // A qcow2 naming a backing file would have QEMU open another host file.
  const std::string layered = (dir_ / "layered.qcow2").string();
  ASSERT_EQ(
      run_tool({qemu_img_, "create", "-q", "-f", "qcow2", "-b", base_path_, "-F", "raw", layered}).status, 0);
  try {
    inspect(layered);
    ADD_FAILURE() << "a base with a backing file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("backing file"), std::string::npos) << e.what();
  }
  // What qemu-img cannot read says so, with its words.
  const std::string empty = (dir_ / "empty.img").string();
  std::ofstream(empty).flush();
  EXPECT_THROW(inspect(empty), std::runtime_error);
}

TEST_F(VmDiskTest, PlainOverlayIsAQcow2OnTheBase) {
  const BaseImage base = inspect(base_path_);
  create_overlay({qemu_img_, ""}, dir_.string(), base, nullptr, ::getuid(), ::getgid());
  const fs::path overlay = dir_ / overlay_name(false);
  ASSERT_TRUE(fs::exists(overlay));
  EXPECT_EQ(fs::status(overlay).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  const ToolResult info = run_tool({qemu_img_, "info", "--output=json", "-U", overlay.string()});
  ASSERT_EQ(info.status, 0) << info.output;
  EXPECT_NE(info.output.find("\"format\": \"qcow2\""), std::string::npos) << info.output;
  EXPECT_NE(info.output.find(base_path_), std::string::npos) << info.output;
}

TEST_F(VmDiskTest, EncryptedOverlayOpensWithItsKeyOnly) {
  const BaseImage base = inspect(base_path_);
  DiskKey key;
  create_overlay({qemu_img_, cryptsetup_}, dir_.string(), base, &key, ::getuid(), ::getgid());
  const fs::path overlay = dir_ / overlay_name(true);
  ASSERT_TRUE(fs::exists(overlay));
  EXPECT_FALSE(fs::exists(dir_ / "overlay-head.qcow2"));  // the scratch qcow2 is gone
  const std::string bytes = read_file(overlay);
  EXPECT_EQ(bytes.rfind(std::string("LUKS\xba\xbe", 6), 0), 0u);
  // Nothing of the qcow2 inside shows: not its magic, not the base's path.
  EXPECT_EQ(bytes.find("QFI\xfb"), std::string::npos);
  EXPECT_EQ(bytes.find(base_path_), std::string::npos);
  EXPECT_EQ(bytes.find(key.text()), std::string::npos);
  // With the key (on a pipe, as QEMU gets it): a qcow2 on the base.
  const auto open_with = [&](const std::string& passphrase) {
    const net::UniqueFd pipe(key_pipe(passphrase, ::getuid(), ::getgid()));
    return run_tool(
        {qemu_img_, "info", "-U", "--object", "secret,id=k,file=/proc/self/fd/3", "--image-opts",
         "driver=qcow2,file.driver=luks,file.key-secret=k,file.file.filename=" + overlay.string()},
        "", pipe.get());
  };
  const ToolResult good = open_with(key.text());
  ASSERT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("file format: qcow2"), std::string::npos) << good.output;
  EXPECT_NE(good.output.find("backing file: " + base_path_), std::string::npos) << good.output;
  // Another key does not open it.
  DiskKey other;
  const ToolResult bad = open_with(other.text());
  EXPECT_NE(bad.status, 0) << bad.output;
  EXPECT_EQ(bad.output.find(other.text()), std::string::npos) << bad.output;
}

TEST_F(VmDiskTest, AFailedStepSaysWhyAndLeavesNothing) {
  BaseImage base = inspect(base_path_);
  DiskKey key;
  // A cryptsetup that is not one: the step fails with its output.
  try {
    create_overlay({qemu_img_, "/bin/false"}, dir_.string(), base, &key, ::getuid(), ::getgid());
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cryptsetup luksFormat"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(key.text()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ / overlay_name(true)));
  EXPECT_FALSE(fs::exists(dir_ / "overlay-head.qcow2"));
}

// A tool that ends without reading its input (or fails at once) neither
// blocks nor raises SIGPIPE in the caller: the input is larger than a pipe
// holds, so a pipe would block until the tool exits and then raise SIGPIPE.
TEST_F(VmDiskTest, AToolThatReadsNoInputEndsCleanly) {
  const std::string input(1 << 20, 'k');
  const ToolResult exited = run_tool({"/bin/sh", "-c", "exit 3"}, input);
  EXPECT_EQ(exited.status, 3) << exited.output;
  // Positive control: a tool that reads it gets all of it.
  const ToolResult counted = run_tool({"/bin/sh", "-c", "wc -c"}, input);
  ASSERT_EQ(counted.status, 0) << counted.output;
  EXPECT_NE(counted.output.find(std::to_string(input.size())), std::string::npos) << counted.output;
}

}  // namespace
}  // namespace zn::vmm
