#include "vmm/lab/frame_pump.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace zn::vmm {
namespace {

constexpr std::size_t kFrameBuffer = 64 * 1024;  // above any MTU a TAP can carry
constexpr int kFramesPerWakeup = 64;             // bound so one direction cannot starve the other

// Moves pending frames from src to dst. Returns 0 or the errno that ended the source.
int forward(int src, int dst, unsigned char* buf) {
  for (int i = 0; i < kFramesPerWakeup; ++i) {
    ssize_t n = ::read(src, buf, kFrameBuffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN ? 0 : errno;
    }
    if (n == 0) return 0;
    // A failed write drops the frame; retrying would only stall the other direction.
    while (::write(dst, buf, static_cast<std::size_t>(n)) < 0 && errno == EINTR) {
    }
  }
  return 0;
}

bool set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

}  // namespace

int pump_frames(int fd_a, int fd_b, int stop_fd) noexcept {
  if (!set_nonblocking(fd_a) || !set_nonblocking(fd_b)) return errno;
  alignas(64) unsigned char buf[kFrameBuffer];
  pollfd fds[3] = {{fd_a, POLLIN, 0}, {fd_b, POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (fds[2].revents) return 0;
    // POLLERR on a TAP fd means its device was deleted; the read reports why.
    if (fds[0].revents)
      if (int err = forward(fd_a, fd_b, buf)) return err;
    if (fds[1].revents)
      if (int err = forward(fd_b, fd_a, buf)) return err;
  }
}

FramePump::FramePump(net::UniqueFd tap_a, net::UniqueFd tap_b)
    : tap_a_(std::move(tap_a)), tap_b_(std::move(tap_b)), stop_event_(::eventfd(0, EFD_CLOEXEC)) {
  if (!stop_event_) throw std::system_error(errno, std::generic_category(), "eventfd");
  thread_ = std::thread([this] { pump_frames(tap_a_.get(), tap_b_.get(), stop_event_.get()); });
}

FramePump::~FramePump() { stop(); }

void FramePump::stop() noexcept {
  if (!thread_.joinable()) return;
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_event_.get(), &one, sizeof one);
  thread_.join();
}

}  // namespace zn::vmm
