// Deletes TAPs on a worker thread, in batches. Unregistering a netdev costs
// the kernel an rcu_barrier (~18 ms) and a synchronize_net per request, so a
// caller that deletes TAPs one by one under a lock serialises everything
// behind those waits. The reaper moves each queued TAP into a device group of
// its own and deletes the group in one request: one barrier per batch.
//
// The caller must make a TAP harmless before handing it over (zerod removes
// its datapath entry first, so the attached programs drop all its traffic):
// the reaper only reclaims the device.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vmm/host/route_netlink.h"

namespace zn::vmm {

class TapReaper {
 public:
  // Called on the worker with the names of a batch once they are gone (or
  // were already), and with those it could not delete; may not call back
  // into the reaper.
  using Reaped =
      std::function<void(const std::vector<std::string>& gone, const std::vector<std::string>& failed)>;
  // Tests: runs on the worker before each batch (e.g. to hold it).
  using BeforeBatch = std::function<void(const std::vector<std::string>& names)>;

  // Connects in the calling thread's network namespace, where it deletes.
  // `group` is the device group it borrows (none of the namespace's other
  // devices may be in it). Throws std::runtime_error.
  explicit TapReaper(Reaped reaped, BeforeBatch before_batch = {}, uint32_t group = default_group());
  // Reaps what is queued, then stops.
  ~TapReaper();
  TapReaper(const TapReaper&) = delete;
  TapReaper& operator=(const TapReaper&) = delete;

  // Queues a TAP for deletion; never blocks on the kernel.
  void reap(std::string name);
  // Waits until everything queued so far is reaped.
  void drain();
  size_t pending() const;

  // A group unlikely to be anyone else's: a tag plus this process's id.
  static uint32_t default_group();

 private:
  void run();

  RouteNetlink nl_;  // the worker's once started
  Reaped reaped_;
  BeforeBatch before_batch_;
  uint32_t group_;
  mutable std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::vector<std::string> queue_;
  size_t in_flight_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace zn::vmm
