// A frame pump in a process of its own, so a lab outlives the command that
// built it (scripts/lab.sh up, then exec/down from later processes).
#pragma once

#include <sys/types.h>

#include <chrono>

namespace zn::vmm {

// Forks a detached child (own session, stdio on /dev/null, every other fd
// closed) that runs pump_frames(tap_a, tap_b) until SIGTERM. The caller keeps
// its own copies of the fds and should close them. Returns the child's pid.
pid_t spawn_pump_process(int tap_a, int tap_b);

// Stops a pump started by spawn_pump_process, possibly by an earlier process:
// SIGTERM, then SIGKILL after `grace`. A pid that is not (or no longer) a pump
// is left alone — pids are reused. Returns true if a pump was stopped.
bool stop_pump_process(pid_t pid, std::chrono::milliseconds grace = std::chrono::seconds(2));

// True if pid is a live pump process.
bool pump_process_running(pid_t pid);

}  // namespace zn::vmm
