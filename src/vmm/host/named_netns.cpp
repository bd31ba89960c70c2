#include "vmm/host/named_netns.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "common/netns.h"

extern char** environ;

namespace zn::vmm {

int run_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (int err = ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ))
    throw std::system_error(err, std::generic_category(), "spawn " + argv[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::system_error(errno, std::generic_category(), "waitpid");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

void create_netns(const std::string& name) {
  if (int rc = run_command({"ip", "netns", "add", name}); rc != 0)
    throw std::runtime_error("ip netns add " + name + " failed (exit " + std::to_string(rc) + ")");
}

void delete_netns(const std::string& name) {
  if (!netns_exists(name)) return;
  if (int rc = run_command({"ip", "netns", "del", name}); rc != 0)
    throw std::runtime_error("ip netns del " + name + " failed (exit " + std::to_string(rc) + ")");
}

std::vector<std::string> list_netns() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec))
    names.push_back(entry.path().filename().string());
  return names;
}

int run_in_netns(const std::string& netns, const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"ip", "netns", "exec", netns};
  full.insert(full.end(), argv.begin(), argv.end());
  return run_command(full);
}

}  // namespace zn::vmm
