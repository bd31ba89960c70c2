// What a deadline costs per operation on the proxy's loop: one byte sent
// and read back over a socket pair (two awaited operations per iteration),
// bare (the baseline), with each operation raced against a timer
// (`with_deadline`: two co_spawns and a parallel group), and under a
// Watchdog (one lazily re-armed timer per coroutine thread).
#include <benchmark/benchmark.h>

#include <asio.hpp>
#include <chrono>

#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/watchdog.h"

namespace {

using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;
using Socket = asio::local::stream_protocol::socket;

enum class Mode { kBare, kRace, kWatchdog };

awaitable<void> ping_pong(Socket& a, Socket& b, Mode mode, const zn::proxy::Watchdog& dog, int64_t rounds) {
  char byte = 'x';
  char in = 0;
  for (int64_t i = 0; i < rounds; ++i) {
    auto send = asio::async_write(a, asio::buffer(&byte, 1), use_awaitable);
    auto recv = asio::async_read(b, asio::buffer(&in, 1), use_awaitable);
    switch (mode) {
      case Mode::kBare: {
        co_await std::move(send);
        co_await std::move(recv);
        break;
      }
      case Mode::kRace: {
        co_await zn::proxy::with_deadline(std::move(send), 60s);
        co_await zn::proxy::with_deadline(std::move(recv), 60s);
        break;
      }
      case Mode::kWatchdog: {
        co_await dog.guard(std::move(send), 60s);
        co_await dog.guard(std::move(recv), 60s);
        break;
      }
    }
  }
}

void run(benchmark::State& state, Mode mode) {
  constexpr int64_t kRounds = 1000;
  asio::io_context io;
  Socket a(io);
  Socket b(io);
  asio::local::connect_pair(a, b);
  for (auto _ : state) {
    zn::proxy::Watchdog dog(io.get_executor());
    dog.spawn(io.get_executor(), ping_pong(a, b, mode, dog, kRounds));
    io.run();
    io.restart();
  }
  state.SetItemsProcessed(state.iterations() * kRounds * 2);
}

void baseline_bare_operations(benchmark::State& state) { run(state, Mode::kBare); }
BENCHMARK(baseline_bare_operations);

void deadline_raced_with_timer(benchmark::State& state) { run(state, Mode::kRace); }
BENCHMARK(deadline_raced_with_timer);

void deadline_watchdog(benchmark::State& state) { run(state, Mode::kWatchdog); }
BENCHMARK(deadline_watchdog);

}  // namespace

BENCHMARK_MAIN();
