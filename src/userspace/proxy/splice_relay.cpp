#include "userspace/proxy/splice_relay.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <exception>
#include <system_error>

#include "userspace/proxy/proxy_io.h"

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

// The relay's pipe: 4x the default 64 KiB, so fewer splice calls per byte,
// with kernel memory per connection still bounded (two pipes).
constexpr int kPipeBytes = 1 << 18;

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int p[2];
    if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe2");
    r = p[0];
    w = p[1];
    // Refused above /proc/sys/fs/pipe-max-size: the default then stays.
    ::fcntl(w, F_SETPIPE_SZ, kPipeBytes);
  }
  ~Pipe() {
    ::close(r);
    ::close(w);
  }
};

}  // namespace

// Moves bytes from -> to through a pipe with splice(2), never through user
// memory. On EOF half-closes `to`; on an error or when the connection has
// been idle too long, tears both down so the other direction ends too.
awaitable<uint64_t> splice_one_way(tcp::socket& from, tcp::socket& to, Activity& activity,
                                   std::chrono::milliseconds idle_timeout) {
  // splice(2) from a socket blocks unless the socket's own file is
  // O_NONBLOCK (SPLICE_F_NONBLOCK covers the pipe only), and Asio sets that
  // only once an async operation has run on the socket: a socket relayed
  // straight after accept would block the loop.
  std::error_code ignored;
  from.non_blocking(true, ignored);
  to.non_blocking(true, ignored);
  Pipe pipe;
  uint64_t total = 0;
  asio::steady_timer idle(from.get_executor());
  try {
    for (;;) {
      ssize_t n = ::splice(from.native_handle(), nullptr, pipe.w, nullptr, kPipeBytes,
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        idle.expires_at(activity.last + idle_timeout);
        auto r = co_await (from.async_wait(tcp::socket::wait_read, as_tuple) || idle.async_wait(as_tuple));
        if (r.index() == 1 && std::chrono::steady_clock::now() >= activity.last + idle_timeout) {
          // Abortive close on both sides (RST when the sockets close), so
          // neither end mistakes the timeout for an orderly end of data.
          activity.idle_closed = true;
          linger abort{1, 0};
          ::setsockopt(from.native_handle(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
          ::setsockopt(to.native_handle(), SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
          break;
        }
        continue;
      }
      if (n == 0) {
        ::shutdown(to.native_handle(), SHUT_WR);
        co_return total;
      }
      if (n < 0) break;
      activity.last = std::chrono::steady_clock::now();
      size_t left = static_cast<size_t>(n);
      while (left > 0) {
        ssize_t m =
            ::splice(pipe.r, nullptr, to.native_handle(), nullptr, left, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (m < 0 && errno == EINTR) continue;
        if (m < 0 && errno == EAGAIN) {
          co_await to.async_wait(tcp::socket::wait_write, use_awaitable);
          continue;
        }
        if (m <= 0) throw std::system_error(errno, std::generic_category());
        left -= static_cast<size_t>(m);
        total += static_cast<uint64_t>(m);
      }
    }
  } catch (const std::exception&) {
  }
  ::shutdown(from.native_handle(), SHUT_RDWR);
  ::shutdown(to.native_handle(), SHUT_RDWR);
  co_return total;
}

}  // namespace zn::proxy
