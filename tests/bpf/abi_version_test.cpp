// Pins left by a build with other map layouts are refused with a message
// that says so (the ABI marker map), instead of libbpf's "cannot reuse map";
// pins of the same ABI are re-adopted. Root: loads and pins BPF.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

#include "userspace/datapath/bpffs.h"
#include "userspace/datapath/datapath.h"
#include "zn_abi.h"

namespace zn::test {
namespace {

struct PinRoot {
  std::string path = std::string(dp::kDefaultPinRoot) + "-abitest-" + std::to_string(::getpid());
  ~PinRoot() {
    try {
      dp::remove_pin_root(path);
    } catch (...) {
    }
  }
};

std::string load_error(const std::string& root) {
  try {
    dp::Datapath::load({root});
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void set_marker(const std::string& root, __u32 version) {
  int fd = bpf_obj_get((root + "/zn_abi").c_str());
  ASSERT_GE(fd, 0);
  __u32 key = 0;
  ASSERT_EQ(bpf_map_update_elem(fd, &key, &version, BPF_ANY), 0);
  ::close(fd);
}

TEST(DatapathAbi, PinsOfAnotherAbiAreRefusedWithAClearMessageAndTheSameAbiIsReadopted) {
  PinRoot root;
  ASSERT_EQ(load_error(root.path), "");  // fresh: pins and marks
  ASSERT_EQ(load_error(root.path), "");  // positive control: same ABI, re-adopted

  set_marker(root.path, ZN_ABI_VERSION + 1);
  const std::string newer = load_error(root.path);
  EXPECT_NE(newer.find("is ABI " + std::to_string(ZN_ABI_VERSION + 1) + ", this build is ABI " +
                       std::to_string(ZN_ABI_VERSION)),
            std::string::npos)
      << newer;
  EXPECT_NE(newer.find("Remove the pin root"), std::string::npos) << newer;

  ASSERT_EQ(::unlink((root.path + "/zn_abi").c_str()), 0);  // what an older zerod left
  const std::string older = load_error(root.path);
  EXPECT_NE(older.find("has no ABI marker"), std::string::npos) << older;

  dp::remove_pin_root(root.path);
  EXPECT_EQ(load_error(root.path), "");  // removed: starts afresh
}

}  // namespace
}  // namespace zn::test
