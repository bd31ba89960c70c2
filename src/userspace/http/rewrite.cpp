#include "userspace/http/rewrite.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace zn::http {
namespace {

// Connection-level headers (RFC 9110 7.6.1) and the framing we regenerate.
constexpr std::array<std::string_view, 10> kHopByHop = {
    "connection",        "keep-alive", "proxy-connection", "te",     "trailer",
    "transfer-encoding", "upgrade",    "content-length",   "expect", "host"};

bool is_hop_by_hop(std::string_view name) {
  return std::any_of(kHopByHop.begin(), kHopByHop.end(),
                     [&](std::string_view h) { return iequals(h, name); });
}

// A field name a backend may read as another one. CGI, WSGI, Rack, PHP and
// Apache's mod_cgi turn a field name into a variable by upper-casing it and
// mapping '-' (and often '.', '~' or any other non-alphanumeric) to '_':
// "Transfer_Encoding", "Content.Length" or "X_Api_Key" would become the
// framing, routing or injected field the proxy rewrote. Only names of
// letters, digits and '-' go on (nginx drops the rest by default too:
// underscores_in_headers off, ignore_invalid_headers on).
bool look_alike_name(std::string_view name) {
  return name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
           return !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-');
         });
}

// Fields with which a requester chooses where a response is cut. On a
// connection whose responses are scrubbed they would let the guest fetch an
// injected secret in pieces no single response shows whole (a byte range, or
// several as multipart/byteranges), so they never go on there. Request-Range
// is the pre-RFC 2616 spelling some servers still honour.
constexpr std::array<std::string_view, 3> kRangeFields = {"range", "if-range", "request-range"};

bool is_range_field(std::string_view name) {
  return std::any_of(kRangeFields.begin(), kRangeFields.end(),
                     [&](std::string_view h) { return iequals(h, name); });
}

// Header names listed in Connection are hop-by-hop too.
std::vector<std::string> connection_tokens(const std::vector<Header>& headers) {
  std::vector<std::string> out;
  for (const Header& h : headers) {
    if (!iequals(h.name, "connection")) continue;
    size_t pos = 0;
    while (pos <= h.value.size()) {
      size_t comma = h.value.find(',', pos);
      if (comma == std::string::npos) comma = h.value.size();
      std::string token = h.value.substr(pos, comma - pos);
      token.erase(0, token.find_first_not_of(" \t"));
      token.erase(token.find_last_not_of(" \t") + 1);
      if (!token.empty()) out.push_back(token);
      pos = comma + 1;
    }
  }
  return out;
}

// explicit_bzero: a plain fill before the string is freed is a dead store
// the compiler may drop.
void wipe(std::string& s) { explicit_bzero(s.data(), s.size()); }

bool listed(const std::vector<std::string>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return iequals(n, name); });
}

void append_header(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

}  // namespace

std::string form_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

