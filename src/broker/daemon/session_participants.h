// The parts of zerod that keep something of each session outside the
// session's own state, each told of its changes by the registry
// (session/participant.h), so `session delete` is one call that none of them
// can miss. Joined in this order (zerod.cpp); a session's departure is told
// in reverse: its ingress listeners close and its VM stops before its TAP
// goes, then its held requests, grants, capability rows and audit secrets
// are dropped.
#pragma once

#include "broker/audit/log.h"
#include "broker/exposure/exposure_service.h"
#include "broker/session/approval_book.h"
#include "broker/session/capability_service.h"
#include "broker/session/participant.h"
#include "broker/session/proxy.h"
#include "broker/vms/vm_registry.h"

namespace zn::broker {

// The audit's redactor learns every resource value of a session's policy
// before the data path can find the session (so before anything can log
// one), and forgets them when it goes.
class AuditSecretsParticipant : public SessionParticipant {
 public:
  explicit AuditSecretsParticipant(AuditLog& audit) : audit_(audit) {}
  void session_publishing(const Session* before, const Session& next) override;
  void session_removed(const Session& s) override;

 private:
  AuditLog& audit_;
};

// A capability a session loses (an update, a delete) has its calls
// cancelled and its KV and queue contents erased.
class CapabilityParticipant : public SessionParticipant {
 public:
  explicit CapabilityParticipant(CapabilityService& capabilities) : capabilities_(capabilities) {}
  void session_published(const Session* before, const Session& now) override;
  void session_removed(const Session& s) override;

 private:
  CapabilityService& capabilities_;
};

// A deleted session's held requests are denied and its grants revoked; the
// proxy forgets the policy versions its tickets were held under.
class ApprovalParticipant : public SessionParticipant {
 public:
  ApprovalParticipant(ApprovalBook& approvals, SessionProxyPolicy& proxy)
      : approvals_(approvals), proxy_(proxy) {}
  void session_removed(const Session& s) override;

 private:
  ApprovalBook& approvals_;
  SessionProxyPolicy& proxy_;
};

// A deleted session's microVM stops and its declared ports close (their
// tickets end) while its TAP is still there.
class GuestParticipant : public SessionParticipant {
 public:
  GuestParticipant(VmRegistry& vms, ExposureService& exposures) : vms_(vms), exposures_(exposures) {}
  void session_leaving(const Session& s) override;

 private:
  VmRegistry& vms_;
  ExposureService& exposures_;
};

}  // namespace zn::broker
