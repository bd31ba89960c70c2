// Entering network namespaces by name (the /run/netns/NAME files of iproute2).
#pragma once

#include <string>

namespace zn {

// Moves the calling thread into a network namespace for its lifetime and back
// out on destruction. Sockets (netlink included) created meanwhile belong to
// that namespace for good, which is how per-namespace setup is done here.
class NetnsScope {
 public:
  explicit NetnsScope(const std::string& name);  // throws std::system_error
  ~NetnsScope();
  // Stay in the namespace for good (a daemon's start-up): the destructor
  // no longer switches back.
  void stay();
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;

 private:
  int saved_fd_ = -1;
};

// Path of a named network namespace file, "/run/netns/NAME".
std::string netns_path(const std::string& name);
bool netns_exists(const std::string& name);

}  // namespace zn
