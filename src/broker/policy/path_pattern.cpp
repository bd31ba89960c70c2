#include "broker/policy/path_pattern.h"

#include <algorithm>

namespace zn::broker {
namespace {

constexpr size_t kMaxPath = 1024, kMaxSegments = 64;

std::vector<std::string_view> split_segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 1;  // skip the leading '/'
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

// Set-of-states matching, O(pattern x path segments): a guest controls the
// path, so no backtracking that a run of "**" could make exponential.
bool match_segments(const std::vector<std::string>& pat, const std::vector<std::string_view>& segs) {
  const size_t n = pat.size();
  std::vector<char> cur(n + 1, 0), next(n + 1, 0);
  auto close_over_globstars = [&](std::vector<char>& states) {
    for (size_t i = 0; i < n; ++i)
      if (states[i] && pat[i] == "**") states[i + 1] = 1;
  };
  cur[0] = 1;
  close_over_globstars(cur);
  for (std::string_view seg : segs) {
    std::fill(next.begin(), next.end(), 0);
    for (size_t i = 0; i < n; ++i) {
      if (!cur[i]) continue;
      if (pat[i] == "**")
        next[i] = 1;
      else if ((pat[i] == "*" && !seg.empty()) || pat[i] == seg)
        next[i + 1] = 1;
    }
    close_over_globstars(next);
    cur.swap(next);
  }
  return cur[n];
}

}  // namespace

std::optional<PathPattern> PathPattern::parse(std::string_view text, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<PathPattern> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (text.empty() || text.front() != '/') return fail("path must start with '/'");
  if (text.size() > kMaxPath) return fail("path longer than 1024 characters");
  if (text.find_first_of("%\\?#") != std::string_view::npos)
    return fail("path patterns match normalised paths: no '%', '\\', '?' or '#'");
  // What normalise_target refuses or merges away (http_target.h) could
  // never match: such a rule would be dead, so it is an error, not a no-op.
  if (text.find(';') != std::string_view::npos)
    return fail("no ';' (requests with path parameters are refused)");
  if (text.find("//") != std::string_view::npos) return fail("no '//' (requests have merged slashes)");
  for (unsigned char c : text)
    if (c <= 0x20 || c >= 0x7f) return fail("only visible ASCII");
  PathPattern p;
  p.text_ = std::string(text);
  // One segment per '/' (the text starts with one); walked in place rather
  // than split into a vector first.
  p.segments_.reserve(std::count(text.begin(), text.end(), '/'));
  for (size_t start = 1; start <= text.size();) {
    size_t slash = text.find('/', start);
    if (slash == std::string_view::npos) slash = text.size();
    const std::string_view seg = text.substr(start, slash - start);
    if (seg == "." || seg == "..") return fail("no '.' or '..' segments");
    if (!seg.empty() && seg.back() == '.')
      return fail("no segment ending in '.' (requests with one are refused as ambiguous)");
    if (seg.find('*') != std::string_view::npos && seg != "*" && seg != "**")
      return fail("'*' and '**' must be whole segments");
    p.segments_.emplace_back(seg);
    start = slash + 1;
  }
  if (p.segments_.size() > kMaxSegments) return fail("more than 64 segments");
  return p;
}

bool PathPattern::matches(std::string_view path) const {
  if (path.empty() || path.front() != '/') return false;
  return match_segments(segments_, split_segments(path));
}

size_t PathPattern::literal_prefix_segments() const {
  size_t n = 0;
  while (n < segments_.size() && segments_[n] != "*" && segments_[n] != "**") ++n;
  return n;
}

}  // namespace zn::broker
