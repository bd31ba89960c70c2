// Request-target normalisation: one canonical spelling of an origin-form
// target, used both to match policy path rules and as the target forwarded
// upstream. Matching and forwarding the same string is what keeps "/admin"
// from being reached as "/repos/../admin" or "/%61dmin" past a rule that
// only allows "/repos/**".
//
// That is only enough if the forwarded path is also a fixed point of every
// mainstream backend's own routing: a backend that reads it differently
// routes somewhere the policy never looked (issue 9: "/v1/..;/admin" matched
// "/v1/**" and Tomcat routed it to "/admin" with the injected identity). So
// each interpretation on which backends disagree is either normalised the
// way all of them would read the result, or refused as ambiguous (400):
//
// interpretation                  | who reads it differently                       | we
// --------------------------------+------------------------------------------------+------------------------------
// dot segments, also as %2e       | all resolve them (RFC 3986 5.2.4); some decode | decode %2e, remove dot
//                                 | %2e first (Tomcat, nginx), some do not         | segments, forward the
//                                 result
// unreserved escapes, hex case    | equivalent everywhere (RFC 3986 6.2.2)         | decode / uppercase
// merged slashes "//"             | nginx merge_slashes, Apache >= 2.4.39, Tomcat, | collapse BEFORE removing
// dot
//                                 | Go ServeMux merge; Node, S3 keep them; merge   | segments (as nginx
//                                 does), and | vs dot order decides "/a//../b"                | forward the
//                                 collapsed path
// ';' path parameters, raw        | Tomcat, Jetty, Spring, Undertow strip ";..."   | 400 anywhere in the path
//                                 | per segment before dots ("..;" is ".."); nginx,|
//                                 | Apache, Go, Node keep ';' literal              |
// ';' as %3B                      | Jetty (ambiguous path parameter), frameworks   | 400
//                                 | that decode before stripping parameters        |
// '\' raw or %5C                  | IIS, ASP.NET, Windows file APIs, Tomcat with   | 400
//                                 | ALLOW_BACKSLASH, WHATWG parsers: a separator   |
// '/' as %2F                      | Apache AllowEncodedSlashes, Tomcat             | 400
//                                 | ALLOW_ENCODED_SLASH, decoding routers          |
// %uXXXX escapes                  | IIS, classic ASP decode them; RFC 3986 has none| 400 (malformed escape)
// double encoding %25XX, %25uXXXX | IIS double decoding, apps and chained proxies  | 400 when %25 precedes
// two hex
//                                 | that decode again ("%252e%252e" is "..")       | digits or 'u', also when
//                                 built |                                                | from escapes
//                                 ("%25%32%65")
// NUL, C0 controls, DEL as escape | truncation (C strings), WHATWG tab/CR/LF       | 400
//                                 | stripping, trimming, header/log injection      |
// invalid UTF-8 in escapes:       | lenient decoders (old IIS, Java modified       | 400: decoded bytes must
// be overlong (%C0%AE, %E0%80%AE,    | UTF-8, Latin-1 fallbacks) turn %C0%AE into '.' | well-formed UTF-8
// (RFC 3629) %C0%AF), lone continuation,     | and %C0%AF into '/'                            | surrogates, >
// U+10FFFF, F5-FF |                                                | code points that NFKC or a      | apps
// normalising to NFKC (Python, Java         | 400 for the listed code points Windows best-fit code page map
// | Normalizer), Windows ANSI APIs (best fit:      | (kAmbiguousCodePoints: NFKC onto / \ . ; % ? # or a
// space   | U+FF0F '/', U+2215 '/', U+00A5 '\' in cp932),  | to one of those, plus known (fullwidth, small
// forms, U+2215,| IDNA-style full stops (U+3002)                 | best-fit and full-stop forms), U+2044,
// NBSP...), C1, U+2028/9  |                                                | C1 controls, line separators
// trailing '.' or ' ' in a segment| Windows, IIS, NTFS strip them: "admin." and    | 400 for any segment but
// "." and
// ("admin.", "..%20", "...")      | "admin%20" are "admin", ".. " is ".."          | ".." ending in '.' or
// space,
//                                 | ('+' is a space to form decoders)              | or made only of . +
//                                 space
// case ("/V1/x" vs "/v1/x")       | IIS, Windows, macOS file systems, ASP.NET      | unchanged; see below
//                                 | routing fold case; most others do not          |
// '?' as %3F, '#' as %23          | decoding routers could split on them           | kept encoded: never a
// query
//
// Case is left alone because it cannot widen what a policy allows: rules only
// allow, match case-sensitively, and a case-folding backend maps the matched
// spelling to the resource the rule spelled, so folding only makes more
// spellings reach a resource, each of them refused unless a rule spells it.
// Unicode case mappings yield letters, never a separator or a dot.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zn::http {

struct NormalisedTarget {
  // Starts with '/'; unreserved characters decoded, other escapes with
  // uppercase hex, no "//", dot segments removed.
  std::string path;
  std::string query;  // verbatim, without the '?'; empty if none
  bool has_query = false;
};

// nullopt (reason in *why) for targets that cannot be normalised safely:
// not starting with '/', malformed escapes, a raw '\', '#', CTL, space or
// non-ASCII byte in the path or query, and every path the table above
// refuses as ambiguous.
std::optional<NormalisedTarget> normalise_target(std::string_view origin_form, std::string* why = nullptr);

}  // namespace zn::http
