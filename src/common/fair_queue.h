// A fair share of a few shared workers between many tenants (issue 32).
//
// Jobs of one tenant (a session, or a guest address before its session is
// known) wait in that tenant's own FIFO; a free worker takes the next job
// round-robin across tenants, so a tenant with a thousand jobs queued gets
// one turn, like every other tenant with work, before its next. Three caps
// hold while jobs run:
//   - `slots`: jobs running at once in all (the workers);
//   - `per_tenant`: jobs of one tenant running at once. With slots > per_tenant
//     a tenant whose every job blocks (a slow SQL statement, a name that takes
//     seconds to resolve) never holds every worker: the next tenant's job
//     starts at once while fewer than slots / per_tenant tenants are saturated;
//   - `per_lane`: jobs of one lane (a store) running at once, whoever's they
//     are, so one slow store leaves workers to the others (0: no lane cap).
// Waiting is bounded by `queued` in all; when it is full, the tenant with the
// longest queue gives way (its newest job is refused) to a tenant with a
// shorter one, and a tenant that is itself the longest is refused: a flood
// from one tenant can never refuse a quiet tenant's job (longest queue drop).
// A job pushed as `must_run` (an audit record of work already done) is never
// refused and does not count against `queued`; the caller bounds how many it
// pushes.
//
// A data structure, not an executor: no thread, no lock (FairPool adds them).
// Every call is O(tenants with jobs + one tenant's queue).
#pragma once

#include <cstddef>
#include <deque>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

namespace zn {

struct FairLimits {
  size_t slots = 4;
  size_t per_tenant = 2;
  size_t per_lane = 0;  // 0: lanes are not capped
  size_t queued = 64;
};

template <class Job>
class FairQueue {
 public:
  // A job taken to run, with what done() needs back.
  struct Taken {
    std::string tenant;
    std::string lane;
    Job job;
  };
  // What push() did: `refused` holds the job that will not run (the one
  // pushed, or another tenant's newest that gave way), if any.
  struct Pushed {
    bool accepted = false;  // the job pushed is queued
    std::optional<Job> refused;
  };

  explicit FairQueue(FairLimits limits) : limits_(limits) {
    if (limits_.slots == 0) limits_.slots = 1;
    if (limits_.per_tenant == 0) limits_.per_tenant = 1;
  }

  Pushed push(const std::string& tenant, std::string lane, Job job, bool must_run = false) {
    Pushed out;
    Tenant& t = tenants_[tenant];
    if (!must_run && waiting_ >= limits_.queued) {
      Tenant* longest = nullptr;
      for (auto& [name, other] : tenants_)
        if (!longest || other.refusable > longest->refusable) longest = &other;
      // Only a tenant with more jobs waiting than this one gives way; a
      // tenant that is itself (one of) the longest is refused.
      if (!longest || longest == &t || longest->refusable <= t.refusable + 1) {
        if (t.queue.empty() && t.running == 0) tenants_.erase(tenant);
        out.refused = std::move(job);
        return out;
      }
      out.refused = drop_newest(*longest);
    }
    if (t.queue.empty()) rotation_.push_back(tenant);
    t.queue.push_back(Entry{std::move(lane), std::move(job), must_run});
    if (!must_run) {
      ++t.refusable;
      ++waiting_;
    }
    out.accepted = true;
    return out;
  }

  // The next job to run, in its tenant's turn, or nullopt when every job
  // waiting is held by a cap (or none waits). The job counts as running
  // until done().
  std::optional<Taken> take() {
    if (running_ >= limits_.slots) return std::nullopt;
    for (auto it = rotation_.begin(); it != rotation_.end(); ++it) {
      Tenant& t = tenants_.at(*it);
      if (t.running >= limits_.per_tenant) continue;
      for (auto e = t.queue.begin(); e != t.queue.end(); ++e) {
        if (limits_.per_lane != 0 && !e->lane.empty() && lane_running(e->lane) >= limits_.per_lane) continue;
        Taken taken{*it, std::move(e->lane), std::move(e->job)};
        if (!e->must_run) {
          --t.refusable;
          --waiting_;
        }
        t.queue.erase(e);
        ++t.running;
        ++running_;
        if (!taken.lane.empty()) ++lanes_[taken.lane];
        // Its turn is used: to the back of the rotation, or out of it.
        std::string name = std::move(*it);
        rotation_.erase(it);
        if (!t.queue.empty()) rotation_.push_back(std::move(name));
        return taken;
      }
    }
    return std::nullopt;
  }

  // The job taken for `tenant` in `lane` has ended.
  void done(const std::string& tenant, const std::string& lane) {
    if (!lane.empty()) {
      auto l = lanes_.find(lane);
      if (l != lanes_.end() && --l->second == 0) lanes_.erase(l);
    }
    auto it = tenants_.find(tenant);
    if (it == tenants_.end()) return;
    --it->second.running;
    --running_;
    if (it->second.running == 0 && it->second.queue.empty()) tenants_.erase(it);
  }

  // Takes out every job waiting that may be refused (to refuse them at a
  // stop); must_run ones stay, in their turns.
  std::deque<Job> drain_refusable() {
    std::deque<Job> out;
    for (auto it = rotation_.begin(); it != rotation_.end();) {
      Tenant& t = tenants_.at(*it);
      std::deque<Entry> kept;
      for (Entry& e : t.queue) {
        if (e.must_run)
          kept.push_back(std::move(e));
        else
          out.push_back(std::move(e.job));
      }
      waiting_ -= t.refusable;
      t.refusable = 0;
      t.queue = std::move(kept);
      if (!t.queue.empty()) {
        ++it;
        continue;
      }
      if (t.running == 0) tenants_.erase(*it);
      it = rotation_.erase(it);
    }
    return out;
  }

  size_t running() const { return running_; }
  size_t waiting() const {
    size_t n = 0;
    for (const auto& [name, t] : tenants_) n += t.queue.size();
    return n;
  }
  size_t running_of(const std::string& tenant) const {
    auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.running;
  }
  size_t waiting_of(const std::string& tenant) const {
    auto it = tenants_.find(tenant);
    return it == tenants_.end() ? 0 : it->second.queue.size();
  }
  // Tenants with a job waiting or running (the state kept is only theirs).
  size_t tenants() const { return tenants_.size(); }
  const FairLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string lane;
    Job job;
    bool must_run = false;
  };
  struct Tenant {
    std::deque<Entry> queue;
    size_t refusable = 0;  // entries of queue that are not must_run
    size_t running = 0;
  };

  size_t lane_running(const std::string& lane) const {
    auto it = lanes_.find(lane);
    return it == lanes_.end() ? 0 : it->second;
  }

  Job drop_newest(Tenant& t) {
    for (auto e = t.queue.rbegin(); e != t.queue.rend(); ++e) {
      if (e->must_run) continue;
      Job job = std::move(e->job);
      t.queue.erase(std::next(e).base());
      --t.refusable;
      --waiting_;
      // It had more waiting than the pusher: never left empty.
      return job;
    }
    return Job{};  // unreachable: refusable > 0
  }

  FairLimits limits_;
  std::unordered_map<std::string, Tenant> tenants_;
  std::list<std::string> rotation_;                // tenants with a job waiting, next turn first
  std::unordered_map<std::string, size_t> lanes_;  // running per lane
  size_t running_ = 0;
  size_t waiting_ = 0;  // refusable jobs waiting, against limits_.queued
};

}  // namespace zn
