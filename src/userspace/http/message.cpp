#include "userspace/http/message.h"

#include <arpa/inet.h>

#include <array>

namespace zn::http {
namespace {

// Content-Length values above 2^53 are rejected: no legitimate request body
// is that large, and every JSON/JavaScript consumer of the audit log can still
// represent the number exactly.
constexpr uint64_t kMaxContentLength = uint64_t{1} << 53;

struct Failure {
  int status = 0;  // 0: no failure
  const char* reason = nullptr;
  explicit operator bool() const { return status != 0; }
};

constexpr Failure kOk{};

ParseResult failed(Failure f) {
  ParseResult r;
  r.state = ParseState::kError;
  r.error_status = f.status;
  r.error = f.reason;
  return r;
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_ows(char c) { return c == ' ' || c == '\t'; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  return true;
}

// Calls fn(element) for each non-empty element of a #rule list (RFC 9110
// 5.6.1: empty elements are allowed and ignored). Stops at the first false.
template <typename Fn>
bool for_each_list_element(std::string_view value, Fn&& fn) {
  while (true) {
    const size_t comma = value.find(',');
    const std::string_view element = trim_ows(value.substr(0, comma));
    if (!element.empty() && !fn(element)) return false;
    if (comma == std::string_view::npos) return true;
    value.remove_prefix(comma + 1);
  }
}

// "HTTP/" DIGIT "." DIGIT. Sets the minor version; the major must be 1.
Failure parse_version(std::string_view v, int& minor) {
  if (v.size() != 8 || v.substr(0, 5) != "HTTP/" || !is_digit(v[5]) || v[6] != '.' || !is_digit(v[7]))
    return {400, "malformed HTTP version"};
  if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) return {505, "HTTP version not supported"};
  minor = v[7] - '0';
  return kOk;
}

Failure parse_request_line(std::string_view line, RequestHead& out) {
  // The HTTP/2 prior-knowledge preface looks like a request line; name it.
  if (line == "PRI * HTTP/2.0") return {400, "HTTP/2 preface on an HTTP/1.1 connection"};
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return {400, "malformed request line"};
  const std::string_view method = line.substr(0, sp1);
  const std::string_view rest = line.substr(sp1 + 1);
  const size_t sp2 = rest.find(' ');
  if (sp2 == std::string_view::npos) return {400, "malformed request line"};
  const std::string_view target = rest.substr(0, sp2);
  const std::string_view version = rest.substr(sp2 + 1);

  // Uppercase only: methods are case-sensitive, and policy rules name them in
  // uppercase, so "get" must not slip past a rule written for "GET".
  if (method.empty()) return {400, "malformed request line"};
  for (char c : method)
    if (c < 'A' || c > 'Z') return {400, "invalid method"};
  if (Failure f = parse_version(version, out.version_minor)) return f;
  if (target.empty()) return {400, "malformed request line"};
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    // No whitespace, CTL, DEL or non-ASCII; no fragment (never sent by a
    // client, and servers disagree on whether '#' ends the path).
    if (u <= 0x20 || u >= 0x7f || c == '#') return {400, "invalid character in request-target"};
  }
  // Only origin-form: the proxy is transparent, so absolute-form would let
  // the guest name a host other than the one policy looked at, and CONNECT
  // (authority-form) would open an opaque tunnel.
  if (method == "CONNECT") return {400, "CONNECT not supported"};
  if (target[0] != '/') return {400, "request-target is not origin-form"};
  out.method = method;
  out.target = target;
  return kOk;
}

Failure parse_status_line(std::string_view line, ResponseHead& out) {
  if (line.size() < 12 || line[8] != ' ') return {502, "malformed status line"};
  if (Failure f = parse_version(line.substr(0, 8), out.version_minor)) return {502, f.reason};
  const std::string_view code = line.substr(9, 3);
  if (!is_digit(code[0]) || !is_digit(code[1]) || !is_digit(code[2])) return {502, "malformed status code"};
  out.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  if (out.status < 100 || out.status > 599) return {502, "status code out of range"};
  std::string_view reason = line.substr(12);
  if (!reason.empty()) {
    if (reason[0] != ' ') return {502, "malformed status line"};
    reason.remove_prefix(1);
  }
  for (char c : reason) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return {502, "invalid character in reason phrase"};
  }
  out.reason = reason;
  return kOk;
}

