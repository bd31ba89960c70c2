#include "userspace/http/target.h"

#include <algorithm>
#include <iterator>

#include "userspace/http/message.h"

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

// Code points some backend reads as a character that structures a path.
// Generated (Python 3.11, Unicode 14) as every code point >= U+0080 whose
// NFKC form differs from it and contains one of / \ . ; % ? # or is a single
// space (Windows strips a trailing one):
//   [cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF
//    and (n := unicodedata.normalize('NFKC', chr(cp))) != chr(cp)
//    and (any(c in '/\\.;%?#' for c in n) or n == ' ')]
// plus, by hand: C1 controls U+0080-U+009F, line separators U+2028/U+2029,
// Windows best-fit targets of '\' (U+00A5 in cp932, U+20A9 in cp949,
// U+2216) and '/' (U+2215, U+2044), the solidus operators U+29F5, U+29F8,
// U+29F9, and the ideographic full stops IDNA maps to '.' (U+3002, U+FF61).
// Sorted, disjoint.
struct CodePointRange {
  char32_t first, last;
};
constexpr CodePointRange kAmbiguousCodePoints[] = {
    {0x80, 0xA0},     {0xA5, 0xA5},     {0x37E, 0x37E},   {0x2000, 0x200A}, {0x2024, 0x2026},
    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x2044, 0x2044}, {0x2047, 0x2049}, {0x205F, 0x205F},
    {0x20A9, 0x20A9}, {0x2100, 0x2101}, {0x2105, 0x2106}, {0x2215, 0x2216}, {0x2488, 0x249B},
    {0x29F5, 0x29F5}, {0x29F8, 0x29F9}, {0x3000, 0x3000}, {0x3002, 0x3002}, {0x33C2, 0x33C2},
    {0x33C7, 0x33C7}, {0x33D8, 0x33D8}, {0xFE14, 0xFE14}, {0xFE16, 0xFE16}, {0xFE19, 0xFE19},
    {0xFE30, 0xFE30}, {0xFE52, 0xFE52}, {0xFE54, 0xFE54}, {0xFE56, 0xFE56}, {0xFE5F, 0xFE5F},
    {0xFE68, 0xFE68}, {0xFE6A, 0xFE6A}, {0xFF03, 0xFF03}, {0xFF05, 0xFF05}, {0xFF0E, 0xFF0F},
    {0xFF1B, 0xFF1B}, {0xFF1F, 0xFF1F}, {0xFF3C, 0xFF3C}, {0xFF61, 0xFF61}, {0x1F100, 0x1F100},
};

bool is_ambiguous_code_point(char32_t cp) {
  const auto* it = std::upper_bound(std::begin(kAmbiguousCodePoints), std::end(kAmbiguousCodePoints), cp,
                                    [](char32_t v, const CodePointRange& r) { return v < r.first; });
  return it != std::begin(kAmbiguousCodePoints) && cp <= std::prev(it)->last;
}

// One byte of a canonical path: an escape (always well formed there) or a
// raw character.
struct Unit {
  unsigned char byte;
  size_t width;  // 3 for an escape, else 1
};
Unit unit_at(std::string_view s, size_t i) {
  if (s[i] != '%') return {static_cast<unsigned char>(s[i]), 1};
  return {static_cast<unsigned char>(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2])), 3};
}

// Percent-decodes unreserved characters and uppercases the hex of every
// other escape. Refuses what separates segments or ends strings on some
// backends and not others. Returns a reason on failure.
const char* canonicalise_escapes(std::string_view in, std::string& out) {
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c != '%') {
      if (!is_allowed_raw(c)) return "invalid character in path";
      if (c == ';') return "path parameter (';') in path";
      out.push_back(static_cast<char>(c));
      continue;
    }
    // "%u002e" (IIS) fails here too: 'u' is not a hex digit.
    const int hi = i + 1 < in.size() ? hex_value(in[i + 1]) : -1;
    const int lo = i + 2 < in.size() ? hex_value(in[i + 2]) : -1;
    if (hi < 0 || lo < 0) return "malformed percent-escape";
    const auto decoded = static_cast<unsigned char>(hi << 4 | lo);
    if (decoded == '/' || decoded == '\\') return "encoded path separator";
    if (decoded == 0) return "encoded NUL";
    if (decoded < 0x20 || decoded == 0x7f) return "encoded control character";
    if (decoded == ';') return "encoded path parameter (%3B)";
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

