#include "broker/session/cap_handles.h"

#include "broker/session/random_token.h"

namespace zn::broker {

std::string new_cap_handle() { return random_token(kCapHandlePrefix, 32); }

std::map<std::string, std::string> assign_cap_handles(const Policy& policy,
                                                      const std::map<std::string, std::string>& previous) {
  std::map<std::string, std::string> out;
  for (const auto& [name, cap] : policy.caps) {
    auto kept = previous.find(name);
    out[name] = kept != previous.end() ? kept->second : new_cap_handle();
  }
  return out;
}

std::string cap_env_name(const std::string& name) {
  std::string out = "ZN_CAP_";
  for (char c : name) out.push_back(c == '-' ? '_' : (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
  return out;
}

}  // namespace zn::broker
