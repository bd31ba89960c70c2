// What the responder did, each counter declared once in ZN_DNS_COUNTERS:
// the atomic set the responder increments, the snapshot of plain values and
// for_each_counter are generated from it, so whatever writes the counters out
// (zerod's metrics and status) cannot miss one or name one twice.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

// X(name, outcome, help). `outcome` is the counter's result in zerod's
// zn_dns_queries_total ("" when it is not one); the order is the order they
// are written out.
#define ZN_DNS_COUNTERS(X)                                                                   \
  X(queries, "", "messages received (UDP datagrams, TCP messages)")                          \
  X(allowed, "allowed", "allowed names answered (resolved or NODATA)")                       \
  X(denied, "denied", "policy denied: NXDOMAIN/REFUSED, never forwarded")                    \
  X(refused, "refused", "unknown source session")                                            \
  X(malformed, "malformed", "dropped or answered FORMERR")                                   \
  X(unsupported, "", "opcode not QUERY or class not IN: NOTIMP")                             \
  X(upstream_failures, "upstream_failure", "resolver SERVFAIL / timeouts / overload")        \
  X(rate_limited, "rate_limited", "over the session's query rate: REFUSED, never forwarded") \
  X(session_busy, "session_busy",                                                            \
    "the session's queries at the resolver at its cap: REFUSED, never forwarded")            \
  X(tcp_rejected, "", "connections closed at the connection cap")                            \
  X(send_errors, "", "replies that could not be sent")                                       \
  X(internal_errors, "", "exceptions from policy/resolver code: SERVFAIL")

namespace zn::dns {

// One counter as ZN_DNS_COUNTERS declares it.
struct CounterInfo {
  std::string_view name;     // the field's name
  std::string_view outcome;  // "" when it is not a query outcome zerod's metrics show
  std::string_view help;
};

#define ZN_DNS_FIELD_(name, outcome, help) uint64_t name = 0;
#define ZN_DNS_ATOMIC_(name, outcome, help) std::atomic<uint64_t> name{0};
#define ZN_DNS_LOAD_(name, outcome, help) s.name = name.load();
#define ZN_DNS_VISIT_(name, outcome, help) f(CounterInfo{#name, outcome, help}, s.name);

// The counters read at one moment (each on its own).
struct DnsCountersSnapshot {
  ZN_DNS_COUNTERS(ZN_DNS_FIELD_)
};

// Incremented on the DNS responder's loop; read from any thread.
struct DnsCounters {
  ZN_DNS_COUNTERS(ZN_DNS_ATOMIC_)

  // Any thread.
  DnsCountersSnapshot snapshot() const {
    DnsCountersSnapshot s;
    ZN_DNS_COUNTERS(ZN_DNS_LOAD_)
    return s;
  }
};

// f(const CounterInfo&, uint64_t) for each counter, in ZN_DNS_COUNTERS order. Any thread.
template <class F>
void for_each_counter(const DnsCountersSnapshot& s, F&& f) {
  ZN_DNS_COUNTERS(ZN_DNS_VISIT_)
}

#undef ZN_DNS_FIELD_
#undef ZN_DNS_ATOMIC_
#undef ZN_DNS_LOAD_
#undef ZN_DNS_VISIT_

}  // namespace zn::dns
