#include "vmm/host/tap_reaper.h"

#include <net/if.h>
#include <unistd.h>

namespace zn::vmm {

uint32_t TapReaper::default_group() { return 0x7a6e0000u | (static_cast<uint32_t>(::getpid()) & 0xffffu); }

TapReaper::TapReaper(Reaped reaped, BeforeBatch before_batch, uint32_t group)
    : reaped_(std::move(reaped)), before_batch_(std::move(before_batch)), group_(group) {
  thread_ = std::thread([this] { run(); });
}

TapReaper::~TapReaper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void TapReaper::reap(std::string name) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(name));
  }
  wake_.notify_one();
}

void TapReaper::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && in_flight_ == 0; });
}

size_t TapReaper::pending() const {
  std::lock_guard lock(mu_);
  return queue_.size() + in_flight_;
}

void TapReaper::run() {
  for (;;) {
    std::vector<std::string> batch;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      batch.swap(queue_);
      in_flight_ = batch.size();
    }
    if (before_batch_) before_batch_(batch);
    std::vector<std::string> gone, failed;
    try {
      bool grouped = false;
      for (const std::string& name : batch)
        if (const unsigned ifindex = if_nametoindex(name.c_str()))
          grouped |= nl_.set_link_group(static_cast<int>(ifindex), group_);
      if (grouped) nl_.delete_link_group(group_);
    } catch (const std::exception&) {
      // Fall through: each one left is deleted on its own below.
    }
    for (const std::string& name : batch) {
      try {
        if (if_nametoindex(name.c_str()) != 0) nl_.delete_link(name);
        gone.push_back(name);
      } catch (const std::exception&) {
        failed.push_back(name);
      }
    }
    if (reaped_) reaped_(gone, failed);
    {
      std::lock_guard lock(mu_);
      in_flight_ = 0;
    }
    idle_.notify_all();
  }
}

}  // namespace zn::vmm
