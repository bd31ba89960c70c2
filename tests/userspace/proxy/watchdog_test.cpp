// Watchdog: a guarded operation past its deadline is aborted and reported
// as timed_out, each next to the same operation finishing in time; nested
// guards report the deadline that passed; the thread goes on after a
// timeout; cancel() is not a timeout; a guard outside a watched thread
// refuses to run rather than never time out.
#include "userspace/proxy/watchdog.h"

#include <gtest/gtest.h>

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>

namespace zn::proxy {
namespace {

using asio::awaitable;
using asio::use_awaitable;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Socket = asio::local::stream_protocol::socket;

// What a guarded wait ended with.
enum class End { kValue, kTimedOut, kAborted, kOther, kNotRun };

End classify(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::system_error& s) {
    if (s.code() == std::errc::timed_out) return End::kTimedOut;
    if (s.code() == asio::error::operation_aborted || s.code() == std::errc::operation_canceled)
      return End::kAborted;
  } catch (...) {
  }
  return End::kOther;
}

// How `op` ended; with `value`, what it returned.
template <typename T>
awaitable<End> ending(awaitable<T> op, T* value = nullptr) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(op);
    } else {
      T v = co_await std::move(op);
      if (value) *value = v;
    }
    co_return End::kValue;
  } catch (...) {
    co_return classify(std::current_exception());
  }
}

class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override { asio::local::connect_pair(a_, b_); }

  // One byte read from b_, awaited under the watchdog.
  awaitable<char> read_byte() {
    char c = 0;
    co_await asio::async_read(b_, asio::buffer(&c, 1), use_awaitable);
    co_return c;
  }

  void send_after(std::chrono::milliseconds delay) {
    auto t = std::make_shared<asio::steady_timer>(io_, delay);
    t->async_wait([this, t](const asio::error_code&) { asio::write(a_, asio::buffer("y", 1)); });
  }

  // Runs `body` in a thread bound to a watchdog, to its end (bounded).
  void run(const std::function<awaitable<void>(const Watchdog&)>& body) {
    Watchdog dog(io_.get_executor());
    dog.spawn(io_.get_executor(), body(dog));
    io_.run_for(10s);
  }

  asio::io_context io_;
  Socket a_{io_};
  Socket b_{io_};
};

TEST_F(WatchdogTest, AReadPastItsDeadlineIsTimedOutAndOneInTimeIsNot) {
  End late = End::kNotRun;
  End in_time = End::kNotRun;
  char got = 0;
  Clock::duration waited{};
  run([&](const Watchdog& dog) -> awaitable<void> {
    const auto start = Clock::now();
    late = co_await ending(dog.guard(read_byte(), 50ms));
    waited = Clock::now() - start;
    // Positive control: the same read, with a byte on its way.
    send_after(10ms);
    in_time = co_await ending(dog.guard(read_byte(), 2s), &got);
  });
  EXPECT_EQ(late, End::kTimedOut);
  EXPECT_GE(waited, 50ms);
  EXPECT_LT(waited, 2s);
  EXPECT_EQ(in_time, End::kValue);
  EXPECT_EQ(got, 'y');
}

TEST_F(WatchdogTest, ALongDeadlineArmedFirstDoesNotHoldBackAShorterOneAfterIt) {
  // The timer is lazy: a guard of an hour arms it for an hour; a later
  // guard of 50 ms must re-arm it earlier.
  End first = End::kNotRun;
  End second = End::kNotRun;
  run([&](const Watchdog& dog) -> awaitable<void> {
    send_after(5ms);
    first = co_await ending(dog.guard(read_byte(), 1h));
    second = co_await ending(dog.guard(read_byte(), 50ms));
  });
  EXPECT_EQ(first, End::kValue);
  EXPECT_EQ(second, End::kTimedOut);
}

TEST_F(WatchdogTest, AnInnerGuardCannotOutliveTheOuterOne) {
  End inner = End::kNotRun;
  End outer = End::kNotRun;
  Clock::duration waited{};
  run([&](const Watchdog& dog) -> awaitable<void> {
    const auto start = Clock::now();
    auto nested = [&]() -> awaitable<void> {
      try {
        co_await dog.guard(read_byte(), 1h);
        inner = End::kValue;
      } catch (...) {
        inner = classify(std::current_exception());
        throw;
      }
    };
    outer = co_await ending(dog.guard(nested(), 50ms));
    waited = Clock::now() - start;
  });
  // The outer deadline passed: the inner guard's operation was aborted, and
  // the outer guard (whose deadline it was) says timed out.
  EXPECT_EQ(inner, End::kAborted);
  EXPECT_EQ(outer, End::kTimedOut);
  EXPECT_LT(waited, 2s);
}

