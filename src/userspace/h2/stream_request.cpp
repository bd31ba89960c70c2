#include "userspace/h2/stream_request.h"

#include <optional>
#include <utility>

#include "userspace/h2/fields.h"

namespace zn::h2 {
namespace {

StreamRequestResult refuse(int status, std::string reason) {
  StreamRequestResult r;
  r.status = status;
  r.reason = std::move(reason);
  return r;
}

// As the HTTP/1.1 request line has it: upper-case only, so that "get" cannot
// slip past a rule written for "GET".
bool valid_method(std::string_view method) {
  if (method.empty()) return false;
  for (char c : method)
    if (c < 'A' || c > 'Z') return false;
  return true;
}

// The request-target rules of the HTTP/1.1 request line: origin-form, no
// whitespace, CTL, DEL, non-ASCII or fragment. ("*" for OPTIONS is refused
// there too.)
bool valid_path(std::string_view path) {
  if (path.empty() || path[0] != '/') return false;
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '#') return false;
  }
  return true;
}

struct Refusal {
  int status = 0;
  const char* reason = nullptr;
};

// Whether the authority names the host the TLS connection was opened for.
std::optional<Refusal> check_authority(std::string_view authority, std::string_view sni, uint16_t port) {
  if (authority.empty()) return Refusal{400, "no :authority"};
  if (!http::valid_host(authority)) return Refusal{400, "malformed :authority"};
  // An SNI is never an IP address (RFC 6066 3).
  if (authority[0] == '[') return Refusal{421, ":authority is an IP literal, not the SNI"};
  const size_t colon = authority.find(':');
  if (colon != std::string_view::npos && authority.substr(colon + 1) != std::to_string(port))
    return Refusal{421, ":authority names another port"};
  if (sni.empty() || !http::iequals(authority.substr(0, colon), sni))
    return Refusal{421, ":authority is not the SNI"};
  return std::nullopt;
}

// A regular field as the HTTP/1.1 field-line parser would accept it
// (message.h: a token name, no CTL but HTAB, no DEL in the value), plus
// HTTP/2's own rules (RFC 9113 8.2.1): a lower-case name and no whitespace
// at either end of the value, which an HTTP/1.1 hop would trim, giving the
// value two readings.
const char* field_error(const Field& f) {
  if (f.name.empty()) return "empty field name";
  for (char c : f.name) {
    if (!http::is_tchar(static_cast<unsigned char>(c))) return "field name is not a token";
    if (c >= 'A' && c <= 'Z') return "upper-case field name";
  }
  for (char c : f.value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return "control character in a field value";
  }
  const auto ws = [](char c) { return c == ' ' || c == '\t'; };
  if (!f.value.empty() && (ws(f.value.front()) || ws(f.value.back())))
    return "whitespace around a field value";
  return nullptr;
}

// The size of the head as HTTP/1.1 would carry it: request line, one
// "name: value" CRLF per field, the empty line.
size_t http1_head_bytes(const http::RequestHead& head) {
  size_t n = head.method.size() + 1 + head.target.size() + sizeof(" HTTP/1.1\r\n") - 1;
  for (const http::Header& h : head.headers) n += h.name.size() + 2 + h.value.size() + 2;
  return n + 2;
}

}  // namespace

StreamRequestResult to_request_head(const RequestHeaders& request, std::string_view sni,
                                    const http::HttpLimits& limits, uint16_t port) {
  StreamRequestResult r;
  const bool connect = request.method == "CONNECT";
  if (connect && request.protocol.empty()) return refuse(405, "CONNECT refused");
  if (!request.protocol.empty()) {
    if (!connect) return refuse(400, ":protocol without CONNECT");
    // The only tunnel the proxy knows how to hold to per-request policy.
    if (request.protocol != "websocket") return refuse(501, "extended CONNECT protocol not supported");
    r.websocket = true;
  }
  if (!valid_method(request.method)) return refuse(400, "invalid method");
  if (request.scheme != "https") return refuse(400, ":scheme is not https");
  if (!valid_path(request.path)) return refuse(400, ":path is not origin-form");
  // Without :authority the codec reads Host as the authority (RFC 9113
  // 8.3.1); a block built another way gets the same reading.
  std::string_view authority = request.authority;
  for (const Field& f : request.headers) {
    if (!authority.empty()) break;
    if (f.name == "host") authority = f.value;
  }
  if (std::optional<Refusal> bad = check_authority(authority, sni, port))
    return refuse(bad->status, bad->reason);

  http::RequestHead& head = r.head;
  head.method = r.websocket ? "GET" : request.method;
  head.target = request.path;
  head.version_minor = 1;
  head.host = authority;
  head.keep_alive = true;
  head.upgrade = r.websocket;
  head.headers.reserve(request.headers.size() + 1);
  head.headers.push_back({"host", std::string(authority)});
  std::optional<size_t> cookie;  // index of the joined cookie field
  bool host_seen = false;
  bool length_seen = false;
  for (const Field& f : request.headers) {
    if (const char* why = field_error(f)) return refuse(400, why);
    if (is_connection_specific(f.name, f.value)) return refuse(400, "connection-specific field");
    if (f.name == "host") {
      // Beside :authority, Host must name the same host (RFC 9113 8.3.1);
      // it is carried once, as the first field.
      if (host_seen) return refuse(400, "more than one host field");
      if (!http::iequals(f.value, authority)) return refuse(400, ":authority and host differ");
      host_seen = true;
      continue;
    }
    if (f.name == "content-length") {
      // One value, as for an HTTP/1.1 request: even equal duplicates are
      // refused.
      if (length_seen) return refuse(400, "duplicate content-length");
      if (!http::parse_content_length(f.value, head.content_length))
        return refuse(400, "invalid content-length");
      length_seen = true;
    } else if (f.name == "expect") {
      if (!http::iequals(f.value, "100-continue")) return refuse(417, "unsupported expectation");
      head.expect_continue = !request.end_stream;  // nothing to wait for otherwise
    }
    if (f.name == "cookie") {
      if (f.value.empty()) continue;
      if (cookie) {
        head.headers[*cookie].value.append("; ").append(f.value);
        continue;
      }
      cookie = head.headers.size();
    }
    head.headers.push_back(f);
  }

  if (r.websocket) {
    // The fields that make the GET a WebSocket handshake (HTTP/2 forbids
    // them on the stream); the key is the proxy's to make.
    head.headers.push_back({"upgrade", "websocket"});
    head.headers.push_back({"connection", "upgrade"});
  }
  if (length_seen) {
    if (r.websocket) return refuse(400, "content-length on extended CONNECT");
    if (request.end_stream && head.content_length != 0) return refuse(400, "content-length without a body");
    head.framing = http::BodyFraming::kContentLength;
  } else if (!request.end_stream && !r.websocket) {
    head.framing = http::BodyFraming::kChunked;
  }

  if (head.headers.size() > limits.max_headers) return refuse(431, "too many header fields");
  if (http1_head_bytes(head) > limits.max_head_bytes) return refuse(431, "header section too large");
  return r;
}

std::string request_text(const http::RequestHead& head) {
  std::string out = head.method + " " + head.target + " HTTP/1.1\r\n";
  for (const http::Header& h : head.headers) out += h.name + ": " + h.value + "\r\n";
  if (head.framing == http::BodyFraming::kChunked) out += "transfer-encoding: chunked\r\n";
  return out + "\r\n";
}

}  // namespace zn::h2
