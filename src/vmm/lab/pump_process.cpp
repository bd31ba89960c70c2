#include "vmm/lab/pump_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include "vmm/lab/frame_pump.h"

namespace zn::vmm {
namespace {

// The process name (/proc/PID/comm) identifying our pumps when a pid file is read.
constexpr char kPumpComm[] = "zn-pump";

// Only async-signal-safe calls from here on: the parent may be multithreaded.
// Closing every inherited fd also closes the parent's readiness pipe: EOF
// there tells it the child is named and identifiable as a pump.
[[noreturn]] void run_pump_child(int tap_a, int tap_b) {
  ::setsid();  // no terminal signals from the shell that ran `lab up`
  ::prctl(PR_SET_NAME, kPumpComm, 0, 0, 0);
  int devnull = ::open("/dev/null", O_RDWR);
  if (devnull >= 0)
    for (int fd = 0; fd <= 2; ++fd) ::dup2(devnull, fd);
  // Close inherited fds, so the pump never keeps other TAPs, sockets or a
  // caller's pipe (a `$(zn-lab up)` would otherwise never see EOF) open.
  const unsigned lo = static_cast<unsigned>(std::min(tap_a, tap_b));
  const unsigned hi = static_cast<unsigned>(std::max(tap_a, tap_b));
  if (lo > 3) ::close_range(3, lo - 1, 0);
  if (hi > lo + 1) ::close_range(lo + 1, hi - 1, 0);
  ::close_range(hi + 1, ~0U, 0);

  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  ::sigprocmask(SIG_BLOCK, &term, nullptr);
  int stop_fd = ::signalfd(-1, &term, SFD_CLOEXEC);
  if (stop_fd < 0) ::_exit(1);
  ::_exit(pump_frames(tap_a, tap_b, stop_fd) == 0 ? 0 : 1);
}

bool is_pump(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == kPumpComm;
}

// Exited means reaped by us (if it is our child), gone, or a zombie of someone else.
// A child of ours is judged by waitpid alone: read from /proc, a child that
// died after waitpid looked is a zombie nobody reaps (under load the window is
// wide: a lab's teardown returned with its pump still a zombie).
bool exited(pid_t pid) {
  const pid_t reaped = ::waitpid(pid, nullptr, WNOHANG);
  if (reaped == pid) return true;
  if (reaped == 0) return false;  // ours, still running
  // Not our child (another process's lab): gone, or someone else's zombie.
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close_paren = line.rfind(')');
  return close_paren == std::string::npos || line.substr(close_paren + 2, 1) == "Z";
}

bool wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!exited(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

pid_t spawn_pump_process(int tap_a, int tap_b) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "pipe for frame pump");
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(ready[0]);
    ::close(ready[1]);
    throw std::system_error(err, std::generic_category(), "fork frame pump");
  }
  if (pid == 0) run_pump_child(tap_a, tap_b);
  ::close(ready[1]);
  // Wait for the child to take its name, so stop_pump_process recognises it
  // even if the caller stops it right away.
  char byte;
  while (::read(ready[0], &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(ready[0]);
  return pid;
}

bool pump_process_running(pid_t pid) { return pid > 0 && is_pump(pid) && !exited(pid); }

bool stop_pump_process(pid_t pid, std::chrono::milliseconds grace) {
  if (!pump_process_running(pid)) {
    if (pid > 0) ::waitpid(pid, nullptr, WNOHANG);  // reap a dead child of ours
    return false;
  }
  ::kill(pid, SIGTERM);
  if (!wait_exit(pid, grace)) {
    ::kill(pid, SIGKILL);
    wait_exit(pid, std::chrono::seconds(5));
  }
  return true;
}

}  // namespace zn::vmm
