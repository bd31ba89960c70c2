// The policy routing that lets TC ingress hand guest packets to host sockets
// (bpf_sk_assign): packets marked for steering are routed locally, or the
// stack drops them (IpInAddrErrors). Equivalent of, for IPv4 and IPv6:
//   ip rule add fwmark 0x200/0xf00 lookup 100
//   ip route add local 0.0.0.0/0 dev lo table 100   (::/0 for IPv6)
// All functions act in the calling thread's network namespace, whose lo must be up
// (IPv6 refuses routes through a down device).
#pragma once

#include <cstdint>

namespace zn::vmm {

struct SteeringRoutes {
  std::uint32_t mark;   // default ZN_MARK_STEER
  std::uint32_t mask;   // default ZN_MARK_MASK
  std::uint32_t table;  // default ZN_STEER_ROUTE_TABLE

  static SteeringRoutes defaults();  // the values of bpf/include/zn_abi.h
};

// Adds the missing rules and routes; already-present ones are left alone.
void install_steering_routes(const SteeringRoutes& config = SteeringRoutes::defaults());
// Removes whatever of them is present.
void remove_steering_routes(const SteeringRoutes& config = SteeringRoutes::defaults());
// True when both rules and both local routes are present.
bool steering_routes_installed(const SteeringRoutes& config = SteeringRoutes::defaults());

}  // namespace zn::vmm
