// SessionSockets: each session's places up to its cap, given back when a
// slot goes (moved, released, or outliving the counter), nothing kept for a
// session that holds none.
#include "userspace/proxy/session_sockets.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace zn::proxy {
namespace {

TEST(SessionSockets, EachSessionUpToItsCap) {
  SessionSockets sockets(3);
  std::vector<SessionSockets::Slot> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(sockets.take("a"));
    EXPECT_TRUE(held.back().held());
  }
  EXPECT_FALSE(sockets.take("a").held());
  EXPECT_EQ(sockets.held("a"), 3u);
  // Another session's places are its own.
  SessionSockets::Slot b = sockets.take("b");
  EXPECT_TRUE(b.held());
  // A slot released, or moved and then destroyed, gives its place back once.
  held[0].release();
  held[0].release();
  EXPECT_EQ(sockets.held("a"), 2u);
  SessionSockets::Slot moved = std::move(held[1]);
  EXPECT_FALSE(held[1].held());
  EXPECT_EQ(sockets.held("a"), 2u);
  moved = SessionSockets::Slot{};
  EXPECT_EQ(sockets.held("a"), 1u);
  EXPECT_TRUE(sockets.take("a").held());  // taken and given back at once
  held.clear();
  b.release();
  EXPECT_EQ(sockets.sessions(), 0u);
}

TEST(SessionSockets, ASlotMayOutliveTheCounter) {
  auto sockets = std::make_unique<SessionSockets>(1);
  SessionSockets::Slot slot = sockets->take("a");
  ASSERT_TRUE(slot.held());
  sockets.reset();
  slot.release();  // no use after free (ASan)
  EXPECT_FALSE(slot.held());
}

}  // namespace
}  // namespace zn::proxy
