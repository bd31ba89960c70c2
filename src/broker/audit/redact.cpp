#include "broker/audit/redact.h"

#include <string.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

namespace zn::broker {

bool AuditRedactor::add(std::string secret) {
  bool ok = secret.size() >= kMinSecretLen;
  try {
    if (ok) (void)nlohmann::json(secret).dump();  // strict UTF-8 check
  } catch (const nlohmann::json::exception&) {
    ok = false;
  }
  if (ok && std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end())
    secrets_.push_back(std::move(secret));
  else
    explicit_bzero(secret.data(), secret.size());  // the copy not kept
  return ok;
}

AuditRedactor::~AuditRedactor() {
  for (std::string& s : secrets_) explicit_bzero(s.data(), s.size());
}

AuditRedactor AuditRedactor::merged(const std::vector<const AuditRedactor*>& parts) {
  AuditRedactor out;
  std::unordered_set<std::string_view> seen;
  for (const AuditRedactor* part : parts)
    for (const std::string& secret : part->secrets_)
      if (seen.insert(secret).second) out.secrets_.push_back(secret);
  return out;
}

std::string AuditRedactor::redact(const std::string& s) const {
  if (secrets_.empty() || s.size() < kMinSecretLen) return s;
  std::vector<bool> covered;  // allocated on the first hit only
  for (const auto& secret : secrets_) {
    for (size_t pos = s.find(secret); pos != std::string::npos; pos = s.find(secret, pos + 1)) {
      if (covered.empty()) covered.assign(s.size(), false);
      std::fill(covered.begin() + static_cast<std::ptrdiff_t>(pos),
                covered.begin() + static_cast<std::ptrdiff_t>(pos + secret.size()), true);
    }
  }
  if (covered.empty()) return s;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (covered[i]) {
      out += kMarker;
      while (i < s.size() && covered[i]) ++i;
    } else {
      out += s[i++];
    }
  }
  return out;
}

nlohmann::json AuditRedactor::redact(const nlohmann::json& j) const {
  nlohmann::json out = j;
  redact_in_place(out);
  return out;
}

bool AuditRedactor::redact_in_place(nlohmann::json& j) const {
  if (secrets_.empty()) return false;
  const auto has_secret = [this](const std::string& s) {
    return s.size() >= kMinSecretLen &&
           std::any_of(secrets_.begin(), secrets_.end(),
                       [&](const std::string& secret) { return s.find(secret) != std::string::npos; });
  };
  switch (j.type()) {
    case nlohmann::json::value_t::string: {
      auto& s = j.get_ref<std::string&>();
      if (!has_secret(s)) return false;
      s = redact(s);
      return true;
    }
    case nlohmann::json::value_t::object: {
      bool key_has_secret = false, changed = false;
      for (auto& [k, v] : j.items()) {
        key_has_secret = key_has_secret || has_secret(k);
        changed = redact_in_place(v) || changed;
      }
      if (!key_has_secret) return changed;
      // Keys are immutable in place: rebuild, in iteration order, so keys
      // that collide after redaction keep the last value.
      nlohmann::json out = nlohmann::json::object();
      for (auto& [k, v] : j.items()) out[redact(k)] = std::move(v);
      j = std::move(out);
      return true;
    }
    case nlohmann::json::value_t::array: {
      bool changed = false;
      for (auto& v : j) changed = redact_in_place(v) || changed;
      return changed;
    }
    default:
      return false;
  }
}

}  // namespace zn::broker
