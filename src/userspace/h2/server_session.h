// The guest-facing end of an intercepted HTTP/2 connection: bytes from the
// guest in, bytes to the guest out, each stream turned into one request
// (RequestHeaders, RequestData..., RequestTrailers) that the caller decides
// and answers on its own. No sockets, no policy.
//
// Requests are checked as RFC 9113 8 demands (nghttp2's HTTP messaging plus
// fields.h); a malformed request resets its stream only. CONNECT is refused
// (405) unless extended CONNECT (RFC 8441) is enabled, which admits
// CONNECT with :protocol (e.g. websocket). The bounds of h2_limits.h are
// enforced and counted; a flood ends the connection with GOAWAY
// ENHANCE_YOUR_CALM, a LimitTripped event and feed() failing.
//
//   H2ServerSession s(options);
//   out.write(s.take_output());              // our SETTINGS
//   on bytes: if (!s.feed(bytes)) close after writing s.take_output();
//             for (auto& e : s.take_events()) ... s.submit_response(...)
//             out.write(s.take_output());
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/h2/h2_events.h"
#include "userspace/h2/session_core.h"

namespace zn::h2 {

struct ServerOptions : SessionOptions {
  // Advertise SETTINGS_ENABLE_CONNECT_PROTOCOL and accept CONNECT with
  // :protocol (RFC 8441). Plain CONNECT is refused either way.
  bool enable_extended_connect = false;
};

class H2ServerSession : public SessionCore {
 public:
  explicit H2ServerSession(ServerOptions options = {});

  std::vector<ServerEvent> take_events() { return std::exchange(events_, {}); }

  // Answers a request the caller saw (RequestHeaders) with a final status
  // (200-999; no 1xx is offered). `headers` are
  // HTTP/1.1-shaped: names lower-cased, connection-specific fields dropped.
  // has_body: the body follows through send_data/send_trailers; otherwise
  // the response ends here. False: no such stream, already answered, or a
  // field that cannot be sent (fields.h).
  bool submit_response(int32_t stream_id, int status, const std::vector<Field>& headers, bool has_body);
  // RST_STREAM(REFUSED_STREAM): not processed, the client may retry.
  bool refuse_stream(int32_t stream_id) { return reset_stream(stream_id, kRefusedStream); }

  static constexpr uint32_t kRefusedStream = 0x7;

 private:
  void on_header_block(int32_t stream_id, Stream& stream, int category, bool end_stream) override;
  void on_data_frame(int32_t stream_id, Stream& stream, std::string bytes, bool end_stream) override;
  void on_stream_closed(int32_t stream_id, Stream& stream, uint32_t error_code) override;
  void push(LimitTripped event) override { events_.emplace_back(std::move(event)); }
  void push(StreamReset event) override { events_.emplace_back(event); }
  void push(GoAway event) override { events_.emplace_back(event); }

  void on_request(int32_t stream_id, Stream& stream, bool end_stream);
  // The session answers the stream itself (431, 405) and, if the request
  // is still coming, asks the client to stop sending it (RST NO_ERROR).
  void answer_locally(int32_t stream_id, Stream& stream, int status, bool request_ended);
  void reject(int32_t stream_id, Stream& stream, std::string reason);

  bool extended_connect_;
  std::vector<ServerEvent> events_;
};

}  // namespace zn::h2
