// Path globs of a policy rule: "*" is one segment, "**" any number (0+).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zn::broker {

class PathPattern {
 public:
  // Must start with '/'; "*" and "**" only as whole segments; at most 1024
  // bytes and 64 segments; no "." or ".." segments, no '%', '\\' or '?'
  // (patterns match normalised paths, which have none of those).
  static std::optional<PathPattern> parse(std::string_view text, std::string* why);

  // path: normalised (percent-decoded unreserved, dot segments removed), no query.
  bool matches(std::string_view path) const;
  const std::string& text() const { return text_; }
  // Segments before the first wildcard, for specificity ordering.
  size_t literal_prefix_segments() const;

 private:
  std::string text_;
  std::vector<std::string> segments_;
};

}  // namespace zn::broker
