// libFuzzer target: what a guest's HTTP/2 connection feeds the proxy's
// nghttp2 session (issue 17), and every stream it opens mapped onto the
// HTTP/1.1 request the exchange would decide.
//
// Build and run: as http1_fuzz (see there), target h2_server_fuzz.
//
// The input is the bytes after the client preface (which is prepended, so
// the fuzzer spends its time on frames), cut into feed() calls at the
// boundaries the first bytes choose. Each request is mapped
// (to_request_head) and answered, refused or reset by turns; output is
// drained after every feed. No crash, no sanitizer report, and a mapped
// request is always one the HTTP/1.1 parser reads back the same.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "userspace/h2/server_session.h"
#include "userspace/h2/stream_request.h"
#include "userspace/http/message.h"

namespace {

using namespace zn;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  h2::ServerOptions options;
  options.manual_window_updates = (size > 0 && (data[0] & 1));
  options.enable_extended_connect = (size > 0 && (data[0] & 2));
  h2::H2ServerSession session(options);
  (void)session.take_output();
  static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  session.feed({reinterpret_cast<const uint8_t*>(kPreface.data()), kPreface.size()});
  const http::HttpLimits limits;
  size_t at = size > 0 ? 1 : 0, turn = 0;
  while (at < size) {
    const size_t piece = 1 + (data[at] % 64) * 17;
    const size_t n = std::min(piece, size - at);
    const h2::Result r = session.feed({data + at, n});
    at += n;
    for (h2::ServerEvent& e : session.take_events()) {
      if (auto* h = std::get_if<h2::RequestHeaders>(&e)) {
        const h2::StreamRequestResult m = h2::to_request_head(*h, "api.example.com", limits);
        if (m) {
          // What the bridge hands the exchange parses back to the same request.
          const std::string text = h2::request_text(m.head);
          http::RequestHead again;
          const http::ParseResult p = http::parse_request_head(text, limits, again);
          check(p.state == http::ParseState::kDone && p.consumed == text.size());
          check(again.method == m.head.method && again.target == m.head.target);
          check(again.framing == m.head.framing);
        }
        switch (turn++ % 3) {
          case 0:
            if (session.submit_response(h->stream_id, m ? 200 : m.status, {{"content-type", "text/plain"}},
                                        true))
              session.send_data(h->stream_id, "ok", true);
            break;
          case 1:
            session.refuse_stream(h->stream_id);
            break;
          default:
            session.reset_stream(h->stream_id, 0x8);
        }
      } else if (auto* d = std::get_if<h2::RequestData>(&e)) {
        session.consume(d->stream_id, d->bytes.size());
      }
    }
    (void)session.take_output();
    if (!r) break;
  }
  return 0;
}
