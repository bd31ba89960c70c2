// Packet fixtures for every datapath verdict, shared by the fixture tests and
// the verdict benchmark: {frame in, direction, mark, expected verdict, why}.
#pragma once

#include <arpa/inet.h>
#include <linux/bpf.h>

#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "support/packet_builder.h"
#include "support/host_sockets.h"
#include "userspace/datapath/datapath.h"
#include "userspace/datapath/maps.h"

namespace zn::test {

enum class Direction { kIngress, kEgress };

struct VerdictFixture {
  std::string name;
  Direction direction;
  Bytes frame;
  unsigned expected_verdict;  // enum zn_verdict
  uint32_t mark = 0;
  std::string why;
  // BPF_PROG_TEST_RUN refuses frames whose IP header is incomplete (EINVAL);
  // those fixtures run only through a real TAP (namespace tests).
  bool real_tap_only = false;
};

void PrintTo(const VerdictFixture& f, std::ostream* os);

// The guest every fixture pretends to come from.
struct FixtureGuest {
  static constexpr uint32_t kSessionIdx = 7;
  Mac guest_mac{0x02, 0x7a, 0x6e, 0x00, 0x00, 0x01};
  Mac host_mac{0x02, 0x7a, 0x6e, 0xff, 0x00, 0x01};
  in_addr guest_ip4 = ip4("198.19.0.2");
  in_addr gateway_ip4 = ip4("198.19.0.1");
  in6_addr guest_ip6 = ip6("2001:db8:19::2");
  in6_addr guest_ip6_ll = ip6("fe80::7a:6eff:fe00:1");
  in6_addr gateway_ip6 = ip6("2001:db8:19::1");
  in6_addr gateway_ip6_ll = ip6("fe80::7a:6eff:feff:1");  // EUI-64 of host_mac
  dp::SessionEntry session() const;
};

std::vector<VerdictFixture> verdict_fixtures();

// A private (unpinned) datapath with the fixture guest on the loopback
// ifindex (what BPF_PROG_TEST_RUN uses) and real listeners behind the proxy
// and DNS addresses, so steering paths get as far as bpf_sk_assign — which
// refuses to work outside real TC ingress and answers drop:assign_failed.
class FixtureDatapath {
 public:
  FixtureDatapath();
  dp::Datapath& datapath() { return *datapath_; }
  dp::DatapathMaps& maps() { return maps_; }
  // Runs the frame through the program `repeat` times; returns the TC action.
  int run(const VerdictFixture& f, uint32_t repeat = 1, uint32_t* duration_ns = nullptr);
  // The verdict whose counter the run moved (ZN_VERDICT_COUNT: none).
  unsigned verdict_of(const VerdictFixture& f);
  int run_prog(int prog_fd, const Bytes& frame, uint32_t mark, uint32_t repeat, uint32_t* duration_ns);

 private:
  std::unique_ptr<dp::Datapath> datapath_;
  dp::DatapathMaps maps_;
  TransparentTcpListener proxy4_, proxy6_, dns_tcp4_, dns_tcp6_;
  TransparentUdpSocket dns_udp4_, dns_udp6_;
};

// An L4 rule for the trie's tests: "198.18.0.0", 16, port (0 = any).
inline dp::L4Rule l4_rule(const char* addr, uint8_t prefix_len, uint16_t port, uint32_t rule_id = 0) {
  dp::L4Rule r;
  r.family = std::strchr(addr, ':') ? 6 : 4;
  inet_pton(r.family == 6 ? AF_INET6 : AF_INET, addr, r.addr.data());
  r.prefix_len = prefix_len;
  r.port = port;
  r.rule_id = rule_id;
  return r;
}

}  // namespace zn::test
