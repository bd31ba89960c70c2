// HTTP/2 from the guest through interception (issue 17). The connection is
// the guest's (TLS terminated, ALPN "h2"); nghttp2 (userspace/h2) turns its
// bytes into streams under the flood bounds, and each stream becomes one
// request of its own through the exchange (intercept.h) over an H2GuestLeg
// (h2_guest_leg.h): the request as the codec's checked fields and DATA, the
// answer as fields and DATA, never HTTP/1.1 text; decided by the broker,
// screened, given its rule's identity, forwarded, scrubbed and audited
// exactly as a request on an HTTP/1.1 connection. A stream whose :authority
// is not the SNI is answered 421 before the broker sees it; a refused stream
// gets its answer (403, 429, ...) and the others go on. A flood ends the
// connection with GOAWAY(ENHANCE_YOUR_CALM), counted and audited.
//
// One coroutine owns the guest stream (reads, and writes what the session
// has to send); the streams' exchanges only touch the session and wake it.
#pragma once

#include <asio.hpp>

#include "userspace/proxy/byte_stream.h"
#include "userspace/proxy/intercept.h"
#include "userspace/proxy/unsent_budget.h"

namespace zn::proxy {

// Runs until the guest closes, a flood bound trips, or the connection idles
// with no stream open. Never throws. On the proxy's I/O loop, in the
// thread `dog` watches (watchdog.h); each stream's exchange runs in a thread
// of its own, with a watchdog of its own.
asio::awaitable<void> serve_intercepted_h2(ByteStream& guest, const UpstreamDecision& connection,
                                           InterceptContext& context, const Watchdog& dog);
// The same with the caller's budget for what the connection's streams hold
// unsent (unsent_budget.h), its bounds and its accounting: it must outlive
// the connection.
asio::awaitable<void> serve_intercepted_h2(ByteStream& guest, const UpstreamDecision& connection,
                                           InterceptContext& context, const Watchdog& dog,
                                           UnsentBudget& budget);

}  // namespace zn::proxy
