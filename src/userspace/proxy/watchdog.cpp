#include "userspace/proxy/watchdog.h"

#include <stdexcept>

namespace zn::proxy {

// Shared with the timer's handler: a wait whose completion is already
// queued when the watchdog goes must not touch freed memory.
struct Watchdog::State {
  explicit State(const asio::any_io_executor& executor) : timer(executor) {}

  asio::steady_timer timer;
  asio::cancellation_signal signal;
  Clock::time_point deadline = Clock::time_point::max();  // the innermost guard's; max: none
  Clock::time_point expiry = Clock::time_point::max();    // of the wait in flight
  uint64_t generation = 0;  // of the wait in flight; an older one's completion is stale
  bool waiting = false;
  bool fired = false;
  bool cancelled = false;                                 // cancel(): for good, never turned into a timeout
  Clock::time_point fired_at = Clock::time_point::max();  // the deadline that fired

  static void arm(const std::shared_ptr<State>& self) {
    State& s = *self;
    if (s.deadline == Clock::time_point::max()) return;
    if (s.waiting && s.expiry <= s.deadline) return;  // it wakes in time and looks again
    s.expiry = s.deadline;
    s.waiting = true;
    const uint64_t generation = ++s.generation;
    s.timer.expires_at(s.deadline);  // cancels a later wait: its completion is stale
    s.timer.async_wait([self, generation](const asio::error_code& ec) { self->woke(self, generation, ec); });
  }

  void woke(const std::shared_ptr<State>& self, uint64_t gen, const asio::error_code& ec) {
    if (gen != generation) return;
    waiting = false;
    if (ec || deadline == Clock::time_point::max() || fired) return;
    if (Clock::now() < deadline) {
      arm(self);  // the deadline moved on since the wait began
      return;
    }
    fired = true;
    fired_at = deadline;
    signal.emit(asio::cancellation_type::terminal);
  }
};

Watchdog::Watchdog(const asio::any_io_executor& executor) : state_(std::make_shared<State>(executor)) {}

void Watchdog::spawn(const asio::any_io_executor& executor, asio::awaitable<void> op) const {
  spawn(executor, std::move(op), [](const std::exception_ptr&) {});
}

void Watchdog::finished() const { state_->timer.cancel(); }

asio::cancellation_slot Watchdog::slot() const { return state_->signal.slot(); }

void Watchdog::cancel() const {
  state_->cancelled = true;
  state_->signal.emit(asio::cancellation_type::terminal);
}

Watchdog::Clock::time_point Watchdog::deadline() const { return state_->deadline; }

Watchdog::Clock::time_point Watchdog::enter(Clock::duration timeout) const {
  State& s = *state_;
  if (!s.signal.slot().has_handler())
    throw std::logic_error("Watchdog::guard outside a thread started by Watchdog::spawn");
  const Clock::time_point own = Clock::now() + timeout;
  if (own < s.deadline) {
    s.deadline = own;
    State::arm(state_);
  }
  return own;
}

bool Watchdog::leave(Clock::time_point saved, Clock::time_point own) const {
  State& s = *state_;
  s.deadline = saved;
  // After a firing the timer waits for nothing: the enclosing deadline
  // still holds.
  if (!s.waiting) State::arm(state_);
  // Not fired, or an enclosing guard's deadline; or cancelled from outside
  // as well, which stays (the thread's state is not reset).
  if (!s.fired || s.fired_at < own || s.cancelled) return false;
  s.fired = false;
  s.fired_at = Clock::time_point::max();
  return true;
}

}  // namespace zn::proxy
