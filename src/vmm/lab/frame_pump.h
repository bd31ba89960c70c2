// Copies Ethernet frames both ways between two TAP file descriptors — what a
// VMM's virtio-net backend does between a guest and its host TAP.
#pragma once

#include <thread>

#include "userspace/net/unique_fd.h"

namespace zn::vmm {

// Pumps frames between fd_a and fd_b until stop_fd becomes readable (an
// eventfd or signalfd) or a device goes away. Sets both TAP fds non-blocking.
// Returns 0 when stopped, else the errno that ended it. Frames the other side
// cannot take (device down, queue full) are dropped, as on a wire. Allocates
// nothing, so it may run in a child forked from a multithreaded process.
int pump_frames(int fd_a, int fd_b, int stop_fd) noexcept;

// pump_frames on a thread; stops and joins on destruction.
class FramePump {
 public:
  FramePump(net::UniqueFd tap_a, net::UniqueFd tap_b);  // throws std::system_error
  FramePump(const FramePump&) = delete;
  FramePump& operator=(const FramePump&) = delete;
  ~FramePump();

  void stop() noexcept;  // idempotent; joins the thread

 private:
  net::UniqueFd tap_a_, tap_b_, stop_event_;
  std::thread thread_;
};

}  // namespace zn::vmm
