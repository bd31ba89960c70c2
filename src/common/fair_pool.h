// Worker threads shared fairly between tenants (issue 32): a FairQueue with
// its threads. A job posted for a tenant runs in that tenant's turn, within
// the caps of FairLimits (slots is the number of threads); a job refused (the
// pool full, and its tenant the one with the most waiting) is not run: its
// `refused` is called instead, once, on the thread that pushed, or on the
// one whose push made it give way. Never both, never neither (a stop refuses
// what still waits).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/fair_queue.h"

namespace zn {

class FairPool {
 public:
  struct Job {
    std::function<void()> run;
    std::function<void()> refused;  // may be empty for a must_run job
  };
  struct Counts {
    size_t running = 0;
    size_t waiting = 0;
    size_t tenants = 0;
    uint64_t refused = 0;  // since the start
  };

  // `limits.slots` threads are started, each named `name` (thread_name.h).
  explicit FairPool(FairLimits limits, const std::string& name = "zn-pool");
  ~FairPool();  // stop()
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  // Runs `job.run` on a worker in `tenant`'s turn (`lane` capped by
  // limits.per_lane; "" none). A `must_run` job is never refused, not even
  // by stop() (it runs before the workers end): for a record of work done.
  void post(const std::string& tenant, const std::string& lane, Job job, bool must_run = false);

  // No job starts after this but the must_run ones; the others still waiting
  // are refused; waits for the running ones. Idempotent.
  void stop();

  Counts counts() const;

 private:
  void work();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  FairQueue<Job> queue_;
  bool stopping_ = false;
  uint64_t refused_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace zn
