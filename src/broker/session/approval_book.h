// Requests held for a human ("action": "ask"): each held request gets a
// ticket; an operator approves or denies that one ticket (znctl approval),
// or it expires. An approval is scoped to its request: it is consumed when
// the proxy reads it and never covers another request. The proxy is woken
// when a ticket is decided (watch), never polls. Standing approvals (an
// approval "--for 10m") are the grants() book beside it (grant_book.h).
//
// Every ask ends in exactly one outcome: approved, denied, expired, or
// cancelled by the guest (its connection closed or its HTTP/2 stream reset
// while held: the proxy calls cancel(), and the ticket leaves the book).
//
// Every change of a ticket (held, approved, denied, expired, cancelled) is reported
// through Options::on_ticket, outside the book's lock, in the thread that
// made it: zerod hands each to `znctl approval watch` and the webhook. The
// hook must only hand off (queue, post), never block: hold() runs on the
// proxy's I/O loops.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/session/grant_book.h"

namespace zn::broker {

enum class ApprovalState { kPending, kApproved, kDenied, kExpired, kCancelled, kUnknown };

struct HeldRequest {
  uint64_t ticket = 0;
  std::string session;
  std::string scheme;  // "https" (intercepted TLS) or "http" (port 80)
  std::string host, method, path;
  // What the operator is shown besides: the header names (never values) and
  // the first body bytes, redacted (body_preview.h).
  std::vector<std::string> header_names;
  std::string body_preview;
  std::chrono::system_clock::time_point held_at, expires_at;
};

enum class TicketEvent { kHeld, kApproved, kDenied, kExpired, kCancelled };

class ApprovalBook {
 public:
  using Clock = std::chrono::steady_clock;
  // uid: the operator who decided (nullopt: not an operator, e.g. a deleted
  // session's requests).
  using TicketNotify = std::function<void(const HeldRequest&, TicketEvent, std::optional<uint32_t> uid)>;
  // Requests one session may have in the book at once (held, or decided
  // and not yet taken): each holds a guest connection or stream, and an
  // operator's list and the webhook are shared by every session (issue 32).
  static constexpr size_t kDefaultMaxHeldPerSession = 32;
  struct Options {
    std::chrono::milliseconds ttl{120000};
    size_t max_held_per_session = kDefaultMaxHeldPerSession;
    std::chrono::seconds max_grant = GrantBook::kDefaultMaxDuration;
    TicketNotify on_ticket;
    GrantBook::Notify on_grant;
  };
  explicit ApprovalBook(std::chrono::milliseconds ttl,
                        size_t max_held_per_session = kDefaultMaxHeldPerSession)
      : ttl_(ttl), max_held_(max_held_per_session) {}
  explicit ApprovalBook(Options o)
      : ttl_(o.ttl),
        max_held_(o.max_held_per_session),
        on_ticket_(std::move(o.on_ticket)),
        grants_(o.max_grant, std::move(o.on_grant)) {}

  // A new pending ticket (unguessable, never 0) for `request` (its ticket and
  // times are set here); 0, with nothing kept or reported, when its session
  // already has max_held_per_session requests in the book.
  uint64_t hold(HeldRequest request, Clock::time_point now = Clock::now());
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
  // `uid`: the deciding operator's, reported with the decision.
  std::optional<HeldRequest> decide(uint64_t ticket, bool approve, Clock::time_point now = Clock::now(),
                                    std::optional<uint32_t> uid = std::nullopt);
  // The held request's guest went before it was taken (its connection
  // closed, its stream reset): the ticket leaves the book now, whatever its
  // state. Returns the outcome it ends with: kCancelled when it was still
  // pending (reported kCancelled), kExpired when past its expiry (reported
  // kExpired), kApproved or kDenied when already decided (reported then),
  // kUnknown when already taken. So an ask is reported exactly once.
  ApprovalState cancel(uint64_t ticket, Clock::time_point now = Clock::now());
  std::vector<HeldRequest> pending(Clock::time_point now = Clock::now());
  // A deleted session's held requests are denied, its grants revoked.
  void forget_session(const std::string& session);
  // Standing approvals. Any thread (see grant_book.h).
  GrantBook& grants() { return grants_; }

 private:
  struct Entry {
    HeldRequest request;
    Clock::time_point expires;
    ApprovalState state = ApprovalState::kPending;
    std::function<void()> wake;  // the proxy's, while it waits
  };
  void expire(Entry& e, Clock::time_point now);
  // take (cancel = false) and cancel: a pending ticket stays, or ends
  // cancelled; an ended one is removed, its expiry or cancel reported once.
  ApprovalState settle(uint64_t ticket, Clock::time_point now, bool cancel);
  void report(const HeldRequest& h, TicketEvent event, std::optional<uint32_t> uid) const {
    if (on_ticket_) on_ticket_(h, event, uid);
  }
  std::chrono::milliseconds ttl_;
  size_t max_held_;
  TicketNotify on_ticket_;
  GrantBook grants_;
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<std::string, size_t> held_per_session_;  // entries_ by session (none at 0)
};

}  // namespace zn::broker
