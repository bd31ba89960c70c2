// Host names and host globs of a policy: validation and normalisation.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zn::broker {

// A policy's "host": an exact DNS name ("api.github.com"), a wildcard over
// the subdomains of a name ("*.npmjs.org": any name ending in ".npmjs.org",
// not "npmjs.org" itself), or an IP literal or CIDR (L4 rules).
struct HostPattern {
  enum class Kind { kExact, kWildcard, kAddress };
  Kind kind = Kind::kExact;
  std::string name;  // lowercase; for kWildcard the suffix without "*.", for kAddress the text
};

// Lowercases, strips one trailing dot. Returns nullopt (with a reason) for
// anything that is not a valid DNS name: empty labels, labels over 63 bytes,
// names over 253 bytes, characters outside [a-z0-9-_], leading/trailing '-'.
std::optional<std::string> normalize_dns_name(std::string_view name, std::string* why = nullptr);

// Parses a policy host. Refuses over-broad wildcards: "*", "*.com", and
// "*.<second-level>.<cc>" public suffixes such as "*.co.uk"; a wildcard must
// leave at least two labels of which the first is not a public second level.
std::optional<HostPattern> parse_host_pattern(std::string_view text, std::string* why);

bool is_ip_literal(std::string_view text);

}  // namespace zn::broker
