// FairPool: a tenant whose jobs block does not delay another tenant's, each
// job is run or refused exactly once, a stop runs the must_run jobs and
// refuses the rest, and a throwing job does not end a worker.
#include "common/fair_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>

namespace zn {
namespace {

using namespace std::chrono_literals;

// Tenant A posts `jobs` jobs that block until released; then B posts one.
// Whether B's job ran while A's were still blocked.
bool b_runs_while_a_blocks(FairLimits limits, int jobs) {
  FairPool pool(limits);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (int i = 0; i < jobs; ++i) pool.post("a", "", {[released] { released.wait(); }, [] {}});
  // A holds every worker its share allows before B comes.
  const size_t a_share = std::min(limits.slots, limits.per_tenant);
  while (pool.counts().running < a_share) std::this_thread::sleep_for(1ms);
  std::promise<void> b_ran;
  std::future<void> b = b_ran.get_future();
  pool.post("b", "", {[&b_ran] { b_ran.set_value(); }, [] {}});
  const bool ran = b.wait_for(2s) == std::future_status::ready;
  release.set_value();
  b.wait();
  pool.stop();
  return ran;
}

TEST(FairPool, ABlockedTenantDoesNotHoldAnotherTenantsJob) {
  EXPECT_TRUE(b_runs_while_a_blocks({.slots = 2, .per_tenant = 1, .per_lane = 0, .queued = 64}, 8));
  // Control: a share as large as the pool lets A's blocked jobs hold it all.
  EXPECT_FALSE(b_runs_while_a_blocks({.slots = 2, .per_tenant = 2, .per_lane = 0, .queued = 64}, 8));
}

TEST(FairPool, EveryJobRunsOrIsRefusedExactlyOnce) {
  std::atomic<int> ran{0}, refused{0};
  {
    FairPool pool({.slots = 2, .per_tenant = 1, .per_lane = 0, .queued = 8});
    for (int i = 0; i < 2000; ++i)
      pool.post("t" + std::to_string(i % 5), "", {[&] { ++ran; }, [&] { ++refused; }});
    // The workers may not have had the CPU yet: let what waits run, then
    // stop with jobs still coming.
    while (pool.counts().waiting > 0) std::this_thread::sleep_for(1ms);
    for (int i = 0; i < 2000; ++i)
      pool.post("t" + std::to_string(i % 5), "", {[&] { ++ran; }, [&] { ++refused; }});
    pool.stop();
    EXPECT_EQ(pool.counts().refused, static_cast<uint64_t>(refused.load()));
    EXPECT_EQ(pool.counts().tenants, 0u);
  }
  EXPECT_EQ(ran + refused, 4000);
  EXPECT_GT(ran.load(), 0);
}

TEST(FairPool, StopRunsMustRunJobsAndRefusesTheRest) {
  FairPool pool({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64});
  std::latch started(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.post("a", "",
            {[&started, released] {
               started.count_down();
               released.wait();
             },
             {}});
  started.wait();
  std::atomic<int> records{0}, ran{0}, refused{0};
  for (int i = 0; i < 3; ++i) pool.post("a", "", {[&] { ++records; }, {}}, true);
  for (int i = 0; i < 3; ++i) pool.post("b", "", {[&] { ++ran; }, [&] { ++refused; }});
  std::thread stopper([&] { pool.stop(); });
  // After stop began, a new job is refused at once; a record still runs.
  while (pool.counts().waiting == 6) std::this_thread::sleep_for(1ms);
  pool.post("c", "", {[&] { ++ran; }, [&] { ++refused; }});
  pool.post("c", "", {[&] { ++records; }, {}}, true);
  release.set_value();
  stopper.join();
  EXPECT_EQ(records, 4);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(refused, 4);
}

TEST(FairPool, AThrowingJobDoesNotEndItsWorker) {
  FairPool pool({.slots = 1, .per_tenant = 1, .per_lane = 0, .queued = 64});
  pool.post("a", "", {[] { throw std::runtime_error("x"); }, {}});
  std::promise<void> after;
  std::future<void> done = after.get_future();
  pool.post("a", "", {[&after] { after.set_value(); }, {}});
  EXPECT_EQ(done.wait_for(5s), std::future_status::ready);
}

}  // namespace
}  // namespace zn
