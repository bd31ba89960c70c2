// The lingering close has one deadline for the whole drain: a peer
// trickling a byte at a time is cut off when it passes, however many reads
// it made; a peer that ends, or sends the byte bound, ends it sooner.
#include "userspace/proxy/lingering_close.h"

#include <gtest/gtest.h>

#include <asio.hpp>

#include <chrono>

namespace zn::proxy {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Peer {
  asio::io_context& io;
  Clock::duration every;  // between its sends
  size_t bytes;           // each send (0: it has ended)
  int reads = 0;
  Clock::duration shortest_left = Clock::duration::max();
};

// Lingers against `peer` on a fresh loop; the reads it made.
int linger_against(Peer& peer, Clock::duration total, size_t max_bytes) {
  auto read_for = [&peer](Clock::duration left) -> asio::awaitable<size_t> {
    ++peer.reads;
    peer.shortest_left = std::min(peer.shortest_left, left);
    asio::steady_timer t(peer.io, peer.every);
    co_await t.async_wait(asio::use_awaitable);
    co_return peer.bytes;
  };
  auto run = [&]() -> asio::awaitable<void> { co_await drain_lingering(read_for, total, max_bytes); };
  asio::co_spawn(peer.io, run(), asio::detached);
  peer.io.run();
  return peer.reads;
}

TEST(LingeringClose, ATricklingPeerIsCutOffAtOneDeadline) {
  asio::io_context io;
  Peer trickle{io, 10ms, 1};
  // A byte every 10 ms for at most 200 ms: some 20 reads, never the 2^20 a
  // per-read deadline would allow.
  const int reads = linger_against(trickle, 200ms, kLingerBytes);
  EXPECT_GE(reads, 1);
  EXPECT_LE(reads, 40);
  // Each read was given only what was left of the one deadline.
  EXPECT_LE(trickle.shortest_left, 200ms);
}

TEST(LingeringClose, APeerThatEndsOrSendsTheBoundEndsItSooner) {
  asio::io_context ended_io;
  Peer ended{ended_io, 0ms, 0};
  EXPECT_EQ(linger_against(ended, 10s, kLingerBytes), 1);
  asio::io_context flood_io;
  Peer flood{flood_io, 0ms, 4096};
  EXPECT_EQ(linger_against(flood, 10s, 16 * 4096), 16);
}

}  // namespace
}  // namespace zn::proxy
