// Each session's turn at an I/O loop's bulk work (issue 32). A loop runs
// what became ready since it last polled, in order; one session's many
// streams moving bodies (an HTTP/2 guest with 256 streams of 64 KiB) filled
// each of those rounds, and another session's TLS handshake waited behind
// all of it at every step: 118 ms for a handshake of 4.5 ms alone.
//
// Body bytes are taken from the session's share before they are filtered
// and forwarded. Within a quantum since its last turn a session goes on at
// once; past it, its work parks here and is let go one quantum a round: a
// release posted behind what the loop has ready, which includes every other
// session's, so each round runs at most a quantum of the session's bulk work
// (its parked streams in the order they came) and whatever the other
// sessions had ready. Work-conserving: a session alone yields once a
// quantum, for one poll of the loop.
//
// One per io_context (an asio service), used on its loop thread only.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/execution_context.hpp>
#include <asio/steady_timer.hpp>

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>

namespace zn::proxy {

class LoopShare : public asio::execution_context::service {
 public:
  using key_type = LoopShare;
  static asio::execution_context::id id;

  // Measured (bench fairness, streams, 2 cores): B's p99 net of the control
  // 3.5x with no share, 1.2x at 32 KiB, 1.6x at 16 KiB (A's throughput
  // down a third), 2.5-2.9x at 64 KiB.
  static constexpr size_t kDefaultQuantum = 32 * 1024;

  explicit LoopShare(asio::execution_context& context) : asio::execution_context::service(context) {}

  // The share of the loop the calling coroutine runs on.
  static LoopShare& of_current_loop(const asio::any_io_executor& executor);

  // Returns once `session` may move `bytes` more on this loop. `session`
  // outlives the call (awaited at once).
  asio::awaitable<void> take(const std::string& session, size_t bytes);

  void set_quantum(size_t bytes) { quantum_ = bytes; }
  // Parked work of a session (tests).
  size_t parked(const std::string& session) const;
  // Sessions known here (tests: entries of idle sessions go).
  size_t sessions() const { return turns_.size(); }

 private:
  struct Parked {
    asio::steady_timer* wake;
    size_t bytes;
    bool* granted;
  };
  struct Turns {
    size_t used = 0;  // bytes since the session's last release
    std::list<Parked> parked;
    bool release_posted = false;
  };
  void shutdown() override {}
  void release(const std::string& session, const asio::any_io_executor& executor);
  // Sessions with nothing parked are forgotten past forget_above_ known
  // (their next bytes start a fresh quantum).
  void forget_idle();
  static constexpr size_t kForgetAbove = 1024;

  size_t quantum_ = kDefaultQuantum;
  size_t forget_above_ = kForgetAbove;
  std::unordered_map<std::string, Turns> turns_;
};

}  // namespace zn::proxy
