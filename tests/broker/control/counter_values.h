// Every DNS and proxy counter set to a value of its own, so a counter shown
// under the wrong name, twice or not at all changes the expected text.
#pragma once

#include "userspace/dns/counters.h"
#include "userspace/proxy/counters.h"

namespace zn::broker::test {

inline dns::DnsCountersSnapshot dns_values() {
  dns::DnsCountersSnapshot d;
  d.queries = 101;
  d.allowed = 102;
  d.denied = 103;
  d.refused = 104;
  d.malformed = 105;
  d.unsupported = 106;
  d.upstream_failures = 107;
  d.tcp_rejected = 108;
  d.send_errors = 109;
  d.internal_errors = 110;
  d.rate_limited = 111;
  d.session_busy = 112;
  return d;
}

inline proxy::ProxyCountersSnapshot connection_values() {
  proxy::ProxyCountersSnapshot p;
  p.accepted = 201;
  p.allowed = 202;
  p.denied = 203;
  p.timed_out = 204;
  p.upstream_failures = 205;
  p.rejected_busy = 206;
  p.idle_closed = 207;
  p.intercepted = 208;
  p.tls_handshake_failures = 209;
  p.rejected_guest_cap = 210;
  p.accept_errors = 211;
  p.mint_refused = 212;
  p.kernel_spliced = 213;
  p.workers_busy = 214;
  return p;
}

inline proxy::InterceptCountersSnapshot request_values() {
  proxy::InterceptCountersSnapshot r;
  r.requests = 301;
  r.allowed = 302;
  r.denied = 303;
  r.upstream_failures = 304;
  r.bad_requests = 305;
  r.h2_limit_trips = 306;
  r.session_cap_refusals = 310;
  return r;
}

}  // namespace zn::broker::test
