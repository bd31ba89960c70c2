// The counter lists the metrics and the status verb are written from: each
// live counter reaches its snapshot field, and for_each_counter visits every
// counter once, by its field's name, in list order.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "userspace/dns/counters.h"
#include "userspace/proxy/counters.h"

namespace zn::broker::test {
namespace {

using Visited = std::vector<std::pair<std::string, uint64_t>>;

template <class Snapshot>
Visited visit(const Snapshot& s) {
  Visited out;
  for_each_counter(s, [&](const auto& info, uint64_t n) {
    EXPECT_FALSE(info.help.empty()) << info.name;
    out.emplace_back(std::string(info.name), n);
  });
  return out;
}

TEST(Counters, DnsSnapshotAndVisitCoverEveryCounter) {
  dns::DnsCounters c;
  c.queries += 1;
  c.allowed += 2;
  c.denied += 3;
  c.refused += 4;
  c.malformed += 5;
  c.unsupported += 6;
  c.upstream_failures += 7;
  c.rate_limited += 11;
  c.session_busy += 12;
  c.tcp_rejected += 8;
  c.send_errors += 9;
  c.internal_errors += 10;
  EXPECT_EQ(visit(c.snapshot()), (Visited{{"queries", 1},
                                          {"allowed", 2},
                                          {"denied", 3},
                                          {"refused", 4},
                                          {"malformed", 5},
                                          {"unsupported", 6},
                                          {"upstream_failures", 7},
                                          {"rate_limited", 11},
                                          {"session_busy", 12},
                                          {"tcp_rejected", 8},
                                          {"send_errors", 9},
                                          {"internal_errors", 10}}));
}

TEST(Counters, ProxySnapshotAndVisitCoverEveryCounter) {
  proxy::ProxyCounters c;
  c.accepted += 1;
  c.allowed += 2;
  c.intercepted += 3;
  c.denied += 4;
  c.timed_out += 5;
  c.tls_handshake_failures += 6;
  c.rejected_busy += 7;
  c.rejected_guest_cap += 8;
  c.idle_closed += 9;
  c.accept_errors += 10;
  c.mint_refused += 12;
  c.workers_busy += 14;
  c.upstream_failures += 11;
  c.tls_resumed += 12;
  c.decided_on_workers += 15;
  c.kernel_spliced += 13;
  EXPECT_EQ(visit(c.snapshot()), (Visited{{"accepted", 1},
                                          {"allowed", 2},
                                          {"intercepted", 3},
                                          {"denied", 4},
                                          {"timed_out", 5},
                                          {"tls_handshake_failures", 6},
                                          {"rejected_busy", 7},
                                          {"rejected_guest_cap", 8},
                                          {"idle_closed", 9},
                                          {"accept_errors", 10},
                                          {"mint_refused", 12},
                                          {"workers_busy", 14},
                                          {"upstream_failures", 11},
                                          {"tls_resumed", 12},
                                          {"decided_on_workers", 15},
                                          {"kernel_spliced", 13}}));
}

TEST(Counters, InterceptSnapshotAndVisitCoverEveryCounter) {
  proxy::InterceptCounters c;
  c.requests += 1;
  c.allowed += 2;
  c.denied += 3;
  c.bad_requests += 4;
  c.upstream_failures += 5;
  c.guest_cancels += 13;
  c.upstream_reused += 6;
  c.upstream_resumed += 8;
  c.upstream_h2 += 12;
  c.websockets += 7;
  c.h2_connections += 9;
  c.h2_streams += 10;
  c.h2_limit_trips += 11;
  c.session_cap_refusals += 14;
  EXPECT_EQ(visit(c.snapshot()), (Visited{{"requests", 1},
                                          {"allowed", 2},
                                          {"denied", 3},
                                          {"bad_requests", 4},
                                          {"upstream_failures", 5},
                                          {"guest_cancels", 13},
                                          {"upstream_reused", 6},
                                          {"upstream_resumed", 8},
                                          {"upstream_h2", 12},
                                          {"websockets", 7},
                                          {"h2_connections", 9},
                                          {"h2_streams", 10},
                                          {"h2_limit_trips", 11},
                                          {"session_cap_refusals", 14}}));
}

}  // namespace
}  // namespace zn::broker::test
