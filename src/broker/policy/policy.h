// The policy model: what a session may reach (DESIGN.md "Policy"). Built only
// by parse_policy(), so every instance is valid.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/policy/host_pattern.h"
#include "broker/policy/path_pattern.h"
#include "broker/secrets/secret.h"

namespace zn::broker {

enum class RuleAction { kAllow, kAsk };

struct AllowRule {
  size_t index = 0;  // position in policy.allow, for reasons and audit
  HostPattern host;
  std::vector<std::string> methods;     // uppercase; empty = any
  std::vector<PathPattern> paths;       // empty = any
  std::optional<std::string> identity;  // resource name: "cap:stripe" -> "stripe"
  // "identity": "jwt": a token zerod mints per request, bound to the
  // upstream host, the method and the path (broker/identity/jwt_minter.h).
  bool mint_jwt = false;
  RuleAction action = RuleAction::kAllow;
  std::optional<uint16_t> port;  // set: an L4 rule (raw TCP to host:port)

  bool is_l4() const { return port.has_value(); }
  bool injects_identity() const { return identity.has_value() || mint_jwt; }
  // Rules with request conditions need TLS terminated to be enforced.
  bool needs_interception() const {
    return !methods.empty() || !paths.empty() || injects_identity() || action == RuleAction::kAsk;
  }
};

struct DenyRule {
  size_t index = 0;
  HostPattern host;
};

struct RateLimit {
  uint32_t burst = 0;
  uint32_t per_second = 0;
};

// Secret material of a session (tokens, keys). Never printed or logged.
struct Resource {
  std::map<std::string, Secret> fields;  // guarded pages; print as <redacted>
};

struct Policy {
  std::vector<AllowRule> allow;
  std::vector<DenyRule> deny;
  std::optional<RateLimit> rate;
  std::map<std::string, Resource> resources;
};

}  // namespace zn::broker
