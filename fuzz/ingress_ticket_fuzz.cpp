// libFuzzer target: arbitrary bytes as the first request to a declared port
// (issue 14): parsed as a request head, then its ticket, binding cookie and
// every carrier of them taken out (ingress/ticket_carrier.h).
//
// Build and run: as http1_fuzz (see there), target ingress_ticket_fuzz.
//
// Besides "no crash / no sanitizer report", it checks what the ingress relies
// on: the head that goes on to the guest parses again as a head, and carries
// no ticket and no binding of any kind, so nothing admitting a client ever
// reaches the guest; and what the connection sends the guest (the head asking
// for close, then the body relayed by its framing: one_exchange.h) is one
// request and nothing after it, whatever followed in the input.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "userspace/http/message.h"
#include "userspace/http/body.h"
#include "userspace/ingress/one_exchange.h"
#include "userspace/ingress/ticket_carrier.h"

namespace {

// Which property failed, on stderr, before the abort libFuzzer reports.
void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "ingress_ticket_fuzz: failed: %s\n", what);
  std::abort();
}
#define CHECK(e) check((e), #e)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  zn::http::RequestHead head;
  const zn::http::ParseResult r = zn::http::parse_request_head(input, zn::http::HttpLimits{}, head);
  if (r.state != zn::http::ParseState::kDone) return 0;
  const zn::ingress::Admission a = zn::ingress::take_admission(head, 8080);
  if (!a.error.empty()) return 0;  // refused: nothing goes on
  zn::http::RequestHead forwarded;
  zn::http::HttpLimits roomy;
  // What goes on may be larger than what came: a head at the field limit
  // gets its Connection field (rewrite_head), and the guest's server, not
  // zerod, reads it.
  roomy.max_head_bytes = 2 * zn::http::HttpLimits{}.max_head_bytes;
  roomy.max_headers = 2 * zn::http::HttpLimits{}.max_headers;
  CHECK(zn::http::parse_request_head(a.forwarded_head, roomy, forwarded).state ==
        zn::http::ParseState::kDone);
  CHECK(forwarded.method == head.method);
  CHECK(forwarded.framing == head.framing && forwarded.content_length == head.content_length);
  const zn::ingress::Admission again = zn::ingress::take_admission(forwarded, 8080);
  CHECK(again.error.empty() && !again.ticket && !again.binding);

  zn::ingress::RequestBodyRelay body(head, zn::http::HttpLimits{});
  const zn::ingress::RequestBodyRelay::Step step = body.feed(input.substr(r.consumed));
  if (step.error) return 0;  // the connection is cut
  const std::string sent =
      zn::ingress::rewrite_head(a.forwarded_head, "", head.upgrade ? "upgrade" : "close") + step.out;
  zn::http::RequestHead one;
  const zn::http::ParseResult p = zn::http::parse_request_head(sent, roomy, one);
  CHECK(p.state == zn::http::ParseState::kDone);
  if (!head.upgrade) CHECK(!one.keep_alive);
  // The body as the guest reads it ends where the bytes end: nothing of a
  // second request rides behind it.
  zn::http::BodyDecoder decoder(one.framing, one.content_length, zn::http::HttpLimits{});
  std::string payload;
  const zn::http::BodyDecoder::Step read = decoder.feed(std::string_view(sent).substr(p.consumed), payload);
  CHECK(!read.error && read.consumed == sent.size() - p.consumed);
  CHECK(read.done == step.done);
  return 0;
}
