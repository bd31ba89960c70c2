// Request-target normalisation: one canonical spelling of an origin-form
// target, used both to match policy path rules and as the target forwarded
// upstream. Matching and forwarding the same string is what keeps "/admin"
// from being reached as "/repos/../admin" or "/%61dmin" past a rule that
// only allows "/repos/**".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zn::http {

struct NormalisedTarget {
  // Starts with '/'; unreserved characters decoded, other escapes with
  // uppercase hex, dot segments removed ("//" kept as is).
  std::string path;
  std::string query;  // verbatim, without the '?'; empty if none
  bool has_query = false;
};

// nullopt (reason in *why) for targets that cannot be normalised safely:
// not starting with '/', malformed escapes, an encoded '/', '\' or NUL
// (servers disagree on whether these separate segments or end strings), a
// raw '\', '#', CTL, space or non-ASCII byte in the path or query.
std::optional<NormalisedTarget> normalise_target(std::string_view origin_form, std::string* why = nullptr);

}  // namespace zn::http
