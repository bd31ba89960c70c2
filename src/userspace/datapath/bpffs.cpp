#include "userspace/datapath/bpffs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace zn::dp {
namespace {
constexpr long kBpfFsMagic = 0xcafe4a11;
}

bool is_bpffs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == kBpfFsMagic;
}

void ensure_pin_root(const std::string& pin_root) {
  namespace fs = std::filesystem;
  fs::path root(pin_root);
  fs::path parent = root.parent_path();
  if (!is_bpffs(parent)) {
    fs::create_directories(parent);
    if (::mount("bpf", parent.c_str(), "bpf", 0, "mode=0700") != 0)
      throw std::system_error(errno, std::generic_category(), "mount bpffs on " + parent.string());
  }
  if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST)
    throw std::system_error(errno, std::generic_category(), "mkdir " + root.string());
}

void remove_pin_root(const std::string& pin_root) {
  std::error_code ec;
  std::filesystem::remove_all(pin_root, ec);
  if (ec) throw std::system_error(ec, "remove " + pin_root);
}

}  // namespace zn::dp
