// The lingering close (nginx's): after a connection's last answer (a
// refusal, a GOAWAY, a WebSocket Close) what the peer still sends is read
// and dropped for a moment, since closing with bytes unread makes the
// kernel reset the connection and the peer may lose the answer saying why.
//
// One deadline for the whole drain, never one per read (issue 32): with a
// per-read bound of 500 ms and a 1 MiB cap, a guest trickling a byte every
// 400 ms held a refused connection, and its place in the session's cap,
// for days.
#pragma once

#include <asio/awaitable.hpp>

#include <chrono>
#include <cstddef>

namespace zn::proxy {

inline constexpr std::chrono::milliseconds kLingerTime{1000};
inline constexpr size_t kLingerBytes = size_t{1} << 20;

// (Not named linger: that is <sys/socket.h>'s struct, in the same unity batches.)
// `read_for(left)`: an awaitable read of what the peer sends, bounded by
// `left`, giving the bytes read (0 at its end); it may throw (a timeout, a
// reset): the caller's catch ends the linger like the peer's end does.
template <typename ReadFor>
asio::awaitable<void> drain_lingering(ReadFor read_for,
                                      std::chrono::steady_clock::duration total = kLingerTime,
                                      size_t max_bytes = kLingerBytes) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point until = Clock::now() + total;
  size_t dropped = 0;
  while (dropped < max_bytes) {
    const Clock::duration left = until - Clock::now();
    if (left <= Clock::duration::zero()) break;
    const size_t n = co_await read_for(left);
    if (n == 0) break;
    dropped += n;
  }
}

}  // namespace zn::proxy