std::string percent_encode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size() * 3);
  for (unsigned char c : value) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string query_with_parameter(std::string_view query, std::string_view name, std::string_view value) {
  std::string out;
  size_t pos = 0;
  while (pos <= query.size() && !query.empty()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view pair = query.substr(pos, amp - pos);
    const std::string_view key = pair.substr(0, pair.find('='));
    // ';' is never a separator here: the normalised target refuses it raw.
    if (!pair.empty() && form_decode(key) != name) {
      if (!out.empty()) out.push_back('&');
      out.append(pair);
    }
    pos = amp + 1;
  }
  if (!out.empty()) out.push_back('&');
  out.append(name).append("=").append(percent_encode(value));
  return out;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 421:
      return "Misdirected Request";
    case 429:
      return "Too Many Requests";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

ForwardedRequest forwarded_request(const RequestHead& request, const NormalisedTarget& target,
                                   const Injection* injection, bool scanned_response) {
  std::vector<std::string> drop = connection_tokens(request.headers);
  if (injection != nullptr) {
    drop.insert(drop.end(), injection->strip.begin(), injection->strip.end());
    if (!injection->query) drop.push_back(injection->header);  // the guest never supplies its own copy
  }
  // A response on a connection with a secret is scanned for its reflection
  // (secret_scrubber.h); compressed, it could not be.
  const bool identity_only = injection != nullptr || scanned_response;
  if (identity_only) drop.push_back("Accept-Encoding");
  ForwardedRequest out;
  out.target = target.path;
  if (injection != nullptr && injection->query) {
    std::string query =
        query_with_parameter(target.has_query ? target.query : "", injection->header, injection->value);
    out.target.append("?").append(query);
    wipe(query);  // held the credential
  } else if (target.has_query) {
    out.target.append("?").append(target.query);
  }
  out.headers.reserve(request.headers.size() + 2);
  for (const Header& h : request.headers) {
    const bool te_trailers = iequals(h.name, "te") && iequals(h.value, "trailers");
    if ((is_hop_by_hop(h.name) && !te_trailers) || listed(drop, h.name) || look_alike_name(h.name)) continue;
    if (identity_only && is_range_field(h.name)) continue;
    out.headers.push_back(h);
  }
  if (injection != nullptr && !injection->query) out.headers.push_back({injection->header, injection->value});
  if (identity_only) out.headers.push_back({"Accept-Encoding", "identity"});
  return out;
}

std::string forwarded_request_head(const RequestHead& request, const NormalisedTarget& target,
                                   std::string_view host, const Injection* injection, bool scanned_response) {
  ForwardedRequest forwarded = forwarded_request(request, target, injection, scanned_response);
  std::string out;
  out.reserve(256 + forwarded.target.size() + forwarded.headers.size() * 48);
  out.append(request.method).append(" ").append(forwarded.target).append(" HTTP/1.1\r\n");
  append_header(out, "Host", host);
  for (const Header& h : forwarded.headers) append_header(out, h.name, h.value);
  switch (request.framing) {
    case BodyFraming::kContentLength:
      append_header(out, "Content-Length", std::to_string(request.content_length));
      break;
    case BodyFraming::kChunked:
      append_header(out, "Transfer-Encoding", "chunked");
      break;
    default:
      break;
  }
  out.append("\r\n");
  // The copies held the credential (the injected header or query).
  wipe(forwarded.target);
  for (Header& h : forwarded.headers) wipe(h.value);
  return out;
}

bool is_partial_response(const ResponseHead& response) {
  if (response.status == 206) return true;
  for (const Header& h : response.headers) {
    if (iequals(h.name, "content-range") && response.status != 416) return true;
    if (!iequals(h.name, "content-type")) continue;
    std::string_view v = h.value;
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    if (v.size() >= 20 && iequals(v.substr(0, 20), "multipart/byteranges")) return true;
  }
  return false;
}

bool identity_content_encoding(const ResponseHead& response) {
  for (const Header& h : response.headers) {
    if (!iequals(h.name, "content-encoding")) continue;
    size_t pos = 0;
    while (pos <= h.value.size()) {
      size_t comma = h.value.find(',', pos);
      if (comma == std::string::npos) comma = h.value.size();
      std::string_view token = std::string_view(h.value).substr(pos, comma - pos);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
      if (!token.empty() && !iequals(token, "identity")) return false;
      pos = comma + 1;
    }
  }
  return true;
}

std::vector<Header> forwarded_response_fields(const ResponseHead& response) {
  const std::vector<std::string> drop = connection_tokens(response.headers);
  std::vector<Header> out;
  out.reserve(response.headers.size());
  for (const Header& h : response.headers) {
    // A bodiless response (HEAD, 304) keeps its Content-Length as metadata.
    const bool keep_length = response.framing == BodyFraming::kNone && iequals(h.name, "content-length");
    if ((is_hop_by_hop(h.name) && !keep_length) || listed(drop, h.name)) continue;
    out.push_back(h);
  }
  return out;
}

std::vector<Header> forwarded_trailer_fields(const std::vector<Header>& trailers) {
  static constexpr std::array<std::string_view, 20> kNever = {"content-encoding",
                                                              "content-type",
                                                              "content-range",
                                                              "set-cookie",
                                                              "authorization",
                                                              "www-authenticate",
                                                              "proxy-authenticate",
                                                              "proxy-authorization",
                                                              "location",
                                                              "cache-control",
                                                              "expires",
                                                              "date",
                                                              "age",
                                                              "retry-after",
                                                              "vary",
                                                              "server",
                                                              "etag",
                                                              "last-modified",
                                                              "content-location",
                                                              "alt-svc"};
  std::vector<Header> out;
  for (const Header& h : trailers) {
    if (is_hop_by_hop(h.name)) continue;
    if (std::any_of(kNever.begin(), kNever.end(), [&](std::string_view n) { return iequals(n, h.name); }))
      continue;
    out.push_back(h);
  }
  return out;
}

std::string forwarded_response_head(const ResponseHead& response, bool chunked, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " ";
  out.append(response.reason.empty() ? reason_phrase(response.status) : std::string_view(response.reason));
  out.append("\r\n");
  for (const Header& h : forwarded_response_fields(response)) append_header(out, h.name, h.value);
  if (chunked)
    append_header(out, "Transfer-Encoding", "chunked");
  else if (response.framing == BodyFraming::kContentLength)
    append_header(out, "Content-Length", std::to_string(response.content_length));
  if (close) append_header(out, "Connection", "close");
  out.append("\r\n");
  return out;
}

std::string proxy_response(int status, std::string_view body, std::chrono::seconds retry_after) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out.append(reason_phrase(status)).append("\r\n");
  if (retry_after.count() > 0) append_header(out, "Retry-After", std::to_string(retry_after.count()));
  append_header(out, "Content-Type", "text/plain; charset=utf-8");
  append_header(out, "Content-Length", std::to_string(body.size()));
  append_header(out, "Connection", "close");
  append_header(out, "Server", "zeroness");
  out.append("\r\n").append(body);
  return out;
}

std::string local_response(int status, std::string_view content_type, std::string_view body, bool close) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " ";
  out.append(reason_phrase(status)).append("\r\n");
  // 204 and 304 have no body and no length (RFC 9110 8.6).
  if (status != 204 && status != 304) {
    if (!content_type.empty()) append_header(out, "Content-Type", content_type);
    append_header(out, "Content-Length", std::to_string(body.size()));
  }
  if (close) append_header(out, "Connection", "close");
  append_header(out, "Server", "zeroness");
  append_header(out, "Cache-Control", "no-store");
  out.append("\r\n");
  if (status != 204 && status != 304) out.append(body);
  return out;
}

}  // namespace zn::http
