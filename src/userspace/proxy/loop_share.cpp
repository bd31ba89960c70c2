#include "userspace/proxy/loop_share.h"

#include <algorithm>

#include <asio/execution/context.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/query.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

namespace zn::proxy {

asio::execution_context::id LoopShare::id;

LoopShare& LoopShare::of_current_loop(const asio::any_io_executor& executor) {
  return asio::use_service<LoopShare>(asio::query(executor, asio::execution::context));
}

asio::awaitable<void> LoopShare::take(const std::string& session, size_t bytes) {
  {
    if (turns_.size() > forget_above_) forget_idle();
    Turns& t = turns_[session];
    if (t.parked.empty() && t.used < quantum_) {
      t.used += bytes;
      co_return;
    }
  }
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer wake(executor, asio::steady_timer::time_point::max());
  bool granted = false;
  Turns& t = turns_[session];
  auto entry = t.parked.insert(t.parked.end(), Parked{&wake, bytes, &granted});
  if (!t.release_posted) {
    t.release_posted = true;
    asio::post(executor, [this, session, executor] { release(session, executor); });
  }
  // Not let go (the exchange ended while parked): out of the queue with
  // its frame, whatever ends it.
  struct Unpark {
    LoopShare& share;
    const std::string& session;
    std::list<Parked>::iterator entry;
    const bool& granted;
    ~Unpark() {
      if (granted) return;
      auto it = share.turns_.find(session);
      if (it != share.turns_.end()) it->second.parked.erase(entry);
    }
  } unpark{*this, session, entry, granted};
  // Only a grant ends the wait: a cancelled wait waits on (the grant
  // comes within the rounds of the work parked before it).
  while (!granted) co_await wake.async_wait(asio::experimental::as_tuple(asio::use_awaitable));
}

void LoopShare::release(const std::string& session, const asio::any_io_executor& executor) {
  auto it = turns_.find(session);
  if (it == turns_.end()) return;
  Turns& t = it->second;
  t.release_posted = false;
  t.used = 0;
  // A quantum's worth, in the order they parked (at least one, however big).
  while (!t.parked.empty() && t.used < quantum_) {
    Parked p = t.parked.front();
    t.parked.pop_front();
    *p.granted = true;
    t.used += p.bytes;
    p.wake->cancel();
  }
  if (!t.parked.empty()) {
    t.release_posted = true;
    asio::post(executor, [this, session, executor] { release(session, executor); });
  }
}

void LoopShare::forget_idle() {
  for (auto it = turns_.begin(); it != turns_.end();) {
    if (it->second.parked.empty() && !it->second.release_posted)
      it = turns_.erase(it);
    else
      ++it;
  }
  // The next sweep once as many again are known: amortised, however many
  // sessions stay busy.
  forget_above_ = std::max(kForgetAbove, 2 * turns_.size());
}

size_t LoopShare::parked(const std::string& session) const {
  auto it = turns_.find(session);
  return it == turns_.end() ? 0 : it->second.parked.size();
}

}  // namespace zn::proxy
