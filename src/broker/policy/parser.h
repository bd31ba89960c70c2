// Strict parsing of a session policy document. A bad document is rejected
// whole with the JSON path of its first error.
#pragma once

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
  size_t max_secret_bytes = 16384;
  uint32_t max_rate = 100000;
};

// Throws PolicyError.
Policy parse_policy(std::string_view json_text, const PolicyLimits& limits = {});

}  // namespace zn::broker
