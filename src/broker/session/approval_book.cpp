#include "broker/session/approval_book.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace zn::broker {

void ApprovalBook::expire(Entry& e, Clock::time_point now) {
  if (e.state == ApprovalState::kPending && now >= e.expires) e.state = ApprovalState::kExpired;
}

uint64_t ApprovalBook::hold(const std::string& session, const std::string& scheme, const std::string& host,
                            const std::string& method, const std::string& path, Clock::time_point now) {
  HeldRequest r;
  r.session = session;
  r.scheme = scheme;
  r.host = host;
  r.method = method;
  r.path = path;
  return hold(std::move(r), now);
}

uint64_t ApprovalBook::hold(HeldRequest request, Clock::time_point now) {
  HeldRequest held;
  {
    std::lock_guard lock(mu_);
    size_t& held_now = held_per_session_[request.session];
    if (held_now >= max_held_) return 0;
    uint64_t ticket = 0;
    // Tickets name a request in operator commands: random, so one cannot be
    // approved by guessing the next number.
    while (ticket == 0 || entries_.count(ticket)) {
      if (RAND_bytes(reinterpret_cast<unsigned char*>(&ticket), sizeof(ticket)) != 1)
        throw std::runtime_error("no randomness for an approval ticket");
      ticket &= 0x001fffffffffffffULL;  // exact in JSON numbers
    }
    Entry e;
    e.request = std::move(request);
    e.request.ticket = ticket;
    e.request.held_at = std::chrono::system_clock::now();
    e.request.expires_at = e.request.held_at + ttl_;
    e.expires = now + ttl_;
    held = e.request;
    entries_.emplace(ticket, std::move(e));
    ++held_now;
  }
  report(held, TicketEvent::kHeld, std::nullopt);
  return held.ticket;
}

std::optional<ApprovalBook::Clock::time_point> ApprovalBook::expires_at(uint64_t ticket) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(ticket);
  if (it == entries_.end()) return std::nullopt;
  return it->second.expires;
}

void ApprovalBook::watch(uint64_t ticket, std::function<void()> wake) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(ticket);
    if (it != entries_.end() && it->second.state == ApprovalState::kPending) {
      it->second.wake = std::move(wake);
      return;
    }
  }
  wake();
}

ApprovalState ApprovalBook::take(uint64_t ticket, Clock::time_point now) {
  return settle(ticket, now, false);
}

ApprovalState ApprovalBook::settle(uint64_t ticket, Clock::time_point now, bool cancel) {
  std::optional<HeldRequest> ended;
  ApprovalState s;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(ticket);
    if (it == entries_.end()) return ApprovalState::kUnknown;
    expire(it->second, now);
    s = it->second.state;
    const std::string session = it->second.request.session;
    if (cancel && s == ApprovalState::kPending) s = ApprovalState::kCancelled;
    // A decision was reported when it was made; an expiry or a cancel is
    // reported here, once: the ticket is gone now.
    if (s == ApprovalState::kCancelled || s == ApprovalState::kExpired) ended = std::move(it->second.request);
    if (s != ApprovalState::kPending) {
      auto n = held_per_session_.find(session);
      if (n != held_per_session_.end() && --n->second == 0) held_per_session_.erase(n);
      entries_.erase(it);
    }
  }
  if (ended)
    report(*ended, s == ApprovalState::kCancelled ? TicketEvent::kCancelled : TicketEvent::kExpired,
           std::nullopt);
  return s;
}

std::optional<HeldRequest> ApprovalBook::decide(uint64_t ticket, bool approve, Clock::time_point now,
                                                std::optional<uint32_t> uid) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(ticket);
  if (it == entries_.end()) return std::nullopt;
  expire(it->second, now);
  if (it->second.state != ApprovalState::kPending) return std::nullopt;
  it->second.state = approve ? ApprovalState::kApproved : ApprovalState::kDenied;
  std::function<void()> wake = std::move(it->second.wake);
  HeldRequest decided = it->second.request;
  lock.unlock();
  if (wake) wake();
  report(decided, approve ? TicketEvent::kApproved : TicketEvent::kDenied, uid);
  return decided;
}

ApprovalState ApprovalBook::cancel(uint64_t ticket, Clock::time_point now) {
  return settle(ticket, now, true);
}

std::vector<HeldRequest> ApprovalBook::pending(Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<HeldRequest> out;
  for (auto& [ticket, e] : entries_) {
    expire(e, now);
    if (e.state == ApprovalState::kPending) out.push_back(e.request);
  }
  return out;
}

void ApprovalBook::forget_session(const std::string& session) {
  std::vector<std::function<void()>> woken;
  std::vector<HeldRequest> denied;
  {
    std::lock_guard lock(mu_);
    for (auto& [ticket, e] : entries_)
      if (e.request.session == session && e.state == ApprovalState::kPending) {
        e.state = ApprovalState::kDenied;
        denied.push_back(e.request);
        if (e.wake) woken.push_back(std::move(e.wake));
      }
  }
  for (auto& wake : woken) wake();
  for (const HeldRequest& h : denied) report(h, TicketEvent::kDenied, std::nullopt);
  grants_.forget_session(session);
}

}  // namespace zn::broker
