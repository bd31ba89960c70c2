// A ticket port serves one request per connection (issue 30): the request
// head the admission was read from, its body (framed by its own head), and
// nothing after it. A second request on the connection (keep-alive, or
// pipelined in the same write) never reaches the guest, so neither does a
// ticket or binding cookie it carries: only the first head is taken apart,
// and only the first head goes on. The guest is asked to close after its
// answer ("Connection: close"), and the client is told the same, so it
// opens a new connection (its binding cookie admits it again). An Upgrade
// (WebSocket) the guest accepts with 101 is relayed both ways from then on:
// what follows is no longer HTTP.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "userspace/http/body.h"
#include "userspace/http/message.h"

namespace zn::ingress {

// `head`: a parsed head as text (the start line, its fields, the empty
// line). Returns it without its Connection, Keep-Alive and Proxy-Connection
// fields, with `extra` (whole field lines, CRLF-ended) after the start line
// and "Connection: <connection>" last; a nullopt `connection` keeps those
// fields as they were (a 101's "Connection: upgrade").
std::string rewrite_head(std::string_view head, std::string_view extra,
                         std::optional<std::string_view> connection);

// The request's body as it goes to the guest: a Content-Length body as it
// came, a chunked one decoded and framed again (the guest never parses the
// client's chunk extensions or trailer fields). Bytes past the body's end
// are left for the caller (never forwarded).
class RequestBodyRelay {
 public:
  RequestBodyRelay(const http::RequestHead& head, const http::HttpLimits& limits);
  struct Step {
    size_t consumed = 0;  // of `in`, belonging to the body
    std::string out;      // to write to the guest
    bool done = false;
    bool error = false;
    std::string error_reason;
  };
  Step feed(std::string_view in);
  bool done() const { return done_; }

 private:
  http::BodyDecoder decoder_;
  bool chunked_;
  bool done_;
};

}  // namespace zn::ingress
