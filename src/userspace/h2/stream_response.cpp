#include "userspace/h2/stream_response.h"

#include <string>
#include <utility>

#include "userspace/h2/fields.h"
#include "userspace/http/rewrite.h"

namespace zn::h2 {

StreamResponse to_h2_response_fields(const http::ResponseHead& response) {
  StreamResponse out;
  out.status = response.status;
  if (response.status < 200 || response.status > 599) {
    out.error = "status cannot be relayed on HTTP/2";
    return out;
  }
  // The HTTP/1.1 rules (hop-by-hop, Connection-named, framing), then
  // HTTP/2's: lower-case names, no connection-specific field.
  std::vector<http::Header> end_to_end = http::forwarded_response_fields(response);
  if (const char* why = to_h2_fields(end_to_end, out.headers)) {
    out.error = why;
    out.headers.clear();
    return out;
  }
  // A bodiless response keeps its Content-Length as metadata, but HTTP/2
  // peers (nghttp2 among them) refuse two of them, even equal: keep the
  // first. The parser has checked every value.
  bool length_seen = false;
  std::erase_if(out.headers, [&](const Field& f) {
    if (f.name != "content-length") return false;
    return std::exchange(length_seen, true);
  });
  if (response.framing == http::BodyFraming::kContentLength)
    out.headers.push_back({"content-length", std::to_string(response.content_length)});
  return out;
}

bool h2_has_body(const http::ResponseHead& response, std::string_view request_method) {
  if (request_method == "HEAD") return false;
  if (response.status < 200 || response.status == 204 || response.status == 304) return false;
  switch (response.framing) {
    case http::BodyFraming::kNone:
      return false;
    case http::BodyFraming::kContentLength:
      return response.content_length != 0;
    default:
      return true;
  }
}

}  // namespace zn::h2
