#include "vmm/microvm/vm_cgroup.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "vmm/microvm/vm_files.h"

namespace zn::vmm {
namespace {

namespace fs = std::filesystem;

bool has_word(const std::string& list, const std::string& word) {
  std::istringstream in(list);
  std::string w;
  while (in >> w)
    if (w == word) return true;
  return false;
}

void write_file(const fs::path& p, const std::string& value) {
  std::ofstream out(p);
  out << value;
  out.flush();
  if (!out) throw std::runtime_error("cgroup: cannot write " + value + " to " + p.string());
}

void make_dir(const fs::path& p) {
  if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cgroup: cannot create " + p.string() + ": " + std::strerror(errno));
}

}  // namespace

VmCgroup::VmCgroup(const std::string& name, const CgroupLimits& limits, const std::string& root) {
  const fs::path r(root);
  try {
    if (has_word(read_whole_file(r / "cgroup.controllers"), "memory") &&
        has_word(read_whole_file(r / "cgroup.controllers"), "pids")) {
      // v2: controllers must be enabled for the children of each level.
      write_file(r / "cgroup.subtree_control", "+memory +pids");
      make_dir(r / "zeroness");
      write_file(r / "zeroness" / "cgroup.subtree_control", "+memory +pids");
      const fs::path dir = r / "zeroness" / name;
      make_dir(dir);
      dirs_.push_back(dir);
      write_file(dir / "memory.max", std::to_string(limits.memory_bytes));
      write_file(dir / "memory.swap.max", "0");
      write_file(dir / "pids.max", std::to_string(limits.pids));
      procs_.push_back(dir / "cgroup.procs");
      return;
    }
    if (!fs::exists(r / "memory" / "memory.limit_in_bytes") ||
        !fs::exists(r / "pids" / "cgroup.procs"))  // the root has no pids.max
      throw std::runtime_error(
          "cgroup: neither cgroup v2 with memory and pids nor the v1 memory and pids "
          "hierarchies are mounted under " +
          root);
    for (const char* controller : {"memory", "pids"}) {
      make_dir(r / controller / "zeroness");
      const fs::path dir = r / controller / "zeroness" / name;
      make_dir(dir);
      dirs_.push_back(dir);
      procs_.push_back(dir / "cgroup.procs");
    }
    write_file(r / "memory" / "zeroness" / name / "memory.limit_in_bytes",
               std::to_string(limits.memory_bytes));
    write_file(r / "pids" / "zeroness" / name / "pids.max", std::to_string(limits.pids));
  } catch (...) {
    remove();
    throw;
  }
}

VmCgroup::~VmCgroup() { remove(); }

void VmCgroup::remove_leftover(const std::string& name, const std::string& root) {
  VmCgroup leftover;
  for (const fs::path& dir :
       {fs::path(root) / "zeroness" / name, fs::path(root) / "memory" / "zeroness" / name,
        fs::path(root) / "pids" / "zeroness" / name})
    if (fs::is_directory(dir)) {
      leftover.dirs_.push_back(dir);
      leftover.procs_.push_back(dir / "cgroup.procs");
    }
  leftover.remove();
}

bool VmCgroup::empty() const {
  for (const std::string& procs : procs_) {
    std::ifstream in(procs);
    pid_t pid;
    if (in >> pid) return false;
  }
  return true;
}

void VmCgroup::remove() {
  for (const std::string& procs : procs_) {
    std::ifstream in(procs);
    pid_t pid;
    while (in >> pid) ::kill(pid, SIGKILL);
  }
  // A killed process leaves its cgroup when the kernel has reaped it: rmdir
  // is retried briefly (EBUSY until then).
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) {
    for (int i = 0; i < 50 && ::rmdir(it->c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  dirs_.clear();
  procs_.clear();
}

}  // namespace zn::vmm
