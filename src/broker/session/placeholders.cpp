#include "broker/session/placeholders.h"

#include "broker/session/random_token.h"

namespace zn::broker {

std::string new_placeholder() { return random_token(kPlaceholderPrefix, 32); }

std::map<std::string, std::string> assign_placeholders(const Policy& policy,
                                                       const std::map<std::string, std::string>& previous) {
  std::map<std::string, std::string> out;
  for (const auto& [name, resource] : policy.resources) {
    if (!resource.placeholder_env) continue;
    auto kept = previous.find(name);
    out[name] = kept != previous.end() ? kept->second : new_placeholder();
  }
  return out;
}

}  // namespace zn::broker
