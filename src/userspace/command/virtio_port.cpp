#include "userspace/command/virtio_port.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace zn::command {
namespace {

namespace fs = std::filesystem;

// Sleeps until the host side connects. SIGIO (sent on every change of the
// host's connection) wakes it; the one-second bound covers a change that
// came between the check and the wait.
void wait_for_host(int fd) {
  sigset_t io;
  sigemptyset(&io);
  sigaddset(&io, SIGIO);
  const timespec second{1, 0};
  while (!host_connected(fd)) ::sigtimedwait(&io, nullptr, &second);
}

// What is left of a refused envelope, discarded until the host closes (a
// quiet two seconds ends it too: the next exchange must not wait for ever).
void drain(int fd) {
  char sink[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 2000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    const ssize_t n = ::read(fd, sink, sizeof sink);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;
  }
}

}  // namespace

bool host_connected(int fd) {
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 0) < 0 && errno == EINTR) {
  }
  return !(p.revents & POLLHUP);
}

std::vector<VirtioPort> find_virtio_ports(const std::string& prefix, const std::string& sysfs) {
  std::vector<VirtioPort> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sysfs, ec)) {
    std::ifstream in(entry.path() / "name");
    std::string name;
    std::getline(in, name);
    if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
        name[prefix.size()] != '.')
      continue;
    out.push_back({name, "/dev/" + entry.path().filename().string()});
  }
  std::sort(out.begin(), out.end(), [](const VirtioPort& a, const VirtioPort& b) { return a.name < b.name; });
  return out;
}

int open_virtio_port(const std::string& device) {
  const int fd = ::open(device.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw std::runtime_error("cannot open " + device + ": " + std::strerror(errno));
  const f_owner_ex owner{F_OWNER_TID, ::gettid()};
  if (::fcntl(fd, F_SETOWN_EX, &owner) != 0 || ::fcntl(fd, F_SETFL, O_RDWR | O_NONBLOCK | O_ASYNC) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("cannot ask for SIGIO on " + device + ": " + std::strerror(e));
  }
  return fd;
}

void serve_virtio_port(Agent& agent, int fd, const std::function<void(const ServeOutcome&)>& on_exchange) {
  for (;;) {
    wait_for_host(fd);
    const ServeOutcome o = agent.serve(fd, Transport::kChannel);
    if (o.unread) drain(fd);
    // A connection that ended before its first byte (zerod closing after
    // the last reply) was no exchange.
    if (o.reason != "no_envelope") on_exchange(o);
  }
}

}  // namespace zn::command
