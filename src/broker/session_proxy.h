// The broker's side of the transparent proxy: which session a connection
// belongs to and where it may go. Passthrough only so far: a TLS host the
// policy allows without request conditions, or an L4 rule's destination.
// Rules that need interception (methods, paths, identity, ask) and plain
// HTTP are refused until the L7 proxy exists — fail closed.
#pragma once

#include "broker/audit_log.h"
#include "broker/session_dns.h"
#include "broker/session_registry.h"
#include "userspace/proxy_policy.h"

namespace zn::broker {

class SessionProxyPolicy : public proxy::ProxyPolicy {
 public:
  SessionProxyPolicy(const SessionRegistry& sessions, const SessionDnsPolicy& dns, ConfiguredResolver& resolver,
                     AuditLog& audit)
      : sessions_(sessions), dns_(dns), resolver_(resolver), audit_(audit) {}

  proxy::UpstreamDecision decide(const proxy::ConnectionFacts& facts) override;
  void on_closed(const proxy::ConnectionSummary& summary) override;

 private:
  proxy::UpstreamDecision deny(proxy::UpstreamDecision d, const std::string& reason,
                               const proxy::ConnectionFacts& facts);
  const SessionRegistry& sessions_;
  const SessionDnsPolicy& dns_;
  ConfiguredResolver& resolver_;
  AuditLog& audit_;
};

}  // namespace zn::broker
