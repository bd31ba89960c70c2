// Broker calls off the proxy's loops, on workers shared fairly between
// sessions (issue 32): `co_await offload(pool, tenant, f)` runs f on one of
// the FairPool's threads in `tenant`'s turn and resumes the coroutine on its
// own executor with f's result, or nullopt when the pool refused the call
// (full, and this tenant the one with the most waiting; or stopping). An
// exception f throws is rethrown in the coroutine. A must_run call (an audit
// record of a connection that is over) is never refused.
//
// Why not asio's thread_pool: its queue is one FIFO for everyone, so a guest
// whose every connection waits seconds on a name resolution held all four
// workers and every other guest's decision waited behind it.
#pragma once

#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "common/fair_pool.h"

namespace zn::proxy {

template <typename F>
asio::awaitable<std::optional<std::invoke_result_t<F&>>> offload(FairPool& pool, const std::string& tenant,
                                                                 F f, bool must_run = false) {
  using R = std::invoke_result_t<F&>;
  static_assert(!std::is_void_v<R>, "offload a call that returns its result (a bool will do)");
  auto initiate = [&pool, &tenant, must_run](auto handler, F fn) {
    using Handler = decltype(handler);
    struct State {
      Handler handler;
      F fn;
    };
    auto state = std::make_shared<State>(State{std::move(handler), std::move(fn)});
    // Exactly one of run and refused is called, on a worker or the poster.
    auto finish = [state](std::exception_ptr error, std::optional<R> result) {
      auto executor = asio::get_associated_executor(state->handler);
      asio::post(executor, [state, error, result = std::move(result)]() mutable {
        std::move(state->handler)(error, std::move(result));
      });
    };
    FairPool::Job job;
    job.run = [state, finish] {
      std::optional<R> result;
      std::exception_ptr error;
      try {
        result.emplace(state->fn());
      } catch (...) {
        error = std::current_exception();
      }
      finish(error, std::move(result));
    };
    job.refused = [finish] { finish(nullptr, std::nullopt); };
    pool.post(tenant, "", std::move(job), must_run);
  };
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                          void(std::exception_ptr, std::optional<R>)>(
      initiate, asio::use_awaitable, std::move(f));
}

}  // namespace zn::proxy
