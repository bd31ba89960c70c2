// What the proxy counted, each counter declared once: the connections its
// listener handled (ZN_PROXY_COUNTERS) and the requests of intercepted
// connections (ZN_INTERCEPT_COUNTERS). The atomic set each loop increments,
// the snapshot of plain values and for_each_counter are generated from the
// lists, so whatever writes the counters out (zerod's metrics) cannot miss
// one or name one twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

// X(name, outcome, help). `outcome` is the counter's result in zerod's
// zn_proxy_connections_total ("" when it is not one); the order is the order
// they are written out.
#define ZN_PROXY_COUNTERS(X)                                                                          \
  X(accepted, "accepted", "connections accepted")                                                     \
  X(allowed, "spliced", "connections spliced to the upstream the broker chose")                       \
  X(intercepted, "intercepted", "connections intercepted (TLS terminated, or plain HTTP)")            \
  X(denied, "reset", "connections the broker or the guard refused: reset")                            \
  X(timed_out, "hello_timeout", "no complete ClientHello by the hello deadline: reset")               \
  X(tls_handshake_failures, "tls_handshake_failure", "intercepted guests whose TLS handshake failed") \
  X(rejected_busy, "busy", "reset at accept: the proxy's connection cap")                             \
  X(rejected_guest_cap, "guest_cap", "reset at accept: the guest address's connection cap")           \
  X(idle_closed, "idle_closed", "spliced connections closed at the idle timeout")                     \
  X(accept_errors, "accept_error", "failed accepts (EMFILE...), each followed by a backoff")          \
  X(mint_refused, "mint_budget", "intercepted connections reset: the session's leaf minting budget")  \
  X(workers_busy, "workers_busy",                                                                     \
    "reset: the proxy's workers had too much waiting, most of it this session's")                     \
  X(upstream_failures, "", "spliced connections whose upstream could not be connected")               \
  X(tls_resumed, "", "intercepted guests whose TLS handshake resumed an earlier session")             \
  X(decided_on_workers, "", "connections decided on a worker (a name to resolve), not on the loop")   \
  X(kernel_spliced, "kernel_spliced", "connections relayed by the kernel's sockmap")

// X(name, outcome, help). `outcome` is the counter's result in zerod's
// zn_proxy_requests_total ("" when it is not one).
#define ZN_INTERCEPT_COUNTERS(X)                                                                            \
  X(requests, "", "well-formed requests put to the broker")                                                 \
  X(allowed, "allowed", "requests forwarded and answered by the upstream")                                  \
  X(denied, "denied", "requests refused (policy, operator, rate, protocol upgrade)")                        \
  X(bad_requests, "malformed", "requests refused as malformed (head, target or body): 400")                 \
  X(upstream_failures, "upstream_failure", "forwarded requests whose upstream failed")                      \
  X(guest_cancels, "guest_cancelled",                                                                       \
    "forwarded requests the guest gave up on (reset, closed, stream cancelled)")                            \
  X(upstream_reused, "",                                                                                    \
    "requests sent on an upstream connection already open (left idle, or HTTP/2 shared)")                   \
  X(upstream_resumed, "", "upstream TLS handshakes that resumed a kept session")                            \
  X(upstream_h2, "", "upstream TLS connections that chose HTTP/2")                                          \
  X(websockets, "", "WebSockets relayed (the upstream switched protocols)")                                 \
  X(h2_connections, "", "intercepted connections that spoke HTTP/2")                                        \
  X(h2_streams, "", "HTTP/2 streams opened by guests (each one request)")                                   \
  X(h2_limit_trips, "h2_limit", "HTTP/2 bounds a guest reached (floods, oversized header blocks): refused") \
  X(session_cap_refusals, "session_cap", "requests refused 503: their session held its cap of sockets")

namespace zn::proxy {

// One counter as its list declares it.
struct CounterInfo {
  std::string_view name;     // the field's name
  std::string_view outcome;  // "" when it is not an outcome zerod's metrics show
  std::string_view help;
};

#define ZN_PROXY_FIELD_(name, outcome, help) uint64_t name = 0;
#define ZN_PROXY_ATOMIC_(name, outcome, help) std::atomic<uint64_t> name{0};
#define ZN_PROXY_LOAD_(name, outcome, help) s.name = name.load();
#define ZN_PROXY_VISIT_(name, outcome, help) f(CounterInfo{#name, outcome, help}, s.name);

// The listener's counters, read at one moment (each on its own).
struct ProxyCountersSnapshot {
  ZN_PROXY_COUNTERS(ZN_PROXY_FIELD_)
};

// Incremented on the proxy's I/O loop; read from any thread.
struct ProxyCounters {
  ZN_PROXY_COUNTERS(ZN_PROXY_ATOMIC_)

  // Any thread.
  ProxyCountersSnapshot snapshot() const {
    ProxyCountersSnapshot s;
    ZN_PROXY_COUNTERS(ZN_PROXY_LOAD_)
    return s;
  }
};

// The intercepted requests' counters, read at one moment (each on its own).
struct InterceptCountersSnapshot {
  ZN_INTERCEPT_COUNTERS(ZN_PROXY_FIELD_)
};

// Incremented by serve_intercepted on the proxy's I/O loop; read from any thread.
struct InterceptCounters {
  ZN_INTERCEPT_COUNTERS(ZN_PROXY_ATOMIC_)

  // Any thread.
  InterceptCountersSnapshot snapshot() const {
    InterceptCountersSnapshot s;
    ZN_INTERCEPT_COUNTERS(ZN_PROXY_LOAD_)
    return s;
  }
};

// f(const CounterInfo&, uint64_t) for each counter, in list order. Any thread.
template <class F>
void for_each_counter(const ProxyCountersSnapshot& s, F&& f) {
  ZN_PROXY_COUNTERS(ZN_PROXY_VISIT_)
}
template <class F>
void for_each_counter(const InterceptCountersSnapshot& s, F&& f) {
  ZN_INTERCEPT_COUNTERS(ZN_PROXY_VISIT_)
}

#undef ZN_PROXY_FIELD_
#undef ZN_PROXY_ATOMIC_
#undef ZN_PROXY_LOAD_
#undef ZN_PROXY_VISIT_

}  // namespace zn::proxy
