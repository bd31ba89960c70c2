// The one place that decides whether the proxy may connect to an address on
// a guest's behalf, whatever path got there (passthrough, interception, plain
// HTTP, an L4 rule) and whoever resolved the name (upstream DNS, static
// config, a policy's IP literal). Checked by the broker when it picks
// upstream addresses (a clean refusal with an audit reason) and again
// immediately before every connect, on the address actually connected.
//
// Refused, in this order:
//   1. this host: any prefix of the local table or interface address
//      (LocalAddresses) — unless an allowance lies inside that prefix and
//      covers the address (a broad allowance never opens the host itself);
//   2. the guest pools (another guest, a session's gateway) — unless an
//      allowance inside the pool covers the address;
//   3. every IANA special-purpose class that is not globally reachable and
//      the IPv6 transition forms — unless an allowance covers the address.
// IPv4-mapped addresses are checked as their IPv4 address. A configured
// NAT64 prefix is checked as the IPv4 address it carries.
//
// Allowances come from zerod's own config only (`upstream_allow`), never
// from a guest-facing policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/proxy/destination_class.h"
#include "userspace/net/local_addresses.h"

namespace zn::proxy {

struct GuardConfig {
  std::vector<net::AddressPrefix> guest_pools;  // address_pool_ipv4 / address_pool_ipv6
  std::vector<net::AddressPrefix> allow;        // upstream_allow
  std::optional<net::AddressPrefix> nat64;      // nat64_prefix (a /96), unset: NAT64 refused
};

class DestinationGuard {
 public:
  // `local` null: no local table (unit tests of the other checks).
  explicit DestinationGuard(GuardConfig config, std::shared_ptr<const net::LocalAddresses> local = nullptr);

  // nullopt: the proxy may connect. Otherwise why not, for the audit and the
  // guest's 403: "local address", "guest pool", "special-purpose: documentation".
  std::optional<std::string> refusal(const net::IpAddress& address) const;

  const GuardConfig& config() const { return config_; }

 private:
  std::optional<std::string> check(const net::IpAddress& address, bool via_nat64) const;
  bool allowed_inside(const net::IpAddress& address, const net::AddressPrefix& region) const;
  bool allowed(const net::IpAddress& address) const;

  GuardConfig config_;
  std::shared_ptr<const net::LocalAddresses> local_;
};

// "198.18.0.10:443", "[2001:db8:18::10]:443": the audit's "upstream".
std::string upstream_text(const net::IpAddress& address, uint16_t port);

}  // namespace zn::proxy
