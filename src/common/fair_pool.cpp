#include "common/fair_pool.h"

#include <deque>

#include "common/thread_name.h"

namespace zn {

FairPool::FairPool(FairLimits limits, const std::string& name) : queue_(limits) {
  for (size_t i = 0; i < queue_.limits().slots; ++i)
    threads_.emplace_back([this, name] {
      set_thread_name(name);
      work();
    });
}

FairPool::~FairPool() { stop(); }

void FairPool::post(const std::string& tenant, const std::string& lane, Job job, bool must_run) {
  FairQueue<Job>::Pushed pushed;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !must_run) {
      ++refused_;
      pushed.refused = std::move(job);
    } else {
      pushed = queue_.push(tenant, lane, std::move(job), must_run);
      if (pushed.refused) ++refused_;
    }
  }
  if (pushed.accepted) wake_.notify_one();
  // Outside the lock: a refusal may post again, or answer a waiting loop.
  if (pushed.refused && pushed.refused->refused) pushed.refused->refused();
}

void FairPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    std::optional<FairQueue<Job>::Taken> taken;
    wake_.wait(lock, [&] {
      taken = queue_.take();
      return taken.has_value() || (stopping_ && queue_.waiting() == 0);
    });
    if (!taken) return;
    lock.unlock();
    try {
      taken->job.run();
    } catch (...) {
      // A job reports its own failures; one that throws must not end a worker.
    }
    // Destroyed before the next job is taken: what it captured goes now.
    taken->job = {};
    lock.lock();
    queue_.done(taken->tenant, taken->lane);
    // A slot, a tenant's share or a lane just freed: a job that could not
    // run may run now. Only then are the idle workers woken: waking all of
    // them after every job (nothing waiting, the usual case) had each
    // decision of the proxy's loops stir every worker, which contended for
    // this lock and slept again.
    if (queue_.waiting() > 0) wake_.notify_all();
  }
}

void FairPool::stop() {
  std::deque<Job> refused;
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    // Every job still waiting that may be refused is; must_run ones stay.
    refused = queue_.drain_refusable();
    refused_ += refused.size();
  }
  wake_.notify_all();
  for (Job& j : refused)
    if (j.refused) j.refused();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

FairPool::Counts FairPool::counts() const {
  std::lock_guard lock(mu_);
  return Counts{queue_.running(), queue_.waiting(), queue_.tenants(), refused_};
}

}  // namespace zn
