// The upstream-facing end of a forwarded HTTP/2 connection: requests the
// proxy decided to forward go out as streams, responses come back as
// events. Bytes in, bytes out, no sockets, no policy.
//
// The upstream is held to the same bounds as the guest where they apply
// (header list size, CONTINUATION, SETTINGS and PING floods, empty DATA,
// frame size): it is a server on the Internet. Server push is refused
// (SETTINGS_ENABLE_PUSH 0).
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "userspace/h2/h2_events.h"
#include "userspace/h2/session_core.h"

namespace zn::h2 {

struct ClientOptions : SessionOptions {
  // What the upstream may send ahead on one stream (SETTINGS_INITIAL_WINDOW_SIZE)
  // and on the connection in all; 0 keeps the protocol's 65,535. With
  // manual_window_updates a stream's reader that does not take its bytes
  // holds at most its own window, and a connection window of every stream's
  // keeps it from holding the others back.
  uint32_t stream_window = 0;
  uint32_t connection_window = 0;
};

class H2ClientSession : public SessionCore {
 public:
  // The connection preface and our SETTINGS are the first take_output().
  explicit H2ClientSession(ClientOptions options = {});

  std::vector<ClientEvent> take_events() { return std::exchange(events_, {}); }

  // Opens a stream: the stream id, or a negative number (a field that
  // cannot be sent, the peer's GOAWAY, stream ids exhausted). For CONNECT,
  // scheme and path are left empty. `headers` are HTTP/1.1-shaped (Host is
  // dropped: authority carries it). has_body: the body follows through
  // send_data/send_trailers. Streams over the peer's concurrency limit wait
  // in nghttp2 until one closes.
  int32_t submit_request(std::string_view method, std::string_view scheme, std::string_view authority,
                         std::string_view path, const std::vector<Field>& headers, bool has_body);

  // Streams the upstream lets us have open at once (its SETTINGS; before
  // they came, the protocol's initial "unlimited").
  uint32_t peer_max_concurrent_streams();
  // Whether a new stream may start (no GOAWAY either way, not failed).
  bool request_allowed();

 private:
  void on_header_block(int32_t stream_id, Stream& stream, int category, bool end_stream) override;
  void on_data_frame(int32_t stream_id, Stream& stream, std::string bytes, bool end_stream) override;
  void on_stream_closed(int32_t stream_id, Stream& stream, uint32_t error_code) override;
  void push(LimitTripped event) override { events_.emplace_back(std::move(event)); }
  void push(StreamReset event) override { events_.emplace_back(event); }
  void push(GoAway event) override { events_.emplace_back(event); }

  std::vector<ClientEvent> events_;
};

}  // namespace zn::h2
