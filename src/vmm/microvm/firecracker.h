// The Firecracker backend. Reported for what it is on each host: unavailable
// where the `firecracker` binary is not installed (Debian 12 does not package
// it), and, where it is, unavailable until its launcher is built (machine
// config, API socket, the jailer): never claimed to run a VM it cannot.
#pragma once

#include "vmm/microvm/microvm.h"

namespace zn::vmm {

class FirecrackerBackend : public VmBackend {
 public:
  explicit FirecrackerBackend(std::string binary = "");  // "" = firecracker from PATH
  std::string name() const override { return "firecracker"; }
  std::optional<std::string> unavailable() const override;
  std::unique_ptr<MicroVm> launch(VmSpec spec) override;

 private:
  std::string binary_;
};

}  // namespace zn::vmm
