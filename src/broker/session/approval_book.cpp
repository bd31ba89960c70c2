#include "broker/session/approval_book.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace zn::broker {

void ApprovalBook::expire(Entry& e, Clock::time_point now) {
  if (e.state == ApprovalState::kPending && now >= e.expires) e.state = ApprovalState::kExpired;
}

uint64_t ApprovalBook::hold(const std::string& session, const std::string& scheme, const std::string& host,
                            const std::string& method, const std::string& path, Clock::time_point now) {
  std::lock_guard lock(mu_);
  uint64_t ticket = 0;
  // Tickets name a request in operator commands: random, so one cannot be
  // approved by guessing the next number.
  while (ticket == 0 || entries_.count(ticket)) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&ticket), sizeof(ticket)) != 1)
      throw std::runtime_error("no randomness for an approval ticket");
    ticket &= 0x001fffffffffffffULL;  // exact in JSON numbers
  }
  Entry e;
  e.request = {ticket,
               session,
               scheme,
               host,
               method,
               path,
               std::chrono::system_clock::now(),
               std::chrono::system_clock::now() + ttl_};
  e.expires = now + ttl_;
  entries_.emplace(ticket, std::move(e));
  return ticket;
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
  std::lock_guard lock(mu_);
  auto it = entries_.find(ticket);
  if (it == entries_.end()) return ApprovalState::kUnknown;
  expire(it->second, now);
  const ApprovalState s = it->second.state;
  if (s != ApprovalState::kPending) entries_.erase(it);
  return s;
}

std::optional<HeldRequest> ApprovalBook::decide(uint64_t ticket, bool approve, Clock::time_point now) {
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
  return decided;
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
  {
    std::lock_guard lock(mu_);
    for (auto& [ticket, e] : entries_)
      if (e.request.session == session && e.state == ApprovalState::kPending) {
        e.state = ApprovalState::kDenied;
        if (e.wake) woken.push_back(std::move(e.wake));
      }
  }
  for (auto& wake : woken) wake();
}

}  // namespace zn::broker
