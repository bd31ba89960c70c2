// The frames of a WebSocket the broker allowed (issue 17), relayed both ways
// once the upstream switched protocols. Nothing is parsed as HTTP again: the
// bytes of each side are read as WebSocket frames (websocket/frame.h), and
// only their payload goes on, framed anew by the proxy:
//   guest -> upstream: every message through the guest's data chain, as a
//     streamed request body (filters/chain.cpp: screened for the session's
//     tripwires; a canary or a stray placeholder ends the WebSocket before
//     it leaves, as it would refuse a request), re-masked with the proxy's
//     own keys;
//   upstream -> guest: every message through the upstream's data chain, as
//     a response body (scrubbed of the secrets the connection could have
//     injected).
// Control frames (a ping's payload, a Close's reason) are screened and
// scrubbed each on its own: they may come between a message's frames.
// A frame the reader refuses (an RSV bit, an unmasked client frame, a
// message past the size limit, ...) ends the WebSocket with a Close to the
// side that sent it. Idle longer than the limit (no byte either way), both
// sides get a Close 1001. Runs on the exchange's loop; never throws.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/filters/data_filter.h"
#include "userspace/proxy/policy.h"
#include "userspace/proxy/request_screen.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy {

struct WebSocketLimits {
  uint64_t max_message = 16 * 1024 * 1024;  // payload bytes of one message, either way
  std::chrono::milliseconds idle_timeout{300000};
};

struct WebSocketOutcome {
  uint64_t bytes_up = 0, bytes_down = 0;  // payload bytes relayed
  uint64_t messages_up = 0, messages_down = 0;
  // How it ended: "closed" (a Close each way, or both sides ended), "idle",
  // "guest: <why>", "upstream: <why>", "tripwire".
  std::string end;
  std::vector<std::string> tripwires;  // the labels a guest's message carried
  // What was scrubbed from the upstream's control frames (its messages'
  // go into the audit record through the upstream data chain).
  ScrubReport reflections;
};

// `guest_pending`, `upstream_pending`: bytes each side sent right behind its
// handshake. `exempt`: the request's own placeholders (going to their host).
// `up`, `down`: the data chains of the guest's and the upstream's messages
// (filters::guest_data_chain, upstream_data_chain), closed when it ends.
// `session`: whose share of the loop the relayed bytes take (loop_share.h).
struct WebSocketChains {
  filters::DataChain up, down;
};
asio::awaitable<WebSocketOutcome> relay_websocket(ByteStream& guest, std::string guest_pending,
                                                  ByteStream& upstream, std::string upstream_pending,
                                                  const SecretScrubber& scrubber, const RequestScreen& screen,
                                                  const std::vector<Substitution>& exempt,
                                                  WebSocketChains chains, const WebSocketLimits& limits,
                                                  const std::string& session);

}  // namespace zn::proxy