// Splits the head into lines, validating each as soon as it is complete, so
// that garbage is refused without waiting for the size limit. Only the first
// max_head_bytes bytes are ever looked at, which is what makes a prefix of
// the input reach the same verdict as the whole. start_line(line) -> Failure.
template <typename StartLineFn>
ParseResult scan_head(std::string_view buf, const HttpLimits& limits, std::vector<Header>& headers,
                      StartLineFn&& start_line) {
  const std::string_view window = buf.substr(0, std::min(buf.size(), limits.max_head_bytes));
  size_t pos = 0;
  bool first = true;
  while (true) {
    const size_t nl = window.find('\n', pos);
    if (nl == std::string_view::npos) {
      // Incomplete line: a CR already followed by something other than LF
      // can never become a valid line ending.
      const size_t cr = window.find('\r', pos);
      if (cr != std::string_view::npos && cr + 1 < window.size()) return failed({400, "bare CR"});
      if (buf.size() >= limits.max_head_bytes) return failed({431, "header section too large"});
      return {};
    }
    if (nl == pos || window[nl - 1] != '\r') return failed({400, "bare LF"});
    const std::string_view line = window.substr(pos, nl - 1 - pos);
    if (line.find('\r') != std::string_view::npos) return failed({400, "bare CR"});
    pos = nl + 1;
    if (first) {
      // No leading empty lines (RFC 9112 2.2 lets servers skip them; being
      // strict costs nothing since clients only send them after a body).
      if (line.empty()) return failed({400, "empty line before start line"});
      if (Failure f = start_line(line)) return failed(f);
      first = false;
      continue;
    }
    if (line.empty()) {
      ParseResult r;
      r.state = ParseState::kDone;
      r.consumed = pos;
      return r;
    }
    if (headers.size() >= limits.max_headers) return failed({431, "too many header fields"});
    Header h;
    if (const char* why = parse_field_line(line, h)) return failed({400, why});
    headers.push_back(std::move(h));
  }
}

bool valid_port(std::string_view p) {
  if (p.empty() || p.size() > 5) return false;
  uint32_t n = 0;
  for (char c : p) {
    if (!is_digit(c)) return false;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  return n <= 65535;
}

}  // namespace

// 1*DIGIT, at most kMaxContentLength. No sign, whitespace or list: a value
// another parser could read differently is exactly what smuggling needs.
bool parse_content_length(std::string_view v, uint64_t& out) {
  if (v.empty()) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (!is_digit(c)) return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
    if (n > kMaxContentLength) return false;
  }
  out = n;
  return true;
}

// uri-host [ ":" port ]: an IPv6 literal in brackets, or a reg-name limited
// to the characters DNS names and IPv4 addresses use. No userinfo, no
// percent-encoding or sub-delims: policy matches host names, and every
// spelling it does not recognise is one it could be tricked by.
bool valid_host(std::string_view v) {
  std::string_view port;
  bool has_port = false;
  if (!v.empty() && v[0] == '[') {
    const size_t close = v.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view literal = v.substr(1, close - 1);
    std::array<char, 64> text{};
    if (literal.empty() || literal.size() >= text.size()) return false;
    literal.copy(text.data(), literal.size());
    in6_addr addr{};
    if (inet_pton(AF_INET6, text.data(), &addr) != 1) return false;  // also refuses zone ids
    const std::string_view rest = v.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return false;
      has_port = true;
      port = rest.substr(1);
    }
  } else {
    const size_t colon = v.find(':');
    const std::string_view name = v.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port = v.substr(colon + 1);
    }
    if (name.empty() || name.size() > 255) return false;
    for (char c : name) {
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.' || c == '_';
      if (!ok) return false;
    }
  }
  return !has_port || valid_port(port);
}

