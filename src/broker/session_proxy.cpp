#include "broker/session_proxy.h"

#include <netinet/in.h>

#include <algorithm>

#include "userspace/destination_class.h"
#include "userspace/dns_transparent.h"

namespace zn::broker {
namespace {

dns::IpAddress address_of(const sockaddr_storage& ss) {
  dns::IpAddress a;
  if (ss.ss_family == AF_INET) {
    a.family = AF_INET;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, 4);
  } else {
    a.family = AF_INET6;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, 16);
  }
  return a;
}

bool in_l4_plan(const Session& s, const dns::IpAddress& dst, uint16_t port) {
  const uint8_t family = dst.family == AF_INET6 ? 6 : 4;
  return std::any_of(s.plan.l4_rules.begin(), s.plan.l4_rules.end(), [&](const dp::L4Rule& r) {
    if (r.family != family || (r.port != 0 && r.port != port)) return false;
    for (unsigned bit = 0; bit < r.prefix_len; ++bit) {
      const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
      if ((r.addr[bit / 8] & mask) != (dst.bytes[bit / 8] & mask)) return false;
    }
    return true;
  });
}

}  // namespace

proxy::UpstreamDecision SessionProxyPolicy::deny(proxy::UpstreamDecision d, const std::string& reason,
                                                 const proxy::ConnectionFacts& facts) {
  d.allow = false;
  d.reason = reason;
  d.addresses.clear();
  audit_.append({"egress:deny", d.session,
                 {{"host", d.host}, {"reason", reason}, {"dst", dns::endpoint_text(facts.original_dst)}}});
  return d;
}

proxy::UpstreamDecision SessionProxyPolicy::decide(const proxy::ConnectionFacts& facts) {
  proxy::UpstreamDecision d;
  const dns::IpAddress dst = address_of(facts.original_dst);
  const uint16_t port = dns::endpoint_port(facts.original_dst);
  d.port = port;
  d.host = dst.to_string();
  std::optional<Session> s = facts.guest.ss_family == AF_INET
                                 ? sessions_.find_by_guest_ip4(reinterpret_cast<const sockaddr_in*>(&facts.guest)->sin_addr)
                                 : sessions_.find_by_guest_ip6(reinterpret_cast<const sockaddr_in6*>(&facts.guest)->sin6_addr);
  if (!s) return deny(d, "unknown guest", facts);
  d.session = s->record.id;

  if (port == 80) return deny(d, "plain HTTP needs the L7 proxy, which is not built yet", facts);
  if (port != 443) {
    // Raw TCP: only to a destination an L4 rule put in the datapath.
    if (!in_l4_plan(*s, dst, port)) return deny(d, "no L4 rule for this destination", facts);
    d.allow = true;
    d.addresses = {dst};
    return d;
  }
  if (!facts.tls) return deny(d, "not TLS on port 443", facts);
  if (!facts.sni || facts.sni_is_ip_literal) {
    // Without a name only a rule naming the address itself can allow it.
    const std::string literal = facts.sni.value_or(dst.to_string());
    d.host = literal;
    HostVerdict v = s->policy->match_host(literal);
    if (!v.allowed) return deny(d, facts.sni ? "IP-literal SNI not named by a rule" : "no SNI", facts);
    auto named = dns::IpAddress::parse(literal);
    if (!named) return deny(d, "bad IP-literal SNI", facts);
    d.allow = true;
    d.addresses = {*named};
    return d;
  }
  d.host = *facts.sni;
  HostVerdict v = s->policy->match_host(*facts.sni);
  if (!v.allowed) return deny(d, v.reason, facts);
  if (v.intercept) return deny(d, "rule needs TLS interception, which is not built yet", facts);

  // Our own resolution, pinned to what this session was told: the guest's
  // choice of address never matters, and a name it never asked us about is
  // refused.
  const std::vector<dns::IpAddress> told = dns_.answers(s->record.id, *facts.sni);
  if (told.empty()) return deny(d, "name was not resolved through governed DNS", facts);
  for (const dns::IpAddress& a : resolver_.resolve_now(*facts.sni)) {
    if (std::find(told.begin(), told.end(), a) == told.end()) continue;
    if (proxy::classify_destination(a).internal()) continue;  // a name rule never reaches inside
    d.addresses.push_back(a);
  }
  if (d.addresses.empty()) return deny(d, "no permitted upstream address", facts);
  d.allow = true;
  return d;
}

void SessionProxyPolicy::on_closed(const proxy::ConnectionSummary& c) {
  audit_.append({"egress:allow", c.session,
                 {{"host", c.host},
                  {"mode", "passthrough"},
                  {"bytes_up", c.bytes_from_guest},
                  {"bytes_down", c.bytes_to_guest},
                  {"duration_ms", c.duration.count()},
                  {"end", c.end}}});
}

}  // namespace zn::broker
