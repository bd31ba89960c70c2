#include "userspace/h2/stream_upstream.h"

#include <algorithm>
#include <cstring>

#include "userspace/h2/fields.h"
#include "userspace/http/rewrite.h"

namespace zn::h2 {
namespace {

// explicit_bzero: a plain fill before the string is freed is a dead store
// the compiler may drop.
void zero(std::string& s) { explicit_bzero(s.data(), s.size()); }

// What the HTTP/1.1 field-line parser accepts (message.h), for fields an
// HTTP/2 upstream sent that may be written to an HTTP/1.1 guest.
bool http1_field(const Field& f) {
  if (f.name.empty()) return false;
  for (char c : f.name)
    if (!http::is_tchar(static_cast<unsigned char>(c))) return false;
  for (char c : f.value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

void UpstreamRequest::wipe() {
  zero(path);
  for (Field& f : headers) zero(f.value);
}

UpstreamRequest to_h2_request_fields(const http::RequestHead& request, const http::NormalisedTarget& target,
                                     std::string_view host, const http::Injection* injection,
                                     bool scanned_response) {
  UpstreamRequest out;
  if (request.upgrade) {
    out.error = "upgrade requests are not forwarded over HTTP/2";
    return out;
  }
  http::ForwardedRequest forwarded = http::forwarded_request(request, target, injection, scanned_response);
  out.error = to_h2_fields(forwarded.headers, out.headers);
  for (http::Header& h : forwarded.headers) zero(h.value);
  if (out.error != nullptr) {
    zero(forwarded.target);
    out.wipe();
    out.headers.clear();
    return out;
  }
  out.method = request.method;
  out.scheme = "https";
  out.authority = host;
  out.path = std::move(forwarded.target);
  switch (request.framing) {
    case http::BodyFraming::kContentLength:
      // RFC 9113 8.1.1: a length the upstream can check the DATA against.
      out.headers.push_back({"content-length", std::to_string(request.content_length)});
      out.has_body = request.content_length != 0;
      break;
    case http::BodyFraming::kChunked:
      out.has_body = true;  // DATA frames carry it; the length is not known
      break;
    default:
      break;
  }
  return out;
}

UpstreamResponse from_h2_response(const ResponseHeaders& response, std::string_view request_method) {
  UpstreamResponse out;
  http::ResponseHead& head = out.head;
  if (response.status < 100 || response.status > 599) {
    out.error = ":status out of range";
    return out;
  }
  head.status = response.status;
  head.version_minor = 1;
  head.keep_alive = true;
  bool length_seen = false;
  for (const Field& f : response.headers) {
    if (!http1_field(f)) {
      out.error = "field HTTP/1.1 cannot carry";
      return out;
    }
    std::string name = f.name;
    std::transform(name.begin(), name.end(), name.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
    if (is_connection_specific(name, f.value)) {
      out.error = "connection-specific field";
      return out;
    }
    if (name == "content-length") {
      uint64_t n = 0;
      // As for an HTTP/1.1 response: identical duplicates tolerated (RFC
      // 9110 8.6), different ones not.
      if (!http::parse_content_length(f.value, n) || (length_seen && n != head.content_length)) {
        out.error = "invalid content-length";
        return out;
      }
      length_seen = true;
      head.content_length = n;
    }
    head.headers.push_back(f);
  }
  if (request_method == "HEAD" || head.status < 200 || head.status == 204 || head.status == 304) {
    head.framing = http::BodyFraming::kNone;
    head.content_length = 0;
  } else if (length_seen) {
    if (response.end_stream && head.content_length != 0) {
      out.error = "content-length without a body";
      return out;
    }
    head.framing = http::BodyFraming::kContentLength;
  } else if (response.end_stream) {
    // Told by its length, so an HTTP/1.1 guest does not read to the close.
    head.framing = http::BodyFraming::kContentLength;
    head.content_length = 0;
  } else {
    head.framing = http::BodyFraming::kUntilClose;
  }
  return out;
}

}  // namespace zn::h2
