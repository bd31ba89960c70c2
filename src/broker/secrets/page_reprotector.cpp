#include "broker/secrets/page_reprotector.h"

#include <algorithm>
#include <chrono>

#include "broker/secrets/guarded_bytes.h"

namespace zn::broker {

PageReprotector& PageReprotector::instance() {
  static PageReprotector* const sweeper = new PageReprotector();  // never freed, on purpose
  return *sweeper;
}

void PageReprotector::watch(const GuardedBytes* bytes) {
  std::lock_guard lock(mu_);
  watched_.insert(bytes);
  if (!started_) {
    started_ = true;
    std::thread([this] { run(); }).detach();
  }
  work_.notify_one();
}

void PageReprotector::forget(const GuardedBytes* bytes) {
  std::lock_guard lock(mu_);
  watched_.erase(bytes);
}

void PageReprotector::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return !watched_.empty(); });
    // Twice a linger: pages go no-access between one and one and a half
    // lingers after their last read. A linger set back to 0 expires what
    // still lingers at the next look.
    const std::chrono::milliseconds linger = GuardedBytes::read_linger();
    work_.wait_for(lock, std::max(linger / 2, std::chrono::milliseconds(1)));
    const auto now = std::chrono::steady_clock::now();
    for (auto it = watched_.begin(); it != watched_.end();)
      it = (*it)->expire(now, linger) ? watched_.erase(it) : std::next(it);
  }
}

}  // namespace zn::broker
