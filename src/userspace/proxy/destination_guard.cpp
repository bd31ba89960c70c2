#include "userspace/proxy/destination_guard.h"

#include <algorithm>
#include <array>

#include "userspace/net/transparent_socket.h"

namespace zn::proxy {

DestinationGuard::DestinationGuard(GuardConfig config, std::shared_ptr<const net::LocalAddresses> local)
    : config_(std::move(config)), local_(std::move(local)) {}

bool DestinationGuard::allowed(const net::IpAddress& address) const {
  return std::any_of(config_.allow.begin(), config_.allow.end(),
                     [&](const net::AddressPrefix& p) { return p.contains(address); });
}

bool DestinationGuard::allowed_inside(const net::IpAddress& address, const net::AddressPrefix& region) const {
  return std::any_of(config_.allow.begin(), config_.allow.end(),
                     [&](const net::AddressPrefix& p) { return p.contains(address) && p.within(region); });
}

std::optional<std::string> DestinationGuard::refusal(const net::IpAddress& address) const {
  return check(net::unmap_ipv4(address), false);
}

std::optional<std::string> DestinationGuard::check(const net::IpAddress& a, bool via_nat64) const {
  if (!via_nat64 && config_.nat64 && config_.nat64->contains(a)) {
    // The translator reaches the IPv4 address it carries: that is the
    // destination to judge (the prefix itself is the operator's choice).
    std::array<uint8_t, 4> v4{};
    std::copy(a.bytes.begin() + 12, a.bytes.end(), v4.begin());
    auto why = check(net::IpAddress::v4(v4), true);
    if (why) return "NAT64 to " + *why;
    return std::nullopt;
  }
  if (local_) {
    if (auto p = local_->find(a); p && !allowed_inside(a, *p)) return std::string("local address");
  }
  for (const net::AddressPrefix& pool : config_.guest_pools)
    if (pool.contains(a) && !allowed_inside(a, pool)) return std::string("guest pool");
  const DestinationVerdict v = classify_destination(a);
  if (v.internal() && !allowed(a)) return describe_destination(v);
  return std::nullopt;
}

std::string upstream_text(const net::IpAddress& address, uint16_t port) {
  return net::endpoint_text(net::make_endpoint(address.to_string(), port));
}

}  // namespace zn::proxy
