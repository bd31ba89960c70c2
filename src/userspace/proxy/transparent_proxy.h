// The transparent listener every steered guest TCP connection lands on:
// reads the ClientHello with a size bound and a deadline, asks the
// ProxyPolicy, and then resets the connection, splices it to the
// broker-chosen upstream (replaying what the guest sent, then relayed by the
// kernel's sockmap, else with splice(2), half-close included), or intercepts it: TLS terminated with a leaf
// minted for the SNI, each HTTP request decided on its own (http_intercept.h).
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fair_queue.h"
#include "common/token_buckets.h"
#include "userspace/proxy/counters.h"
#include "userspace/proxy/destination_guard.h"
#include "userspace/proxy/mint_budget.h"
#include "userspace/proxy/upstream_pool.h"
#include "userspace/proxy/websocket_relay.h"
#include "userspace/tls/ticket_keys.h"
#include "userspace/proxy/policy.h"
#include "zn_abi.h"

namespace zn::proxy {

inline constexpr std::chrono::milliseconds kDefaultIdleTimeout{std::chrono::minutes(5)};
inline constexpr std::chrono::milliseconds kDefaultHeaderTimeout{10000};

struct ProxyConfig {
  std::vector<std::string> addresses{"127.0.0.1", "::1"};
  uint16_t port = ZN_DEFAULT_PROXY_PORT;          // 0 picks one (tests)
  std::chrono::milliseconds hello_timeout{5000};  // slowloris bound on the first bytes
  std::chrono::milliseconds connect_timeout{5000};
  // A relayed connection with no byte in either direction for this long is
  // torn down, so idle guests cannot pin proxy resources forever.
  std::chrono::milliseconds idle_timeout{kDefaultIdleTimeout};
  size_t max_connections = 4096;
  // Per guest (its session, ProxyPolicy::tenant_of): its connections from
  // accept, slowloris included, and every upstream socket opened for them
  // (session_sockets.h), so a guest cannot starve the others.
  size_t max_connections_per_guest = 256;
  std::chrono::milliseconds header_timeout{kDefaultHeaderTimeout};  // a started request head
  // Interception: the deployment CA leaves are minted from ("" = no
  // interception: such connections are reset), and the extra trust bundle
  // for upstreams on top of the system store ("" = system store only).
  std::string ca_cert_path, ca_key_path;
  // The CA key in memory instead of ca_key_path (zerod's is sealed at rest).
  std::shared_ptr<EVP_PKEY> ca_key;
  std::string upstream_ca_bundle;
  // Guest connections may resume their TLS sessions (tickets under keys
  // rotated every `rotation`, TLS 1.2 session ids), each bound to its sandbox
  // session and name (userspace/tls/ticket_keys.h). Off: every connection a
  // full handshake.
  bool guest_tls_resumption = false;
  GuestResumption guest_resumption;
  // Leaves not in the cache are minted on the worker pool, at most this
  // many per session (a guest cycling SNIs slows only itself).
  MintBudgetConfig mint_budget;
  // The workers broker calls (decisions, resolutions) and leaf minting run
  // on, shared fairly between sessions (common/fair_queue.h): `slots`
  // threads, at most `per_tenant` of them one session's, at most `queued`
  // calls waiting (then the session with the most waiting gives way). A
  // resolution can hold a worker for seconds: with 8 and 2, three sessions
  // doing only that still leave two workers to everyone else.
  FairLimits workers{.slots = 8, .per_tenant = 2, .per_lane = 0, .queued = 1024};
  // Streams one session's guests may reset, over all its HTTP/2
  // connections (each connection has its own bound too, h2_limits.h: 200
  // per 10 s); past it the connection resetting one more ends.
  TokenBucketConfig h2_session_resets{.per_second = 20, .burst = 400, .max_tracked = 16384};
  // I/O threads, one io_context each; connections are spread over them as
  // they are accepted. 0: one per core.
  unsigned io_threads = 0;
  // Idle intercepted upstream connections kept for the next guest
  // connection of the same session, host and identity.
  UpstreamPoolConfig upstream_pool;
  // Judges every upstream address immediately before it is connected, on
  // every path (the broker checked it already; this is the backstop against
  // a resolution or a table that changed in between). Null: the strictest
  // guard (no allowance, this namespace's local table).
  std::shared_ptr<const DestinationGuard> guard;
  // true: passthrough connections are relayed by the kernel (a sockhash
  // with an sk_skb stream verdict, kernel_splice.h) when it can be loaded.
  // false (default), or a kernel without it: splice(2) through the loop,
  // which measured twice as fast here (bench 2026-11-30: veth guest 8.7-9.6
  // against 4.35 Gbit/s; each redirected skb goes through the psock backlog
  // worker).
  bool kernel_splice = false;
  // Intercepted TLS offers HTTP/2 (ALPN "h2" before "http/1.1"): each
  // stream is decided and forwarded as one HTTP/1.1 request (h2_intercept.h).
  // Cleartext HTTP/2 (h2c) is refused either way.
  bool http2 = true;
  // A WebSocket a rule allowed: the largest message either way, and how
  // long it may idle (no byte either way) before both sides get a Close.
  WebSocketLimits websocket;
  // Intercepted requests to TLS upstreams offer HTTP/2 (ALPN "h2" before
  // "http/1.1"); an upstream that chooses it gets each request as a stream.
  bool upstream_http2 = true;
};

class TransparentProxy {
 public:
  // Binds (IP_TRANSPARENT, SO_MARK host reply) in the calling thread's netns
  // and starts its I/O loop thread and its worker pool. Throws
  // std::system_error. Any thread but the proxy's own.
  TransparentProxy(ProxyConfig config, ProxyPolicy& policy);
  // Stops the loop and joins the loop thread and the pool. Any thread but
  // the proxy's loop or pool.
  ~TransparentProxy();
  TransparentProxy(const TransparentProxy&) = delete;
  TransparentProxy& operator=(const TransparentProxy&) = delete;

  // The bound port. Never blocks; any thread.
  uint16_t port() const;
  // The listening sockets (one per address), for the datapath's listener
  // lookup (datapath/listener_lookup.h). Owned by the proxy.
  std::vector<int> listener_fds() const;
  // The listener's and the intercepted requests' counters. Never blocks; any thread.
  ProxyCountersSnapshot counters() const;
  InterceptCountersSnapshot request_counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zn::proxy