TEST_F(WatchdogTest, AnInnerTimeoutCaughtLetsTheThreadGoOn) {
  End inner = End::kNotRun;
  End after = End::kNotRun;
  char got = 0;
  run([&](const Watchdog& dog) -> awaitable<void> {
    auto patient = [&]() -> awaitable<char> {
      inner = co_await ending(dog.guard(read_byte(), 30ms));  // a short patience, then go on
      send_after(10ms);
      // Not thrown at once: the timeout's cancellation was cleared.
      co_return co_await read_byte();
    };
    after = co_await ending(dog.guard(patient(), 5s), &got);
  });
  EXPECT_EQ(inner, End::kTimedOut);
  EXPECT_EQ(after, End::kValue);
  EXPECT_EQ(got, 'y');
}

TEST_F(WatchdogTest, AfterAnInnerTimeoutTheOuterDeadlineStillHolds) {
  End inner = End::kNotRun;
  End outer = End::kNotRun;
  Clock::duration waited{};
  run([&](const Watchdog& dog) -> awaitable<void> {
    const auto start = Clock::now();
    auto patient = [&]() -> awaitable<void> {
      inner = co_await ending(dog.guard(read_byte(), 30ms));
      co_await read_byte();  // nothing comes: only the outer deadline ends it
    };
    outer = co_await ending(dog.guard(patient(), 150ms));
    waited = Clock::now() - start;
  });
  EXPECT_EQ(inner, End::kTimedOut);
  EXPECT_EQ(outer, End::kTimedOut);
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 2s);
}

TEST_F(WatchdogTest, CancelAbortsAndIsNotATimeout) {
  End end = End::kNotRun;
  Watchdog dog(io_.get_executor());
  // Named: a coroutine lambda's captures live in the lambda, not its frame.
  auto body = [&]() -> awaitable<void> { end = co_await ending(dog.guard(read_byte(), 1h)); };
  dog.spawn(io_.get_executor(), body());
  asio::steady_timer t(io_, 20ms);
  t.async_wait([&](const asio::error_code&) { dog.cancel(); });
  io_.run_for(10s);
  EXPECT_EQ(end, End::kAborted);
}

TEST_F(WatchdogTest, ACancelIsNotUndoneByADeadlinePassingAfterIt) {
  // The guarded operation ignores cancellation (it ends when told): the
  // cancel comes, then the deadline passes, then the operation ends. The
  // thread stays cancelled; the deadline is not reported over it.
  std::shared_ptr<std::function<void()>> finish;
  auto until_told = [&]() {
    return asio::async_initiate<decltype(use_awaitable), void()>(
        [&](auto handler) {
          auto h = std::make_shared<decltype(handler)>(std::move(handler));
          finish = std::make_shared<std::function<void()>>([h] { std::move (*h)(); });
        },
        use_awaitable);
  };
  End first = End::kNotRun;
  End after = End::kNotRun;
  Watchdog dog(io_.get_executor());
  auto body = [&]() -> awaitable<void> {
    first = co_await ending(dog.guard(until_told(), 20ms));
    // Inline, not through ending(): in a cancelled thread the co_await of
    // any awaitable throws, ending()'s own included.
    try {
      send_after(1ms);
      co_await read_byte();
      after = End::kValue;
    } catch (...) {
      after = classify(std::current_exception());
    }
  };
  dog.spawn(io_.get_executor(), body());
  io_.run_for(5ms);
  dog.cancel();
  io_.run_for(40ms);  // the deadline passes meanwhile
  ASSERT_TRUE(finish);
  asio::post(io_, [&] { (*finish)(); });
  io_.run_for(10s);
  EXPECT_NE(first, End::kTimedOut);
  EXPECT_EQ(after, End::kAborted);
}

TEST_F(WatchdogTest, AGuardInAThreadNotStartedByTheWatchdogRefusesToRun) {
  Watchdog dog(io_.get_executor());
  End end = End::kNotRun;
  std::string what;
  asio::co_spawn(
      io_,
      [&]() -> awaitable<void> {
        try {
          co_await dog.guard(read_byte(), 50ms);
          end = End::kValue;
        } catch (const std::logic_error& e) {
          what = e.what();
        }
      },
      asio::detached);
  io_.run_for(10s);
  EXPECT_EQ(end, End::kNotRun);
  EXPECT_NE(what.find("Watchdog::spawn"), std::string::npos);
}

TEST_F(WatchdogTest, ThreadsEndingWithWaitsInFlightLeaveNothingBehind) {
  // Many watched threads that end long before their deadlines: their
  // timers' waits are cancelled with them (run under ASan and TSan).
  int done = 0;
  auto body = [&done](Watchdog dog) -> awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor, 1ms);
    co_await dog.guard(t.async_wait(use_awaitable), 1h);
    ++done;
  };
  for (int i = 0; i < 200; ++i) {
    Watchdog dog(io_.get_executor());
    dog.spawn(io_.get_executor(), body(dog));
  }
  const auto start = Clock::now();
  io_.run_for(10s);
  EXPECT_EQ(done, 200);
  // run_for returned early: no hour-long wait was left keeping the loop busy.
  EXPECT_LT(Clock::now() - start, 5s);
}

}  // namespace
}  // namespace zn::proxy
