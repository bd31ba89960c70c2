#include "common/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace zn {

std::string netns_path(const std::string& name) { return "/run/netns/" + name; }

bool netns_exists(const std::string& name) {
  struct stat st {};
  return ::stat(netns_path(name).c_str(), &st) == 0;
}

NetnsScope::NetnsScope(const std::string& name) {
  saved_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved_fd_ < 0) throw std::system_error(errno, std::generic_category(), "open own netns");
  int target = ::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int err = errno;
    ::close(saved_fd_);
    throw std::system_error(err, std::generic_category(), "open netns " + name);
  }
  int rc = ::setns(target, CLONE_NEWNET);
  int err = errno;
  ::close(target);
  if (rc != 0) {
    ::close(saved_fd_);
    throw std::system_error(err, std::generic_category(), "setns " + name);
  }
}

void NetnsScope::stay() {
  ::close(saved_fd_);
  saved_fd_ = -1;
}

NetnsScope::~NetnsScope() {
  if (saved_fd_ < 0) return;
  // Failing to return would leave this thread in the wrong namespace with no
  // way to report it from a destructor; continuing would be worse.
  if (::setns(saved_fd_, CLONE_NEWNET) != 0) std::abort();
  ::close(saved_fd_);
}

}  // namespace zn