namespace {

struct ConnectionOptions {
  bool close = false;
  bool keep_alive = false;
  bool upgrade = false;
};

Failure parse_connection(const std::vector<Header>& headers, ConnectionOptions& out, int status) {
  for (const Header& h : headers) {
    if (!iequals(h.name, "connection")) continue;
    const bool ok = for_each_list_element(h.value, [&](std::string_view option) {
      if (!is_token(option)) return false;
      if (iequals(option, "close")) out.close = true;
      if (iequals(option, "keep-alive")) out.keep_alive = true;
      if (iequals(option, "upgrade")) out.upgrade = true;
      return true;
    });
    if (!ok) return {status, "malformed Connection header"};
  }
  return kOk;
}

bool keep_alive(int version_minor, const ConnectionOptions& c) {
  if (c.close) return false;
  return version_minor >= 1 || c.keep_alive;
}

// Content-Length / Transfer-Encoding, the heart of request smuggling. Every
// combination where two parsers could disagree on the body length is
// refused. `status` is the error status for the plain-malformed cases (400
// for requests, 502 for responses); for responses, identical duplicate
// Content-Length fields are tolerated (RFC 9110 8.6), for requests not.
Failure parse_framing(const std::vector<Header>& headers, int version_minor, bool is_request, int status,
                      BodyFraming& framing, uint64_t& content_length) {
  const Header* cl = nullptr;
  const Header* te = nullptr;
  for (const Header& h : headers) {
    if (iequals(h.name, "content-length")) {
      uint64_t n = 0;
      if (!parse_content_length(h.value, n)) return {status, "invalid Content-Length"};
      if (cl != nullptr && (is_request || n != content_length)) return {status, "duplicate Content-Length"};
      cl = &h;
      content_length = n;
    } else if (iequals(h.name, "transfer-encoding")) {
      if (te != nullptr) return {status, "duplicate Transfer-Encoding"};
      te = &h;
    }
  }
  if (te != nullptr) {
    if (cl != nullptr) return {status, "both Content-Length and Transfer-Encoding"};
    if (version_minor == 0) return {status, "Transfer-Encoding in HTTP/1.0"};
    if (!iequals(te->value, "chunked")) {
      // A coding list ("gzip, chunked", "chunked, chunked") is valid HTTP but
      // we would have to apply or forward the inner codings; refuse rather
      // than guess. A single unknown coding is "not implemented".
      if (is_request && is_token(te->value)) return {501, "unsupported transfer-coding"};
      return {status, "unsupported Transfer-Encoding"};
    }
    framing = BodyFraming::kChunked;
    content_length = 0;
  } else if (cl != nullptr) {
    framing = BodyFraming::kContentLength;
  } else {
    framing = BodyFraming::kNone;
  }
  return kOk;
}

Failure analyse_request(RequestHead& out) {
  const Header* host = nullptr;
  for (const Header& h : out.headers) {
    if (!iequals(h.name, "host")) continue;
    if (host != nullptr) return {400, "duplicate Host"};
    host = &h;
  }
  if (host == nullptr && out.version_minor == 1) return {400, "missing Host"};
  if (host != nullptr) {
    if (!valid_host(host->value)) return {400, "invalid Host"};
    out.host = host->value;
  }

  if (Failure f = parse_framing(out.headers, out.version_minor, true, 400, out.framing, out.content_length))
    return f;

  ConnectionOptions conn;
  if (Failure f = parse_connection(out.headers, conn, 400)) return f;
  out.keep_alive = keep_alive(out.version_minor, conn);
  out.upgrade = conn.upgrade;

  for (const Header& h : out.headers) {
    if (iequals(h.name, "upgrade")) out.upgrade = true;
    if (!iequals(h.name, "expect")) continue;
    if (!iequals(h.value, "100-continue")) return {417, "unsupported expectation"};
    // RFC 9110 10.1.1: a server must ignore 100-continue from HTTP/1.0.
    out.expect_continue = out.version_minor == 1;
  }
  return kOk;
}

Failure analyse_response(ResponseHead& out, bool request_was_head) {
  if (Failure f = parse_framing(out.headers, out.version_minor, false, 502, out.framing, out.content_length))
    return f;
  ConnectionOptions conn;
  if (Failure f = parse_connection(out.headers, conn, 502)) return f;
  out.keep_alive = keep_alive(out.version_minor, conn);
  // RFC 9112 6.3: these never have a body, whatever the headers say.
  if (request_was_head || out.status < 200 || out.status == 204 || out.status == 304) {
    out.framing = BodyFraming::kNone;
    out.content_length = 0;
  } else if (out.framing == BodyFraming::kNone) {
    out.framing = BodyFraming::kUntilClose;
    out.keep_alive = false;
  }
  return kOk;
}

const std::string* find_header(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers)
    if (iequals(h.name, name)) return &h.value;
  return nullptr;
}

}  // namespace

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_tchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

const char* parse_field_line(std::string_view line, Header& out) {
  // obs-fold: RFC 9112 5.2 allows replacing it with SP; a proxy that does so
  // while the upstream does not is a header-injection vector.
  if (!line.empty() && is_ows(line[0])) return "obsolete line folding";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return "header line without colon";
  const std::string_view name = line.substr(0, colon);
  // Also refuses "Name : value" (RFC 9112 5.1: MUST reject).
  if (!is_token(name)) return "invalid header name";
  const std::string_view value = trim_ows(line.substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return "invalid character in header value";
  }
  out.name = name;
  out.value = value;
  return nullptr;
}

const std::string* RequestHead::find(std::string_view name) const { return find_header(headers, name); }

const std::string* ResponseHead::find(std::string_view name) const { return find_header(headers, name); }

ParseResult parse_request_head(std::string_view buf, const HttpLimits& limits, RequestHead& out) {
  out = RequestHead{};
  ParseResult r = scan_head(buf, limits, out.headers,
                            [&](std::string_view line) { return parse_request_line(line, out); });
  if (r.state != ParseState::kDone) return r;
  if (Failure f = analyse_request(out)) return failed(f);
  return r;
}

ParseResult parse_response_head(std::string_view buf, const HttpLimits& limits, bool request_was_head,
                                ResponseHead& out) {
  out = ResponseHead{};
  ParseResult r = scan_head(buf, limits, out.headers,
                            [&](std::string_view line) { return parse_status_line(line, out); });
  if (r.state == ParseState::kError) {
    // Whatever is wrong with the upstream's answer, the guest gets a 502.
    r.error_status = 502;
    return r;
  }
  if (r.state != ParseState::kDone) return r;
  if (Failure f = analyse_response(out, request_was_head)) return failed(f);
  return r;
}

}  // namespace zn::http
