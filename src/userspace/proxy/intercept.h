// The L7 half of the proxy: the requests of one intercepted guest connection
// (TLS already terminated, or plain HTTP on port 80) or HTTP/2 stream, each decided
// by the broker before a byte of it reaches an upstream, forwarded with
// regenerated framing and the rule's identity, and answered.
#pragma once

#include <openssl/ssl.h>

#include <asio.hpp>
#include <atomic>
#include <chrono>

#include "common/fair_pool.h"
#include "common/token_buckets.h"
#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/counters.h"
#include "userspace/proxy/destination_guard.h"
#include "userspace/proxy/guest_leg.h"
#include "userspace/proxy/h2_upstream_shares.h"
#include "userspace/http/message.h"
#include "userspace/proxy/policy.h"
#include "userspace/proxy/session_sockets.h"
#include "userspace/proxy/upstream_pool.h"
#include "userspace/proxy/watchdog.h"
#include "userspace/proxy/websocket_relay.h"

namespace zn::proxy {

struct InterceptContext {
  ProxyPolicy& policy;
  FairPool& pool;         // where broker calls run, off the event loop (offload.h)
  SSL_CTX* upstream_tls;  // verified client context (trust store + extra bundle)
  http::HttpLimits limits;
  std::chrono::milliseconds header_timeout;   // a started request head must complete in this
  std::chrono::milliseconds idle_timeout;     // keep-alive wait and any stalled transfer
  std::chrono::milliseconds connect_timeout;  // upstream TCP connect + TLS handshake
  InterceptCounters& counters;
  // Judges each upstream address immediately before it is connected; null
  // refuses every connect (fail closed).
  const DestinationGuard* guard = nullptr;
  // Idle upstream connections shared across guest connections; null: each
  // guest connection opens its own.
  UpstreamPool* upstreams = nullptr;
  // HTTP/2 upstream connections open now, each taking many exchanges'
  // requests as streams; null: an exchange's HTTP/2 connection is its own.
  H2UpstreamShares* h2_upstreams = nullptr;
  // Every session's sockets against its cap: an upstream socket takes a
  // place before it is connected (refused 503 at the cap); null: uncounted.
  SessionSockets* sockets = nullptr;
  // Streams a session's guests reset, over all their HTTP/2 connections
  // (issue 32: rapid reset spread over connections each under its own
  // bound); a connection whose reset the bucket refuses ends with
  // GOAWAY(ENHANCE_YOUR_CALM). Null: only each connection's own bound.
  TokenBuckets* session_resets = nullptr;
  // The bounds of a WebSocket a rule allowed ("websocket": true).
  WebSocketLimits websocket;
  // Offer HTTP/2 to TLS upstreams (ALPN "h2" before "http/1.1").
  bool upstream_http2 = false;
};

// Runs until the guest closes, a request is refused (refusals close the
// connection, so nothing pipelined behind a denied request is ever read as a
// request), or a timeout. Never throws. Runs on the proxy's I/O loop (the
// executor of `guest`); broker calls go to context.pool. `dog`: the
// watchdog of the thread it runs in (watchdog.h), which its deadlines use.
asio::awaitable<void> serve_intercepted(ByteStream& guest, const UpstreamDecision& connection,
                                        InterceptContext& context, const Watchdog& dog);

// The same exchange over any guest leg (guest_leg.h): an HTTP/2 stream's
// (h2_intercept.cpp) carries one request.
asio::awaitable<void> serve_exchange(GuestLeg& guest, const UpstreamDecision& connection,
                                     InterceptContext& context, const Watchdog& dog);

}  // namespace zn::proxy
