#include "userspace/http_target.h"

#include "userspace/http1_message.h"

namespace zn::http {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

// RFC 3986 2.3: the only characters whose escapes are equivalent to the
// characters themselves, so decoding them never changes the meaning.
bool is_unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

// Raw bytes allowed anywhere in the target: visible ASCII except '\' (some
// servers treat it as '/') and '#' (a fragment never belongs to a request).
bool is_allowed_raw(unsigned char c) { return c > 0x20 && c < 0x7f && c != '\\' && c != '#'; }

std::nullopt_t reject(std::string* why, const char* reason) {
  if (why != nullptr) *why = reason;
  return std::nullopt;
}

// Percent-decodes unreserved characters and uppercases the hex of every
// other escape. Returns a reason on failure.
const char* canonicalise_escapes(std::string_view in, std::string& out) {
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c != '%') {
      if (!is_allowed_raw(c)) return "invalid character in path";
      out.push_back(static_cast<char>(c));
      continue;
    }
    const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return "malformed percent-escape";
    const auto decoded = static_cast<unsigned char>(hi << 4 | lo);
    if (decoded == '/' || decoded == '\\') return "encoded path separator";
    if (decoded == 0) return "encoded NUL";
    if (is_unreserved(decoded)) {
      out.push_back(static_cast<char>(decoded));
    } else {
      out.push_back('%');
      out.push_back(kHex[hi]);
      out.push_back(kHex[lo]);
    }
    i += 2;
  }
  return nullptr;
}

// Removes the last segment (and its preceding '/') from out.
void pop_segment(std::string& out) {
  const size_t slash = out.rfind('/');
  out.erase(slash == std::string::npos ? 0 : slash);
}

// RFC 3986 5.2.4 remove_dot_segments, for a path starting with '/'.
std::string remove_dot_segments(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  while (!in.empty()) {
    if (in.starts_with("../")) {
      in.remove_prefix(3);
    } else if (in.starts_with("./")) {
      in.remove_prefix(2);
    } else if (in.starts_with("/./")) {
      in.remove_prefix(2);  // leaves "/"
    } else if (in == "/.") {
      in = "/";
    } else if (in.starts_with("/../")) {
      in.remove_prefix(3);  // leaves "/"
      pop_segment(out);
    } else if (in == "/..") {
      in = "/";
      pop_segment(out);
    } else if (in == "." || in == "..") {
      in = {};
    } else {
      // Move the first segment (with its leading '/', if any) to the output.
      const size_t next = in.find('/', in[0] == '/' ? 1 : 0);
      const size_t len = next == std::string_view::npos ? in.size() : next;
      out.append(in.substr(0, len));
      in.remove_prefix(len);
    }
  }
  return out;
}

}  // namespace

std::optional<NormalisedTarget> normalise_target(std::string_view origin_form, std::string* why) {
  const size_t qmark = origin_form.find('?');
  const std::string_view path = origin_form.substr(0, qmark);
  if (path.empty() || path[0] != '/') return reject(why, "path does not start with '/'");

  NormalisedTarget result;
  if (qmark != std::string_view::npos) {
    // The query is forwarded verbatim: its encoding is the application's
    // business, and policy does not match on it.
    const std::string_view query = origin_form.substr(qmark + 1);
    for (char c : query)
      if (!is_allowed_raw(static_cast<unsigned char>(c)) && c != '\\')
        return reject(why, "invalid character in query");
    result.query = query;
    result.has_query = true;
  }

  std::string canonical;
  if (const char* reason = canonicalise_escapes(path, canonical)) return reject(why, reason);
  // Dot segments are removed after decoding, so "%2e%2e" counts as "..".
  result.path = remove_dot_segments(canonical);
  return result;
}

}  // namespace zn::http
