#include "broker/exposure/ingress_broker.h"

#include <netinet/in.h>

#include <cstring>

#include "userspace/net/address.h"

namespace zn::broker {
namespace {

// The client's address without its port: what a binding is tied to.
std::string client_address(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return net::to_string(reinterpret_cast<const sockaddr_in&>(ss).sin_addr);
  if (ss.ss_family == AF_INET6) return net::to_string(reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr);
  return "";
}

sockaddr_storage v4(in_addr addr, uint16_t port) {
  sockaddr_storage ss{};
  auto& sin = reinterpret_cast<sockaddr_in&>(ss);
  sin.sin_family = AF_INET;
  sin.sin_addr = addr;
  sin.sin_port = htons(port);
  return ss;
}

sockaddr_storage v6(const in6_addr& addr, uint16_t port) {
  sockaddr_storage ss{};
  auto& sin6 = reinterpret_cast<sockaddr_in6&>(ss);
  sin6.sin6_family = AF_INET6;
  sin6.sin6_addr = addr;
  sin6.sin6_port = htons(port);
  return ss;
}

// One body for every refusal of a ticket port: which check failed is the
// audit's to know, not the client's.
constexpr const char* kRefusedBody = "forbidden: this port admits a valid one-time ticket";
constexpr const char* kThrottledBody = "too many refused requests from this address: try again later";

}  // namespace

IngressBroker::IngressBroker(const SessionDirectory& sessions, TicketBook& tickets, AuditLog& audit,
                             IngressBrokerOptions options)
    : sessions_(sessions),
      tickets_(tickets),
      audit_(audit),
      options_(options),
      throttle_(options.refusals, [] { return std::chrono::steady_clock::now(); }) {}

ingress::AdmitDecision IngressBroker::refuse(const ingress::AdmitFacts& facts, const std::string& client,
                                             const std::string& reason, int status) {
  throttle_.charge(client_key(facts.client));
  audit_.post(
      {"ingress:deny", facts.session, {{"port", facts.port}, {"client", client}, {"reason", reason}}});
  ingress::AdmitDecision d;
  d.status = status;
  d.reason = kRefusedBody;
  return d;
}

ingress::AdmitDecision IngressBroker::admit(const ingress::AdmitFacts& facts) {
  const std::string client = client_address(facts.client);
  const SessionPtr s = sessions_.get(facts.session);
  if (!s) return refuse(facts, client, "no_session");
  auto it = s->record.exposed.find(facts.port);
  if (it == s->record.exposed.end()) return refuse(facts, client, "not_exposed");
  const ExposedPort& exposure = it->second;
  // A client that used up its refusals is refused unread (no ticket lookup,
  // no record of its own: counted for flush_refusals), whatever it carries.
  const std::optional<std::chrono::seconds> wait =
      exposure.public_mode ? std::nullopt
                           : throttle_.throttled(facts.session, facts.port, client_key(facts.client));
  if (wait) {
    ingress::AdmitDecision throttled;
    throttled.status = 429;
    throttled.reason = kThrottledBody;
    throttled.retry_after = *wait;
    return throttled;
  }

  ingress::AdmitDecision d;
  if (exposure.public_mode) {
    d.via = "public";
  } else if (!facts.error.empty()) {
    // Parse errors and take_admission's reasons never quote the request.
    throttle_.charge(client_key(facts.client));
    audit_.post(
        {"ingress:deny",
         facts.session,
         {{"port", facts.port}, {"client", client}, {"reason", "malformed"}, {"error", facts.error}}});
    ingress::AdmitDecision refused;
    refused.status = 400;
    refused.reason = "bad request";
    return refused;
  } else if (facts.ticket) {
    const TicketVerdict v = tickets_.redeem(facts.session, facts.port, *facts.ticket);
    if (v != TicketVerdict::kOk) return refuse(facts, client, std::string(ticket_verdict_name(v)));
    d.via = "ticket";
    d.set_binding = tickets_.bind(facts.session, facts.port, client, options_.binding_ttl);
    d.binding_ttl = options_.binding_ttl;
    d.until = std::chrono::steady_clock::now() + options_.binding_ttl;
  } else if (facts.binding) {
    std::chrono::steady_clock::time_point until;
    switch (tickets_.check_binding(facts.session, facts.port, *facts.binding, client, &until)) {
      case TicketBook::BindingVerdict::kOk:
        break;
      case TicketBook::BindingVerdict::kExpired:
        return refuse(facts, client, "binding_expired");
      case TicketBook::BindingVerdict::kOtherClient:
        return refuse(facts, client, "binding_other_client");
      case TicketBook::BindingVerdict::kUnknown:
        return refuse(facts, client, "unknown_binding");
    }
    d.via = "binding";
    d.until = until;
  } else {
    return refuse(facts, client, "no_ticket");
  }

  if (exposure.family == 6) {
    d.source = v6(s->net.gateway_ip6, 0);
    d.guest = v6(s->net.guest_ip6, facts.port);
  } else {
    d.source = v4(s->net.gateway_ip4, 0);
    d.guest = v4(s->net.guest_ip4, facts.port);
  }
  d.allow = true;
  audit_.post({"ingress:admit", facts.session, {{"port", facts.port}, {"client", client}, {"via", d.via}}});
  return d;
}

void IngressBroker::on_closed(const ingress::ExposureSummary& summary) {
  audit_.post({"ingress:close",
               summary.session,
               {{"port", summary.port},
                {"client", client_address(summary.client)},
                {"via", summary.via},
                {"bytes_from_client", summary.bytes_from_client},
                {"bytes_to_client", summary.bytes_to_client},
                {"bytes_dropped", summary.bytes_dropped},
                {"duration_ms", summary.duration.count()},
                {"end", summary.end}}});
}

}  // namespace zn::broker

namespace zn::broker {

void IngressBroker::flush_refusals() {
  for (const RefusalThrottle::Summary& r : throttle_.take_summaries())
    audit_.post({"ingress:deny",
                 r.session,
                 {{"port", r.port}, {"client", r.client}, {"reason", "rate_limited"}, {"count", r.count}}});
}

}  // namespace zn::broker
