// The policy model: what a session may reach (DESIGN.md "Policy"). Built only
// by parse_policy(), so every instance is valid.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/policy/host_pattern.h"
#include "broker/policy/path_pattern.h"
#include "broker/secrets/secret.h"

namespace zn::broker {

enum class RuleAction { kAllow, kAsk };

// Where a rule's identity goes in the forwarded request ("inject" in the
// rule): a header (the guest's own copy removed), its value the prefix and
// the credential, or a query parameter (the guest's own removed). Basic
// resources always go as "Authorization: Basic base64(user:password)".
struct Placement {
  enum class Kind { kHeader, kQuery };
  Kind kind = Kind::kHeader;
  std::string name = "Authorization";  // header name, or query parameter name
  std::string prefix = "Bearer ";      // header only
};

struct AllowRule {
  size_t index = 0;  // position in policy.allow, for reasons and audit
  HostPattern host;
  std::vector<std::string> methods;     // uppercase; empty = any
  std::vector<PathPattern> paths;       // empty = any
  std::optional<std::string> identity;  // resource name: "cap:stripe" -> "stripe"
  // "identity": "jwt": a token zerod mints per request, bound to the
  // upstream host, the method and the path (broker/identity/jwt_minter.h).
  bool mint_jwt = false;
  Placement placement;  // meaningful with an identity
  RuleAction action = RuleAction::kAllow;
  std::optional<uint16_t> port;  // set: an L4 rule (raw TCP to host:port)
  // "websocket": true: the rule also allows a WebSocket handshake that its
  // host, method (GET) and paths allow; without it, a handshake is refused.
  bool websocket = false;

  bool is_l4() const { return port.has_value(); }
  bool injects_identity() const { return identity.has_value() || mint_jwt; }
  // Rules with request conditions need TLS terminated to be enforced.
  bool needs_interception() const {
    return !methods.empty() || !paths.empty() || injects_identity() || action == RuleAction::kAsk ||
           websocket;
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

// A resource's kind types its fields ("kind" in the resource):
//   kLegacy (no "kind"): string fields, "accessToken" the credential;
//   kToken: "token";  kBasic: "user" and "password".
enum class ResourceKind { kLegacy, kToken, kBasic };

// Fields of a resource that are not secret: never sealed, read as given.
bool is_resource_metadata(std::string_view field);

// Secret material of a session (tokens, keys). Never printed or logged.
struct Resource {
  ResourceKind kind = ResourceKind::kLegacy;
  std::map<std::string, Secret> fields;  // guarded pages; print as <redacted>
  // "placeholder": the environment variable the guest gets a random stand-in
  // for this resource's credential in (session show's guest_env); the proxy
  // swaps it for the credential only in requests a rule naming this
  // resource allowed.
  std::optional<std::string> placeholder_env;

  // The credential a rule injects and a placeholder stands for: accessToken,
  // token or password; null if absent.
  const Secret* credential() const;
};

// A storage capability the session's code reaches by an unforgeable handle
// (issue 13): "caps": {"data": {"kind": "kv", "mode": "rw"}, ...}. The
// backing store is one zerod's config names ("store"; "db" for sql), never
// a path the policy or the guest gives.
enum class CapabilityKind { kKv, kBlob, kSql, kQueue };
struct Capability {
  CapabilityKind kind = CapabilityKind::kKv;
  bool read_only = false;         // "mode": "ro"; the parser makes it the default but for queues
  std::string store = "default";  // the operator's name for the backing store
};
std::string_view capability_kind_name(CapabilityKind kind);

struct Policy {
  std::vector<AllowRule> allow;
  std::vector<DenyRule> deny;
  std::optional<RateLimit> rate;
  std::map<std::string, Resource> resources;
  // Fake credentials planted in the guest: any appearance in egress (header,
  // query, body, SNI, DNS name) is blocked and raises secret:canary.
  std::vector<std::string> canaries;
  std::map<std::string, Capability> caps;  // by name ([a-z0-9_-], 1-64)
};

}  // namespace zn::broker
