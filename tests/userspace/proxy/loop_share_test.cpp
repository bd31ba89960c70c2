// Each session's turn at a loop's bulk work (loop_share.h), on a real
// io_context: workers that take a chunk and then wait for "I/O" (a post to
// the back of the loop's queue) the way an exchange does. One session's many
// workers get at most a quantum between another session's chunks; a session
// within its quantum never waits; work parked when the loop goes is let go
// cleanly; sessions with nothing parked are forgotten.
#include "userspace/proxy/loop_share.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace zn::proxy {
namespace {

constexpr size_t kChunk = 16 * 1024;

struct Log {
  std::vector<std::string> order;  // the session of each chunk moved, in order
};

asio::awaitable<void> worker(LoopShare& share, std::string session, int chunks, size_t bytes, Log& log) {
  for (int i = 0; i < chunks; ++i) {
    co_await share.take(session, bytes);
    log.order.push_back(session);
    // The chunk's write and the next read: back of the loop's queue.
    co_await asio::post(asio::use_awaitable);
  }
}

// The longest run of `session`'s chunks between two of another session's,
// while both were moving (from the other's first chunk to its last).
size_t longest_run_between(const std::vector<std::string>& order, const std::string& session) {
  const auto first = std::find_if(order.begin(), order.end(), [&](const auto& s) { return s != session; });
  const auto last = std::find_if(order.rbegin(), order.rend(), [&](const auto& s) { return s != session; });
  size_t longest = 0, run = 0;
  for (auto it = first; it != last.base(); ++it) {
    run = *it == session ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

// A: 8 streams moving 16 KiB chunks; B: one stream moving small ones.
Log race(size_t quantum) {
  asio::io_context io(1);
  LoopShare& share = asio::use_service<LoopShare>(io);
  share.set_quantum(quantum);
  Log log;
  for (int i = 0; i < 8; ++i) asio::co_spawn(io, worker(share, "a", 20, kChunk, log), asio::detached);
  asio::co_spawn(io, worker(share, "b", 20, 300, log), asio::detached);
  io.run();
  return log;
}

TEST(LoopShareTest, ManyStreamsOfOneSessionGetAQuantumBetweenAnothersChunks) {
  const Log log = race(2 * kChunk);
  EXPECT_EQ(std::count(log.order.begin(), log.order.end(), "a"), 8 * 20);  // everything moved
  EXPECT_EQ(std::count(log.order.begin(), log.order.end(), "b"), 20);
  EXPECT_LE(longest_run_between(log.order, "a"), 2u);
  // The control: with no share to speak of, A's 8 streams each move a chunk
  // between two of B's.
  const Log ungoverned = race(size_t{1} << 40);
  EXPECT_GE(longest_run_between(ungoverned.order, "a"), 8u);
}

TEST(LoopShareTest, WithinItsQuantumASessionNeverWaits) {
  asio::io_context io(1);
  LoopShare& share = asio::use_service<LoopShare>(io);
  share.set_quantum(kChunk);
  int done = 0;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const std::string a = "a";  // named: g++ 12 and temporaries in a co_await expression
        for (int i = 0; i < 16; ++i) co_await share.take(a, 1024);  // 16 KiB in all
        done = 1;
        co_await share.take(a, 1024);  // past it now: parks until the release
        done = 2;
      },
      asio::detached);
  io.run_one();  // the coroutine's first run: everything up to the park
  EXPECT_EQ(done, 1);
  EXPECT_EQ(share.parked("a"), 1u);
  io.run();
  EXPECT_EQ(done, 2);
  EXPECT_EQ(share.parked("a"), 0u);
}

TEST(LoopShareTest, WorkParkedWhenTheLoopGoesLeavesNothingBehind) {
  auto io = std::make_unique<asio::io_context>(1);
  LoopShare& share = asio::use_service<LoopShare>(*io);
  share.set_quantum(kChunk);
  Log log;
  for (int i = 0; i < 4; ++i) asio::co_spawn(*io, worker(share, "a", 100, kChunk, log), asio::detached);
  for (int i = 0; i < 6; ++i) io->run_one();
  EXPECT_GT(share.parked("a"), 0u);
  io.reset();  // the frames go with their loop, parked ones out of the queue (ASan: no use after free)
  EXPECT_LT(log.order.size(), 400u);
}

TEST(LoopShareTest, SessionsWithNothingParkedAreForgotten) {
  asio::io_context io(1);
  LoopShare& share = asio::use_service<LoopShare>(io);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < 5000; ++i) {
          const std::string session = "s" + std::to_string(i);
          co_await share.take(session, 100);
        }
      },
      asio::detached);
  io.run();
  EXPECT_LE(share.sessions(), 2048u);
  EXPECT_GT(share.sessions(), 0u);
}

}  // namespace
}  // namespace zn::proxy
