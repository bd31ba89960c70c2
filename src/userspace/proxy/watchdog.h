// Deadlines for the operations of one coroutine thread, without a timer
// race per operation. `with_deadline` (byte_stream.h) races each operation
// against a timer with `||`: two co_spawns, a parallel group and a timer
// armed and cancelled per call, four or five calls per proxied request;
// the proxy's profile showed that machinery and its allocations at 15-18 %
// of a loop. A Watchdog instead owns one timer and one cancellation signal
// bound once, when the thread is spawned (`spawn`). `guard` only writes a
// deadline; the timer is re-armed lazily (when it wakes before the current
// deadline, or when a guard asks for an earlier one), and when a deadline
// passes it emits a terminal cancellation into the thread, which aborts
// whatever the thread is waiting on. The guard whose deadline passed turns
// that into std::system_error(timed_out), as with_deadline does.
//
// Rules: one Watchdog per coroutine thread, bound with `spawn` (a guard in
// an unbound thread throws std::logic_error rather than never timing out);
// guards nest (an inner guard never extends an outer one); `cancel` is a
// cancellation from outside (an HTTP/2 stream reset), not a timeout.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <system_error>
#include <type_traits>
#include <utility>

namespace zn::proxy {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Watchdog(const asio::any_io_executor& executor);

  // Runs `op` as a new coroutine thread on `executor` with this watchdog's
  // signal bound to it; the watchdog lives until the thread ends, then
  // `done` hears how it ended (the first form: exceptions end it, as
  // asio::detached).
  void spawn(const asio::any_io_executor& executor, asio::awaitable<void> op) const;
  template <typename Done>
  void spawn(const asio::any_io_executor& executor, asio::awaitable<void> op, Done done) const;

  // `op` bounded by `timeout` from now (and by every enclosing guard).
  template <typename T>
  asio::awaitable<T> guard(asio::awaitable<T> op, Clock::duration timeout) const;

  // Aborts what the thread waits on now, and every wait after it (a
  // cancellation from outside; never reported as a timeout).
  void cancel() const;

 private:
  struct State;
  // The guard's bookkeeping, outside the template.
  Clock::time_point enter(Clock::duration timeout) const;  // returns the guard's own deadline
  // Leaves a guard whose enclosing deadline was `saved`; true when this
  // guard's deadline `own` is the one that fired (the caller resets the
  // thread's cancellation state and throws timed_out).
  bool leave(Clock::time_point saved, Clock::time_point own) const;
  Clock::time_point deadline() const;
  void finished() const;  // the thread is over: its timer's wait goes
  asio::cancellation_slot slot() const;

  std::shared_ptr<State> state_;
};

template <typename Done>
void Watchdog::spawn(const asio::any_io_executor& executor, asio::awaitable<void> op, Done done) const {
  asio::co_spawn(executor, std::move(op),
                 asio::bind_cancellation_slot(
                     slot(), [self = *this, done = std::move(done)](std::exception_ptr e) mutable {
                       self.finished();
                       done(std::move(e));
                     }));
}

template <typename T>
asio::awaitable<T> Watchdog::guard(asio::awaitable<T> op, Clock::duration timeout) const {
  const Clock::time_point saved = deadline();
  const Clock::time_point own = enter(timeout);
  std::exception_ptr failure;
  std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(op);
      value.emplace(true);
    } else {
      value.emplace(co_await std::move(op));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (leave(saved, own)) {
    // Our deadline passed (even if `op` finished in the same instant): the
    // thread's cancellation is ours to clear, and the caller hears timed_out.
    co_await asio::this_coro::reset_cancellation_state();
    throw std::system_error(std::make_error_code(std::errc::timed_out));
  }
  if (failure) std::rethrow_exception(failure);
  if constexpr (!std::is_void_v<T>) co_return std::move(*value);
}

}  // namespace zn::proxy
