// A microVM's own control group: its memory and process count bounded, so one
// VM cannot take another's memory or fork without end. cgroup v2 where the
// memory and pids controllers are on the unified hierarchy, else the v1
// memory and pids hierarchies (this project's CI hosts mount v1). Without
// either controller a VM is not launched: there is no unbounded fallback.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zn::vmm {

struct CgroupLimits {
  uint64_t memory_bytes = 0;
  uint32_t pids = 64;
};

class VmCgroup {
 public:
  // Creates <root>/zeroness/<name> in each hierarchy (mode 0755, owned by
  // root: the VM cannot change its own limits) and sets the limits. Throws
  // std::runtime_error saying which controller is missing or what failed.
  // `root`: "/sys/fs/cgroup" (tests may point elsewhere).
  VmCgroup(const std::string& name, const CgroupLimits& limits, const std::string& root = "/sys/fs/cgroup");
  ~VmCgroup();  // remove()
  VmCgroup(const VmCgroup&) = delete;
  VmCgroup& operator=(const VmCgroup&) = delete;

  // The files a process writes its pid to, to join: one per hierarchy.
  const std::vector<std::string>& procs_files() const { return procs_; }
  // The cgroup's directories (v2: one; v1: memory and pids).
  const std::vector<std::string>& directories() const { return dirs_; }
  // Whether no process is left in it.
  bool empty() const;
  // Kills what is left (SIGKILL to each pid listed) and removes the
  // directories; best effort, never throws. Idempotent.
  void remove();

  // The cgroup `name` a previous zerod left (killed before it could remove
  // it): what is in it killed, the directories removed. Best effort.
  static void remove_leftover(const std::string& name, const std::string& root = "/sys/fs/cgroup");

 private:
  VmCgroup() = default;
  std::vector<std::string> dirs_, procs_;
};

}  // namespace zn::vmm
