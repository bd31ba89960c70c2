#include "broker/control/event_feed.h"

#include <algorithm>
#include <chrono>

namespace zn::broker {

using json = nlohmann::json;

bool EventFeed::has_subscribers() const {
  std::lock_guard lock(mu_);
  return !subscribers_.empty();
}

void EventFeed::publish(const json& event) {
  std::vector<std::shared_ptr<Subscriber>> subs;
  {
    std::lock_guard lock(mu_);
    subs = subscribers_;
  }
  for (auto& sub : subs) {
    std::lock_guard lock(sub->mu);
    if (sub->queue.size() >= kMaxQueued) sub->queue.pop_front();
    sub->queue.push_back(event);
    sub->cv.notify_one();
  }
}

void EventFeed::serve(const std::function<bool(const json&)>& emit, const std::atomic<bool>& stopping,
                      const std::function<std::vector<json>()>& initial) {
  auto sub = std::make_shared<Subscriber>();
  {
    std::lock_guard lock(mu_);
    subscribers_.push_back(sub);
  }
  bool alive = true;
  if (initial)
    for (const json& e : initial()) alive = alive && emit(e);
  while (alive && !stopping && !closed_) {
    std::deque<json> batch;
    {
      std::unique_lock lock(sub->mu);
      sub->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return !sub->queue.empty(); });
      batch.swap(sub->queue);
    }
    for (const json& e : batch) alive = alive && emit(e);
    // A heartbeat finds a client that went away while nothing happened.
    if (!alive || (batch.empty() && !emit(json{{"heartbeat", true}}))) break;
  }
  std::lock_guard lock(mu_);
  subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), sub), subscribers_.end());
}

void EventFeed::close() { closed_ = true; }

}  // namespace zn::broker
