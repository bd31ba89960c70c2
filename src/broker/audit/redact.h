// Secret redaction for audit details (defence in depth: callers should never
// put secrets in an event, this catches the ones that slip through).
// Not thread-safe: AuditLog serialises access.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zn::broker {

class AuditRedactor {
 public:
  AuditRedactor() = default;
  AuditRedactor(const AuditRedactor&) = default;
  AuditRedactor& operator=(const AuditRedactor&) = default;
  AuditRedactor(AuditRedactor&&) noexcept = default;
  AuditRedactor& operator=(AuditRedactor&&) noexcept = default;
  // The values are wiped, not left in freed memory (a deleted session's).
  ~AuditRedactor();
  static constexpr size_t kMinSecretLen = 8;
  static constexpr const char* kMarker = "[redacted]";

  // Registers a secret. Returns false (and keeps nothing) if it is shorter
  // than kMinSecretLen bytes or not valid UTF-8 (a valid UTF-8 needle only
  // matches on character boundaries, so redacting keeps strings valid).
  bool add(std::string secret);

  // Every occurrence of any registered secret, in every string value and
  // object key (recursively), replaced by "[redacted]". Overlapping or
  // adjacent occurrences collapse into one marker, so no fragment of a secret
  // survives. Keys that collide after redaction keep the last value.
  nlohmann::json redact(const nlohmann::json& j) const;
  std::string redact(const std::string& s) const;
  // The same, in place: what has no secret is neither copied nor rebuilt
  // (an audit detail usually has none, and is posted per request). True if
  // anything was replaced.
  bool redact_in_place(nlohmann::json& j) const;

  bool empty() const { return secrets_.empty(); }
  size_t size() const { return secrets_.size(); }

  // Every secret of `parts`, each once (linear in their total).
  static AuditRedactor merged(const std::vector<const AuditRedactor*>& parts);

 private:
  std::vector<std::string> secrets_;
};

}  // namespace zn::broker
