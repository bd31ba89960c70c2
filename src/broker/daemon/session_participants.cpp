#include "broker/daemon/session_participants.h"

#include <string.h>

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace zn::broker {

void AuditSecretsParticipant::session_publishing(const Session*, const Session& next) {
  std::vector<std::string> values;
  for (const auto& [name, resource] : next.policy->policy().resources)
    for (const auto& [field, value] : resource.fields)
      value.reveal([&](std::string_view v) { values.emplace_back(v); });
  audit_.set_session_secrets(next.record.id, values);
  // The copies made here are wiped, not left in freed memory.
  for (std::string& v : values) explicit_bzero(v.data(), v.size());
}

void AuditSecretsParticipant::session_removed(const Session& s) {
  audit_.forget_session_secrets(s.record.id);
}

void CapabilityParticipant::session_published(const Session* before, const Session& now) {
  if (before) capabilities_.release(*before, &now);
}

void CapabilityParticipant::session_removed(const Session& s) { capabilities_.release(s, nullptr); }

void ApprovalParticipant::session_removed(const Session& s) {
  approvals_.forget_session(s.record.id);
  proxy_.forget_session(s.record.id);
}

void GuestParticipant::session_leaving(const Session& s) {
  // Each is the other service's to report; a failure never keeps the
  // session from going (its device denies all once its entry is gone).
  try {
    vms_.stop(s.record.id);
  } catch (const std::exception& e) {
    spdlog::error("session {}: stopping its VM: {}", s.record.id, e.what());
  }
  try {
    exposures_.forget_session(s.record.id);
  } catch (const std::exception& e) {
    spdlog::error("session {}: closing its declared ports: {}", s.record.id, e.what());
  }
}

}  // namespace zn::broker
