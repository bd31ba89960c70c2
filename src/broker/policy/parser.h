// Strict parsing of a session policy document. A bad document is rejected
// whole with the JSON path of its first error.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "broker/policy/policy.h"

namespace zn::broker {

class PolicyError : public std::runtime_error {
 public:
  PolicyError(std::string path, const std::string& message)
      : std::runtime_error(path + ": " + message), path_(std::move(path)) {}
  // "$.policy.allow[2].host"
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct PolicyLimits {
  size_t max_document_bytes = 4 << 20;
  size_t max_allow_rules = 20000;
  size_t max_deny_rules = 20000;
  size_t max_methods = 9;
  size_t max_paths_per_rule = 64;
  size_t max_resources = 256;
  size_t max_resource_fields = 32;
  size_t max_canaries = 64;
  size_t max_caps = 64;
  size_t max_secret_bytes = 16384;
  uint32_t max_rate = 100000;
};

// Makes a resource field's Secret from its text in the document: the value
// itself (a policy as given), or an envelope to unseal (a policy restored
// from the state file). Throws std::runtime_error to refuse the value; its
// message (never the value) is reported at the field's path.
using SecretReader =
    std::function<Secret(const std::string& resource, const std::string& field, const std::string& text)>;

// Throws PolicyError. Resource values are taken as they are.
Policy parse_policy(std::string_view json_text, const PolicyLimits& limits = {});
// The same, each resource value made by `read` (a value read may be longer
// than max_secret_bytes by an envelope's overhead; the Secret may not).
Policy parse_policy(std::string_view json_text, const SecretReader& read, const PolicyLimits& limits = {});

}  // namespace zn::broker
