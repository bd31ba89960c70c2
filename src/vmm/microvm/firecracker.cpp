#include "vmm/microvm/firecracker.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace zn::vmm {

FirecrackerBackend::FirecrackerBackend(std::string binary) {
  if (!binary.empty()) {
    if (::access(binary.c_str(), X_OK) == 0) binary_ = binary;
    return;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (::access((dir + "/firecracker").c_str(), X_OK) == 0) {
      binary_ = dir + "/firecracker";
      return;
    }
}

std::optional<std::string> FirecrackerBackend::unavailable() const {
  if (binary_.empty()) return "firecracker is not installed on this host";
  return "found " + binary_ + ", but zeroness's Firecracker launcher is not built yet (use --backend qemu)";
}

std::unique_ptr<MicroVm> FirecrackerBackend::launch(VmSpec) { throw std::runtime_error(*unavailable()); }

}  // namespace zn::vmm
