// The sweeper behind GuardedBytes' read linger: one thread for the process
// that makes lingering pages no-access once nobody has read them for the
// linger. Internal to broker/secrets.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_set>

namespace zn::broker {

class GuardedBytes;

class PageReprotector {
 public:
  // Made on first use and never destroyed (a GuardedBytes held by a static
  // may outlive any other static), its thread started by the first watch.
  static PageReprotector& instance();

  // `bytes` has no reader now and stays readable until it expires. Called
  // by GuardedBytes without its own lock held (the sweeper takes ours, then
  // theirs).
  void watch(const GuardedBytes* bytes);
  // From GuardedBytes' destructor: once this returns the sweeper never
  // looks at `bytes` again.
  void forget(const GuardedBytes* bytes);

 private:
  PageReprotector() = default;
  void run();

  std::mutex mu_;  // held while the sweeper looks at any of watched_
  std::condition_variable work_;
  std::unordered_set<const GuardedBytes*> watched_;
  bool started_ = false;
};

}  // namespace zn::broker
