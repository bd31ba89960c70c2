// The room an HTTP/2 guest connection's streams have for response bytes
// their guest has not taken (unsent_budget.h), as numbers: a stream alone
// up to its own bound, many streams sharing the connection's, a stream
// holding nothing always one read more, and the connection's bound never
// passed whatever the order the streams come in.
#include "userspace/proxy/unsent_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace zn::proxy {
namespace {

constexpr size_t kRead = UnsentBudget::kRead;

// Streams that each read kRead whenever they have room, their guests never
// taking any of it, until none has room: what each holds then.
std::vector<size_t> fill(UnsentBudget& budget, std::vector<size_t> held) {
  for (bool read = true; read;) {
    read = false;
    for (size_t& h : held) {
      size_t total = 0;
      for (size_t x : held) total += x;
      if (!budget.room(h, total)) continue;
      h += kRead;
      read = true;
    }
  }
  return held;
}

size_t sum(const std::vector<size_t>& v) {
  size_t s = 0;
  for (size_t x : v) s += x;
  return s;
}

TEST(UnsentBudgetTest, AStreamAloneHoldsUpToItsOwnBound) {
  UnsentBudget budget;
  budget.join();
  EXPECT_EQ(fill(budget, {0}), std::vector<size_t>{UnsentBudget::Bounds{}.stream});
}

TEST(UnsentBudgetTest, StreamsShareTheConnectionsBound) {
  UnsentBudget budget;
  const UnsentBudget::Bounds bounds;
  for (size_t i = 0; i < bounds.streams; ++i) budget.join();
  const std::vector<size_t> held = fill(budget, std::vector<size_t>(bounds.streams, 0));
  EXPECT_LE(sum(held), bounds.connection);
  for (size_t h : held) EXPECT_EQ(h, held[0]);  // evenly
  EXPECT_GE(held[0], kRead);
  EXPECT_EQ(budget.peak(), sum(held));
}

// The streams come one after another, each filling before the next starts
// (so each saw a larger share than the last): the bound holds all the same.
TEST(UnsentBudgetTest, StreamsComingOneByOneStayWithinTheBound) {
  UnsentBudget budget;
  const UnsentBudget::Bounds bounds;
  std::vector<size_t> held;
  for (size_t i = 0; i < bounds.streams; ++i) {
    budget.join();
    held.push_back(0);
    held = fill(budget, held);
    EXPECT_LE(sum(held), bounds.connection) << i;
    EXPECT_GE(held.back(), kRead) << i;  // every stream got to read
  }
  EXPECT_LE(budget.peak(), bounds.connection);
}

// A stream whose guest took everything reads again however much the others
// hold; one that holds something waits while the connection is full.
TEST(UnsentBudgetTest, AStreamHoldingNothingAlwaysReadsOnce) {
  UnsentBudget budget;
  const UnsentBudget::Bounds bounds;
  for (size_t i = 0; i < bounds.streams; ++i) budget.join();
  EXPECT_TRUE(budget.room(0, bounds.connection));
  EXPECT_FALSE(budget.room(1, bounds.connection));
  EXPECT_TRUE(budget.room(1, 0));
}

// The share follows the streams relaying a response now: one that ends
// leaves its part to the others.
TEST(UnsentBudgetTest, TheShareGrowsAsStreamsLeave) {
  UnsentBudget budget;
  for (int i = 0; i < 8; ++i) budget.join();
  const size_t eight = budget.share();
  for (int i = 0; i < 6; ++i) budget.leave();
  EXPECT_GT(budget.share(), eight);
  EXPECT_LE(budget.share(), UnsentBudget::Bounds{}.stream);
  EXPECT_EQ(budget.relaying(), 2u);
}

}  // namespace
}  // namespace zn::proxy
