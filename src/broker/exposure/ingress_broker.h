// The broker's answers to the ingress of declared ports (issue 14): whether
// a client is let in (a one-time ticket, its binding, or a public port),
// where the guest is, and the audit of each admission, refusal and end.
#pragma once

#include <chrono>

#include "broker/audit/log.h"
#include "broker/exposure/refusal_throttle.h"
#include "broker/exposure/ticket_book.h"
#include "broker/session/directory.h"
#include "userspace/ingress/policy.h"

namespace zn::broker {

struct IngressBrokerOptions {
  // How long a redeemed ticket binds its client (the cookie's life, and the
  // longest an admitted connection lasts).
  std::chrono::seconds binding_ttl{600};
  // Refusals audited one by one per client before the rest are answered
  // 429 unread and summarised (refusal_throttle.h).
  RefusalThrottle::Limits refusals;
};

// Executor: IngressPolicy's (the ingress loop; never blocks: the session
// lookup and the ticket book take short locks, audit records are posted).
class IngressBroker : public ingress::IngressPolicy {
 public:
  IngressBroker(const SessionDirectory& sessions, TicketBook& tickets, AuditLog& audit,
                IngressBrokerOptions options = {});
  ingress::AdmitDecision admit(const ingress::AdmitFacts& facts) override;
  void on_closed(const ingress::ExposureSummary& summary) override;
  // One ingress:deny record ("rate_limited", with a count) per (session,
  // port, client) refused unread since the last call: each tick (once a
  // second) and at shutdown.
  void flush_refusals();
  void tick() override { flush_refusals(); }
  const RefusalThrottle& refusals() const { return throttle_; }

 private:
  ingress::AdmitDecision refuse(const ingress::AdmitFacts& facts, const std::string& client,
                                const std::string& reason, int status = 403);

  const SessionDirectory& sessions_;
  TicketBook& tickets_;
  AuditLog& audit_;
  IngressBrokerOptions options_;
  RefusalThrottle throttle_;
};

}  // namespace zn::broker
