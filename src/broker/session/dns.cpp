#include "broker/session/dns.h"

#include <netinet/in.h>

#include <algorithm>
#include <future>

#include "broker/session/canary_names.h"
#include "broker/session/cap_handles.h"
#include "userspace/dns/ares_resolver.h"
#include "userspace/dns/static_resolver.h"

namespace zn::broker {

SessionDnsPolicy::SessionDnsPolicy(const SessionDirectory& sessions, AuditLog& audit,
                                   SessionDnsOptions options)
    : sessions_(sessions),
      audit_(audit),
      capability_addresses_(std::move(options.capability_addresses)),
      clock_(std::move(options.clock)),
      unanswered_(
          [this](const std::string& sid, const nlohmann::json& detail) {
            audit_.post({"dns:unanswered", sid, detail});
          },
          options.unanswered_names_per_second) {}

std::optional<dns::DnsSession> SessionDnsPolicy::session_of(const sockaddr_storage& source) const {
  SessionPtr s = sessions_.find_by_guest(source);
  if (!s) return std::nullopt;
  std::string id = s->record.id;
  return dns::DnsSession{std::move(id), std::move(s)};
}

SessionPtr SessionDnsPolicy::session_for(const dns::DnsSession& session) const {
  if (session.owner) return std::static_pointer_cast<const Session>(session.owner);
  return sessions_.get(session.id);
}

dns::DnsDecision SessionDnsPolicy::decide(const dns::DnsSession& session, const std::string& qname) const {
  const SessionPtr s = session_for(session);
  if (!s) return {false, "no session"};
  const std::string& session_id = session.id;
  // Fail closed: an answer is a crossing the audit must be able to record.
  if (!audit_.admits()) return {false, "audit unavailable"};
  // A planted fake credential spelled into a name is exfiltration whatever
  // the name's domain: refused even where the policy allows the domain.
  if (auto canary = canary_in_name(s->policy->policy().canaries, qname)) {
    audit_.post({"secret:canary",
                 session_id,
                 {{"where", nlohmann::json::array({"dns"})},
                  {"name", qname},
                  {"canary", nlohmann::json::array({*canary})}}});
    return {false, "canary"};
  }
  // The host's own service: answered with its addresses, whatever the
  // policy says of the name (it never leaves the host either way).
  if (!capability_addresses_.empty() && qname == kCapabilityHost) return {true, "", capability_addresses_};
  HostVerdict v = s->policy->match_host(qname);
  return {v.allowed, v.allowed ? "" : v.reason, {}};
}

void SessionDnsPolicy::on_answer(const dns::DnsSession& session, const std::string& qname,
                                 const std::vector<net::IpAddress>& addresses, uint32_t ttl) {
  const SessionPtr s = session_for(session);
  if (s)
    answers_evicted_.fetch_add(s->state->answers.record(qname, addresses, ttl, now()),
                               std::memory_order_relaxed);
  const std::string& session_id = session.id;
  // On the DNS loop, once per answer: the detail is built on the audit's
  // writer (AuditEvent::detail_later).
  audit_.post({"dns:allow", session_id, {}, [qname, addresses, ttl] {
                 nlohmann::json list = nlohmann::json::array();
                 for (const auto& addr : addresses) list.push_back(addr.to_string());
                 return nlohmann::json{{"name", qname}, {"answers", list}, {"ttl", ttl}};
               }});
}

void SessionDnsPolicy::on_unanswered(const dns::DnsSession& session, const std::string& qname,
                                     dns::NoAnswer why, bool forwarded) {
  DnsOutcome outcome = DnsOutcome::Error;
  if (why == dns::NoAnswer::NxDomain) outcome = DnsOutcome::NxDomain;
  if (why == dns::NoAnswer::NoData) outcome = DnsOutcome::NoData;
  unanswered_.add(session.id, qname, outcome, forwarded);
}

void SessionDnsPolicy::on_denied(const dns::DnsSession& session, const std::string& qname,
                                 const std::string& reason) {
  audit_.post({"dns:deny", session.id, {{"name", qname}, {"reason", reason}}});
}

std::vector<net::IpAddress> SessionDnsPolicy::answers(const Session& session,
                                                      const std::string& qname) const {
  return session.state->answers.lookup(qname, now());
}

ConfiguredResolver::ConfiguredResolver(const std::map<std::string, std::vector<std::string>>& static_names,
                                       const std::vector<std::string>& upstream) {
  for (const auto& [name, addrs] : static_names)
    for (const auto& text : addrs)
      if (auto a = net::IpAddress::parse(text)) static_[name].push_back(*a);
  static_resolver_ = std::make_unique<dns::StaticResolver>(static_);
  if (!upstream.empty()) upstream_ = std::make_unique<dns::AresResolver>(dns::AresConfig{upstream});
}

void ConfiguredResolver::resolve(const std::string& name, dns::QType qtype, Callback callback) {
  if (static_.count(name) || !upstream_) {
    static_resolver_->resolve(name, qtype, std::move(callback));
    return;
  }
  upstream_->resolve(name, qtype, std::move(callback));
}

}  // namespace zn::broker

namespace zn::broker {

std::vector<net::IpAddress> ConfiguredResolver::resolve_now(const std::string& name) {
  return resolve_timed(name).addresses;
}

TimedAddresses ConfiguredResolver::resolve_timed(const std::string& name) {
  TimedAddresses out;
  bool complete = true;
  uint32_t ttl = UINT32_MAX;
  for (dns::QType qtype : {dns::QType::A, dns::QType::AAAA}) {
    auto promise = std::make_shared<std::promise<dns::ResolveResult>>();
    auto answer = promise->get_future();
    resolve(name, qtype, [promise](dns::ResolveResult r) { promise->set_value(std::move(r)); });
    if (answer.wait_for(std::chrono::seconds(3)) != std::future_status::ready) {
      complete = false;
      continue;
    }
    dns::ResolveResult r = answer.get();
    // A family that failed makes the whole answer unfit to remember: the
    // next connection asks again rather than living without that family.
    if (r.rcode != dns::Rcode::NoError && r.rcode != dns::Rcode::NxDomain) complete = false;
    if (!r.addresses.empty()) ttl = std::min(ttl, r.ttl);
    for (const net::IpAddress& a : r.addresses) out.addresses.push_back(a);
  }
  out.ttl = complete && !out.addresses.empty() ? ttl : 0;
  return out;
}

}  // namespace zn::broker
