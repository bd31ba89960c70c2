// Requests held for a human ("action": "ask"): each held request gets a
// ticket; an operator approves or denies that one ticket (znctl approval),
// or it expires. An approval is scoped to its request: it is consumed when
// the proxy reads it and never covers another request. The proxy is woken
// when a ticket is decided (watch), never polls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace zn::broker {

enum class ApprovalState { kPending, kApproved, kDenied, kExpired, kUnknown };

struct HeldRequest {
  uint64_t ticket = 0;
  std::string session;
  std::string scheme;  // "https" (intercepted TLS) or "http" (port 80)
  std::string host, method, path;
  std::chrono::system_clock::time_point held_at, expires_at;
};

class ApprovalBook {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ApprovalBook(std::chrono::milliseconds ttl) : ttl_(ttl) {}

  // A new pending ticket (unguessable, never 0).
  uint64_t hold(const std::string& session, const std::string& scheme, const std::string& host,
                const std::string& method, const std::string& path, Clock::time_point now = Clock::now());
  // When the ticket expires (the proxy arms its own timer for it).
  std::optional<Clock::time_point> expires_at(uint64_t ticket);
  // A final state is returned once and the ticket is gone.
  ApprovalState take(uint64_t ticket, Clock::time_point now = Clock::now());
  // Calls `wake` once when the ticket leaves pending by a decision (an
  // operator's, a deleted session's); at once, in this thread, if it has
  // already left it or is unknown. Expiry wakes no one: the waiter's own
  // timer covers it. `wake` runs without the book's lock held, in the
  // deciding thread: it must only hand off (post to a loop), never block.
  void watch(uint64_t ticket, std::function<void()> wake);
  // An operator's decision; nullopt if the ticket is unknown or no longer
  // pending (decided, expired), so a replayed command changes nothing.
  std::optional<HeldRequest> decide(uint64_t ticket, bool approve, Clock::time_point now = Clock::now());
  std::vector<HeldRequest> pending(Clock::time_point now = Clock::now());
  // A deleted session's held requests are denied.
  void forget_session(const std::string& session);

 private:
  struct Entry {
    HeldRequest request;
    Clock::time_point expires;
    ApprovalState state = ApprovalState::kPending;
    std::function<void()> wake;  // the proxy's, while it waits
  };
  void expire(Entry& e, Clock::time_point now);
  std::chrono::milliseconds ttl_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace zn::broker
