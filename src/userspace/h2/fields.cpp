#include "userspace/h2/fields.h"

#include <cctype>
#include <utility>

namespace zn::h2 {

namespace {

std::string lower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool is_connection_specific(const std::string& name, const std::string& value) {
  if (name == "te") return !http::iequals(value, "trailers");
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" ||
         name == "transfer-encoding" || name == "upgrade";
}

const char* read_request_block(std::vector<Field>&& block, RequestHeaders& out) {
  const std::string* host = nullptr;
  for (Field& f : block) {
    if (f.name.empty()) return "empty field name";
    if (f.name[0] != ':') {
      if (f.name == "host") {
        if (host != nullptr) return "more than one host field";
        host = &f.value;
        continue;  // carried as authority
      }
      out.headers.push_back(std::move(f));
      continue;
    }
    if (f.name == ":method") {
      out.method = std::move(f.value);
    } else if (f.name == ":scheme") {
      out.scheme = std::move(f.value);
    } else if (f.name == ":authority") {
      out.authority = std::move(f.value);
    } else if (f.name == ":path") {
      out.path = std::move(f.value);
    } else if (f.name == ":protocol") {
      out.protocol = std::move(f.value);
    } else {
      return "unknown pseudo-header";  // nghttp2 rejects these first; kept in case it changes
    }
  }
  if (out.method.empty()) return "no :method";
  if (host != nullptr) {
    // RFC 9113 8.3.1: Host naming another entity than :authority is
    // malformed. Hosts compare case-insensitively.
    if (out.authority.empty()) {
      out.authority = *host;
    } else if (!http::iequals(out.authority, *host)) {
      return ":authority and host differ";
    }
  }
  const bool plain_connect = out.method == "CONNECT" && out.protocol.empty();
  if (plain_connect) {
    if (!out.scheme.empty() || !out.path.empty()) return "CONNECT with :scheme or :path";
    if (out.authority.empty()) return "CONNECT without :authority";
    return nullptr;
  }
  if (out.scheme.empty() || out.path.empty()) return "no :scheme or :path";
  // Origin form, or "*" for OPTIONS only (RFC 9113 8.3.1).
  if (out.path[0] != '/' && !(out.path == "*" && out.method == "OPTIONS")) return ":path not in origin form";
  return nullptr;
}

int read_response_block(std::vector<Field>&& block, std::vector<Field>& headers) {
  int status = 0;
  for (Field& f : block) {
    if (f.name == ":status") {
      if (f.value.size() != 3) return 0;
      for (char c : f.value)
        if (c < '0' || c > '9') return 0;
      status = std::stoi(f.value);
    } else if (!f.name.empty() && f.name[0] != ':') {
      headers.push_back(std::move(f));
    }
  }
  return status;
}

const char* to_h2_fields(const std::vector<Field>& in, std::vector<Field>& out) {
  out.clear();
  out.reserve(in.size());
  for (const Field& f : in) {
    if (f.name.empty()) return "empty field name";
    for (char c : f.name)
      if (!http::is_tchar(static_cast<unsigned char>(c))) return "field name is not a token";
    for (char c : f.value)
      if (c == '\r' || c == '\n' || c == '\0') return "field value with CR, LF or NUL";
    std::string name = lower(f.name);
    if (name == "host" || is_connection_specific(name, f.value)) continue;
    out.push_back(Field{std::move(name), f.value});
  }
  return nullptr;
}

}  // namespace zn::h2
