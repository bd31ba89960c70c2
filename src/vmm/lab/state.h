// A lab's record under /run/zeroness-lab/<prefix>/: the guests in order of
// addition (file "guests", written before each guest is created, so a crash
// leaves a record of everything to remove) and one "<guest>.pid" per frame
// pump process. Lets a later process attach to or tear down the lab.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace zn::vmm {

class LabState {
 public:
  static constexpr char kRoot[] = "/run/zeroness-lab";

  explicit LabState(const std::string& prefix);

  const std::filesystem::path& dir() const { return dir_; }
  bool exists() const;
  void create() const;           // mkdir -p; throws
  void remove() const noexcept;  // rm -r, tolerates absence

  void add_guest(const std::string& name) const;  // appends; throws
  std::vector<std::string> guests() const;        // in order of addition; empty if none

  void write_pump_pid(const std::string& guest, pid_t pid) const;  // throws
  std::optional<pid_t> pump_pid(const std::string& guest) const;
  std::vector<pid_t> pump_pids() const;  // every *.pid file, for teardown

 private:
  std::filesystem::path dir_;
};

}  // namespace zn::vmm
