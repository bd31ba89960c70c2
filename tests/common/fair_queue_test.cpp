// FairQueue: turns across tenants, the three caps, the longest queue giving
// way when the queue is full, must_run jobs, and no state kept for a tenant
// with nothing waiting or running.
#include "common/fair_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zn {
namespace {

using Queue = FairQueue<std::string>;

// Takes and ends jobs one at a time: the order they would run in.
std::vector<std::string> run_in_turn(Queue& q) {
  std::vector<std::string> order;
  while (auto t = q.take()) {
    order.push_back(t->job);
    q.done(t->tenant, t->lane);
  }
  return order;
}

TEST(FairQueue, OneTenantRunsInOrderAndTenantsTakeTurns) {
  Queue alone({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64});
  for (const char* j : {"a1", "a2", "a3"}) alone.push("a", "", j);
  EXPECT_EQ(run_in_turn(alone), (std::vector<std::string>{"a1", "a2", "a3"}));

  // A queued a backlog before B came: B still runs on the next turn.
  Queue q({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64});
  for (const char* j : {"a1", "a2", "a3", "a4"}) q.push("a", "", j);
  for (const char* j : {"b1", "b2"}) q.push("b", "", j);
  EXPECT_EQ(run_in_turn(q), (std::vector<std::string>{"a1", "b1", "a2", "b2", "a3", "a4"}));
  EXPECT_EQ(q.tenants(), 0u);
}

TEST(FairQueue, ATenantAtItsShareLeavesTheOtherWorkers) {
  Queue q({.slots = 4, .per_tenant = 2, .per_lane = 0, .queued = 64});
  for (int i = 0; i < 10; ++i) q.push("a", "", "a" + std::to_string(i));
  ASSERT_TRUE(q.take());
  ASSERT_TRUE(q.take());
  // Two workers are free, but A has its share running.
  EXPECT_FALSE(q.take());
  EXPECT_EQ(q.running_of("a"), 2u);
  q.push("b", "", "b0");
  auto b = q.take();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->job, "b0");
  // Control: with a share as large as the workers, A takes them all.
  Queue greedy({.slots = 4, .per_tenant = 4, .per_lane = 0, .queued = 64});
  for (int i = 0; i < 10; ++i) greedy.push("a", "", "a" + std::to_string(i));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(greedy.take());
  greedy.push("b", "", "b0");
  EXPECT_FALSE(greedy.take());
}

TEST(FairQueue, ALaneAtItsCapLetsOtherLanesOfTheSameTenantRun) {
  Queue q({.slots = 4, .per_tenant = 4, .per_lane = 1, .queued = 64});
  q.push("a", "sql/slow", "slow1");
  q.push("b", "sql/slow", "slow2");
  q.push("a", "kv/fast", "fast");
  auto first = q.take();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->job, "slow1");
  // B's only job is in the busy lane; A's next job, behind it in no lane
  // order, is in another lane and runs.
  auto second = q.take();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->job, "fast");
  EXPECT_FALSE(q.take());
  q.done(first->tenant, first->lane);
  auto third = q.take();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->job, "slow2");
}

TEST(FairQueue, WhenFullTheLongestQueueGivesWay) {
  Queue q({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 4});
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.push("a", "", "a" + std::to_string(i)).accepted);
  // A is the longest: its own fifth job is refused.
  Queue::Pushed own = q.push("a", "", "a4");
  EXPECT_FALSE(own.accepted);
  ASSERT_TRUE(own.refused);
  EXPECT_EQ(*own.refused, "a4");
  // B's is accepted, and A's newest gives way.
  Queue::Pushed b = q.push("b", "", "b0");
  EXPECT_TRUE(b.accepted);
  ASSERT_TRUE(b.refused);
  EXPECT_EQ(*b.refused, "a3");
  EXPECT_TRUE(q.push("b", "", "b1").accepted);  // A: 2, B: 2 after this one
  // Equal queues: the pusher is refused, nobody else.
  Queue::Pushed even = q.push("b", "", "b2");
  EXPECT_FALSE(even.accepted);
  EXPECT_EQ(*even.refused, "b2");
  EXPECT_EQ(q.waiting_of("a"), 2u);
  EXPECT_EQ(q.waiting_of("b"), 2u);
  // Control: below the bound nothing is refused.
  Queue roomy({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64});
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(roomy.push("a", "", "x").refused);
}

TEST(FairQueue, MustRunJobsAreNeverRefusedNorCounted) {
  Queue q({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 2});
  EXPECT_TRUE(q.push("a", "", "a0").accepted);
  EXPECT_TRUE(q.push("a", "", "a1").accepted);
  EXPECT_TRUE(q.push("a", "", "record", true).accepted);
  EXPECT_TRUE(q.push("a", "", "record2", true).accepted);
  // The queue is full of A's: B's job makes A's newest refusable job give
  // way, never a record.
  Queue::Pushed b = q.push("b", "", "b0");
  EXPECT_TRUE(b.accepted);
  ASSERT_TRUE(b.refused);
  EXPECT_EQ(*b.refused, "a1");
  std::deque<std::string> drained = q.drain_refusable();
  EXPECT_EQ(drained, (std::deque<std::string>{"a0", "b0"}));
  EXPECT_EQ(run_in_turn(q), (std::vector<std::string>{"record", "record2"}));
  EXPECT_EQ(q.tenants(), 0u);
}

TEST(FairQueue, NothingIsKeptForATenantWithNoJobs) {
  Queue q({.slots = 2, .per_tenant = 1, .per_lane = 1, .queued = 2});
  for (int i = 0; i < 1000; ++i) {
    q.push("t" + std::to_string(i), "lane" + std::to_string(i % 3), "j");
    run_in_turn(q);
  }
  EXPECT_EQ(q.tenants(), 0u);
  EXPECT_EQ(q.running(), 0u);
  EXPECT_EQ(q.waiting(), 0u);
  // A tenant whose first job is refused leaves nothing behind either.
  q.push("x", "", "x0");
  q.push("y", "", "y0");
  Queue::Pushed z = q.push("z", "", "z0");
  EXPECT_FALSE(z.accepted);
  EXPECT_EQ(q.tenants(), 2u);
  run_in_turn(q);
  EXPECT_EQ(q.tenants(), 0u);
}

}  // namespace
}  // namespace zn
