#include "broker/audit/redact.h"

#include <algorithm>

namespace zn::broker {

bool AuditRedactor::add(std::string secret) {
  if (secret.size() < kMinSecretLen) return false;
  try {
    (void)nlohmann::json(secret).dump();  // strict UTF-8 check
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  if (std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end())
    secrets_.push_back(std::move(secret));
  return true;
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
  if (secrets_.empty()) return j;
  switch (j.type()) {
    case nlohmann::json::value_t::string:
      return redact(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::object: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& [k, v] : j.items()) out[redact(k)] = redact(v);
      return out;
    }
    case nlohmann::json::value_t::array: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& v : j) out.push_back(redact(v));
      return out;
    }
    default:
      return j;
  }
}

}  // namespace zn::broker
