// A live feed for a streaming verb: live drop events for `znctl events`
// (zerod's drop-event thread publishes), held requests and their decisions
// for `znctl approval watch` (the approval book's hook publishes, from a
// proxy I/O loop or a control thread). Each streaming client reads its own
// bounded queue, so a slow reader loses its oldest events and never holds up
// the publisher or the others.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <nlohmann/json.hpp>

namespace zn::broker {

class EventFeed {
 public:
  static constexpr size_t kMaxQueued = 1000;  // per subscriber

  // Whether anyone listens, so the publisher can skip building an event.
  // Never blocks for long (one short lock); any thread.
  bool has_subscribers() const;
  // Queues `event` for every subscriber. Never blocks on a reader; any thread
  // (zerod's drop-event thread).
  void publish(const nlohmann::json& event);
  // Streams events through `emit` until it fails (client gone), `stopping`
  // or close(); sends a heartbeat after each 500 ms without an event, which
  // finds a client that went away meanwhile. Blocks: a control client's thread.
  // `initial`, when set, is called once the subscriber is in place and what
  // it returns is sent first (what is pending already: nothing published
  // meanwhile is missed, though an event may then show twice).
  void serve(const std::function<bool(const nlohmann::json&)>& emit, const std::atomic<bool>& stopping,
             const std::function<std::vector<nlohmann::json>()>& initial = {});
  // Ends every serve() at its next wake-up (within 500 ms). Any thread.
  void close();

 private:
  struct Subscriber {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<nlohmann::json> queue;
  };

  std::atomic<bool> closed_{false};
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
};

}  // namespace zn::broker
