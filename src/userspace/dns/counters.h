// What the responder did, readable from any thread while it runs.
#pragma once

#include <atomic>
#include <cstdint>

namespace zn::dns {

struct DnsCountersSnapshot {
  uint64_t queries = 0;            // messages received (UDP datagrams, TCP messages)
  uint64_t allowed = 0;            // allowed names answered (resolved or NODATA)
  uint64_t denied = 0;             // policy denied: NXDOMAIN/REFUSED, never forwarded
  uint64_t refused = 0;            // unknown source session
  uint64_t malformed = 0;          // dropped or answered FORMERR
  uint64_t unsupported = 0;        // opcode not QUERY or class not IN: NOTIMP
  uint64_t upstream_failures = 0;  // resolver SERVFAIL / timeouts / overload
  uint64_t tcp_rejected = 0;       // connections closed at the connection cap
  uint64_t send_errors = 0;        // replies that could not be sent
  uint64_t internal_errors = 0;    // exceptions from policy/resolver code: SERVFAIL
};

struct DnsCounters {
  std::atomic<uint64_t> queries{0}, allowed{0}, denied{0}, refused{0}, malformed{0},
      unsupported{0}, upstream_failures{0}, tcp_rejected{0}, send_errors{0}, internal_errors{0};

  DnsCountersSnapshot snapshot() const {
    return {queries.load(), allowed.load(),     denied.load(),
            refused.load(), malformed.load(),   unsupported.load(),
            upstream_failures.load(), tcp_rejected.load(), send_errors.load(),
            internal_errors.load()};
  }
};

}  // namespace zn::dns