// A second decoding pass anywhere behind us would turn "%25" + "2e" into an
// escape again. Checked on the canonical form, after unreserved escapes are
// decoded, so "%25%32%65" counts as "%252e". "%25" before anything else (a
// literal '%') is kept.
const char* check_double_encoding(std::string_view canonical) {
  for (size_t pos = canonical.find("%25"); pos != std::string_view::npos;
       pos = canonical.find("%25", pos + 3)) {
    const std::string_view rest = canonical.substr(pos + 3);
    if (!rest.empty() && (rest[0] == 'u' || rest[0] == 'U')) return "double-encoded escape (%25u)";
    if (rest.size() >= 2 && hex_value(rest[0]) >= 0 && hex_value(rest[1]) >= 0)
      return "double-encoded escape (%25)";
  }
  return nullptr;
}

// The decoded bytes must be well-formed UTF-8 (RFC 3629 table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF), and no code point
// may be one that some backend folds into path structure.
const char* check_unicode(std::string_view canonical) {
  size_t i = 0;
  while (i < canonical.size()) {
    const Unit lead = unit_at(canonical, i);
    i += lead.width;
    if (lead.byte < 0x80) continue;  // ASCII; controls were refused already
    size_t more;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the first continuation byte
    char32_t cp;
    if (lead.byte >= 0xC2 && lead.byte <= 0xDF) {
      more = 1, cp = lead.byte & 0x1F;
    } else if (lead.byte >= 0xE0 && lead.byte <= 0xEF) {
      more = 2, cp = lead.byte & 0x0F;
      if (lead.byte == 0xE0) lo = 0xA0;  // overlong below U+0800
      if (lead.byte == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (lead.byte >= 0xF0 && lead.byte <= 0xF4) {
      more = 3, cp = lead.byte & 0x07;
      if (lead.byte == 0xF0) lo = 0x90;  // overlong below U+10000
      if (lead.byte == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return "invalid UTF-8 in path";  // lone continuation, C0/C1 overlong lead, F5-FF
    }
    for (size_t k = 0; k < more; ++k) {
      if (i >= canonical.size() || canonical[i] != '%') return "invalid UTF-8 in path";
      const Unit cont = unit_at(canonical, i);
      if (cont.byte < (k == 0 ? lo : 0x80) || cont.byte > (k == 0 ? hi : 0xBF))
        return "invalid UTF-8 in path";
      cp = cp << 6 | (cont.byte & 0x3F);
      i += cont.width;
    }
    if (is_ambiguous_code_point(cp)) return "ambiguous Unicode character in path";
  }
  return nullptr;
}

// "//" -> "/": what merging backends do before they resolve dot segments.
std::string collapse_slashes(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in)
    if (c != '/' || out.empty() || out.back() != '/') out.push_back(c);
  return out;
}

// Windows strips trailing dots and spaces from each name, so "admin." is
// "admin" and "..%20" is "..". Any segment but "." and ".." that ends in
// either, or that is only dots, spaces and '+' (a space to form decoders)
// around a dot, is refused. Every segment is checked, also those a ".."
// removes later: ". ." must not count as a name that ".." can pop.
const char* check_segments(std::string_view path) {
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view seg = path.substr(start, end - start);
    start = end + 1;
    if (seg.empty() || seg == "." || seg == "..") continue;
    bool only_blanks_and_dots = true, has_dot = false;
    unsigned char last = 0;
    for (size_t i = 0; i < seg.size();) {
      const Unit u = unit_at(seg, i);
      i += u.width;
      last = u.byte;
      has_dot = has_dot || u.byte == '.';
      if (u.byte != '.' && u.byte != ' ' && u.byte != '+') only_blanks_and_dots = false;
    }
    if (last == '.' || last == ' ') return "segment ends in '.' or space";
    if (only_blanks_and_dots && has_dot) return "segment of dots and spaces";
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
    } else if (in.starts_with("./")) {  // NOLINT(bugprone-branch-clone): the RFC lists each case apart
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
    // business, and policy does not match on it (';' there is fine).
    const std::string_view query = origin_form.substr(qmark + 1);
    for (char c : query)
      if (!is_allowed_raw(static_cast<unsigned char>(c)) && c != '\\')
        return reject(why, "invalid character in query");
    result.query = query;
    result.has_query = true;
  }

  std::string canonical;
  if (const char* reason = canonicalise_escapes(path, canonical)) return reject(why, reason);
  if (const char* reason = check_double_encoding(canonical)) return reject(why, reason);
  if (const char* reason = check_unicode(canonical)) return reject(why, reason);
  // Slashes are merged before dots are resolved, as nginx does: a merging
  // backend reads "/a//../b" as "/b", RFC 3986 alone as "/a/b". Forwarding
  // the merged result leaves nothing for either kind of backend to read
  // differently.
  canonical = collapse_slashes(canonical);
  if (const char* reason = check_segments(canonical)) return reject(why, reason);
  // Dot segments are removed after decoding, so "%2e%2e" counts as "..".
  result.path = remove_dot_segments(canonical);
  return result;
}

}  // namespace zn::http
