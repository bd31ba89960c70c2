#include "broker/control/verbs.h"

#include <spdlog/spdlog.h>

#include "broker/audit/event.h"
#include "userspace/datapath/verdict_names.h"
#include "userspace/net/address.h"
#include "vmm/host/guest_network.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

const json& require(const json& args, const char* key) {
  if (!args.contains(key) || !args[key].is_string())
    throw SessionError(std::string("missing \"") + key + "\" (string)");
  return args[key];
}

std::string host_text(const HostPattern& host) {
  return host.kind == HostPattern::Kind::kWildcard ? "*." + host.name : host.name;
}

}  // namespace

json status_json(size_t sessions, const std::string& pin_root, const std::string& netns,
                 const dns::DnsCountersSnapshot& dns) {
  // The total, then every query outcome (as the metrics show them).
  json counts = json::object();
  dns::for_each_counter(dns, [&](const dns::CounterInfo& c, uint64_t n) {
    if (c.name == "queries" || !c.outcome.empty()) counts[std::string(c.name)] = n;
  });
  return json{{"sessions", sessions}, {"pin_root", pin_root}, {"netns", netns}, {"dns", counts}};
}

json session_json(const Session& s, const std::string& ca_certificate, bool with_policy) {
  json out = {{"id", s.record.id},
              {"session_idx", s.record.session_idx},
              {"device", s.record.device},
              {"ifindex", s.ifindex},
              {"adopted", s.record.adopted},
              {"policy_version", s.record.policy_version},
              {"network",
               {{"address", net::to_string(s.net.guest_ip4) + "/" + std::to_string(s.net.prefix4)},
                {"gateway", net::to_string(s.net.gateway_ip4)},
                {"address6", net::to_string(s.net.guest_ip6) + "/" + std::to_string(s.net.prefix6)},
                {"gateway6", net::to_string(s.net.gateway_ip6)},
                {"dns", net::to_string(s.net.gateway_ip4)},
                {"mac", net::to_string(s.net.guest_mac)},
                {"mtu", vmm::GuestNetwork::kMtu},
                {"ca_certificate", ca_certificate}}}};
  if (with_policy) {
    // The policy as compiled, never its resources' values.
    json allow = json::array();
    for (const AllowRule& r : s.policy->policy().allow) {
      json rule = {{"host", host_text(r.host)}};
      if (!r.methods.empty()) rule["methods"] = r.methods;
      if (!r.paths.empty()) {
        json paths = json::array();
        for (const auto& p : r.paths) paths.push_back(p.text());
        rule["paths"] = paths;
      }
      if (r.identity) rule["identity"] = "cap:" + *r.identity;
      if (r.mint_jwt) rule["identity"] = "jwt";
      if (r.injects_identity()) {
        if (r.placement.kind == Placement::Kind::kQuery)
          rule["inject"] = {{"query", r.placement.name}};
        else
          rule["inject"] = {{"header", r.placement.name}, {"prefix", r.placement.prefix}};
      }
      if (r.action == RuleAction::kAsk) rule["action"] = "ask";
      if (r.port) rule["port"] = *r.port;
      allow.push_back(rule);
    }
    json deny = json::array();
    for (const DenyRule& d : s.policy->policy().deny) deny.push_back({{"host", host_text(d.host)}});
    json resources = json::array();
    for (const auto& [name, r] : s.policy->policy().resources) resources.push_back(name);
    // Canaries are counted, never listed: the guest holds them, the
    // operator planted them; nobody else needs to read which they are.
    out["policy"] = {{"default", "deny"},
                     {"allow", allow},
                     {"deny", deny},
                     {"resources", resources},
                     {"canaries", s.policy->policy().canaries.size()}};
    // What the guest's environment should hold: a placeholder per resource
    // that asked for one, never the credential.
    json env = json::object();
    for (const auto& [name, r] : s.policy->policy().resources) {
      auto ph = s.record.placeholders.find(name);
      if (r.placeholder_env && ph != s.record.placeholders.end()) env[*r.placeholder_env] = ph->second;
    }
    out["guest_env"] = env;
    if (auto rate = s.policy->policy().rate)
      out["policy"]["rate"] = {{"burst", rate->burst}, {"per_second", rate->per_second}};
  }
  return out;
}

json verdicts_json(const dp::SessionCounters& c) {
  json counters = json::object();
  for (unsigned v = 0; v < c.size(); ++v)
    if (c[v]) counters[std::string(dp::verdict_name(v))] = c[v];
  return counters;
}

void register_secrets(AuditLog& audit, const Session& s) {
  for (const auto& [name, resource] : s.policy->policy().resources)
    for (const auto& [field, value] : resource.fields)
      value.reveal([&](std::string_view v) { audit.add_secret(std::string(v)); });
}

void register_status_verb(ControlServer& server, const SessionRegistry& registry, const dns::Responder& dns,
                          std::string pin_root, std::string netns) {
  server.handle("status",
                [&registry, &dns, pin_root = std::move(pin_root), netns = std::move(netns)](const json&) {
                  return status_json(registry.size(), pin_root, netns, dns.counters());
                });
}

void register_session_verbs(ControlServer& server, const SessionVerbs& verbs) {
  server.handle("session.list", [verbs](const json&) {
    json out = json::array();
    for (const SessionPtr& s : verbs.registry.list())
      out.push_back(session_json(*s, verbs.ca_certificate, false));
    return out;
  });
  server.handle("session.show", [verbs](const json& args) {
    auto s = verbs.registry.get(require(args, "id"));
    if (!s) throw SessionError("no session '" + args["id"].get<std::string>() + "'");
    return session_json(*s, verbs.ca_certificate, true);
  });
  server.handle("session.create", [verbs](const json& args) {
    SessionSpec spec;
    spec.id = require(args, "id");
    spec.policy_json = require(args, "policy");
    if (args.contains("device")) spec.adopt_device = require(args, "device").get<std::string>();
    if (args.contains("slot")) {
      if (!args["slot"].is_number_unsigned()) throw SessionError("\"slot\" must be a number");
      spec.slot = args["slot"].get<unsigned>();
    }
    SessionPtr s = verbs.registry.create(spec);
    register_secrets(verbs.audit, *s);
    spdlog::info("session {} created on {} (slot {})", s->record.id, s->record.device, s->record.slot);
    return session_json(*s, verbs.ca_certificate, false);
  });
  server.handle("session.update", [verbs](const json& args) {
    SessionPtr s = verbs.registry.update(require(args, "id"), require(args, "policy"));
    register_secrets(verbs.audit, *s);
    spdlog::info("session {} policy v{}", s->record.id, s->record.policy_version);
    return session_json(*s, verbs.ca_certificate, false);
  });
  server.handle("session.delete", [verbs](const json& args) {
    const std::string id = require(args, "id");
    verbs.registry.remove(id);
    verbs.dns.forget(id);
    verbs.approvals.forget_session(id);
    verbs.proxy.forget_session(id);
    spdlog::info("session {} deleted", id);
    return json{{"deleted", id}};
  });
}

void register_approval_verbs(ControlServer& server, ApprovalBook& approvals, AuditLog& audit) {
  server.handle("approval.list", [&approvals](const json&) {
    json out = json::array();
    for (const HeldRequest& h : approvals.pending())
      out.push_back({{"ticket", h.ticket},
                     {"session", h.session},
                     {"scheme", h.scheme},
                     {"host", h.host},
                     {"method", h.method},
                     {"path", h.path},
                     {"url", h.scheme + "://" + h.host + h.path},
                     {"expires", format_audit_ts(h.expires_at)}});
    return out;
  });
  for (const bool approve : {true, false}) {
    const char* verb = approve ? "approval.allow" : "approval.deny";
    server.handle(verb, [&approvals, &audit, approve](const json& args) {
      if (!args.contains("ticket") || !args["ticket"].is_number_unsigned())
        throw SessionError("missing \"ticket\" (number)");
      const json& t = args["ticket"];
      // Only a pending ticket can be decided: a replayed command is refused.
      std::optional<HeldRequest> h = approvals.decide(t.get<uint64_t>(), approve);
      if (!h) throw SessionError("no pending request with ticket " + std::to_string(t.get<uint64_t>()));
      audit.append({approve ? "egress:approved" : "egress:deny",
                    h->session,
                    {{"host", h->host},
                     {"method", h->method},
                     {"path", h->path},
                     {"ticket", h->ticket},
                     {"reason", approve ? "approved by operator" : "denied by operator"}}});
      return json{{"ticket", h->ticket}, {"approved", approve}};
    });
  }
}

void register_stats_verb(ControlServer& server, const SessionRegistry& registry,
                         const dp::DatapathMaps& maps) {
  server.handle("stats", [&registry, &maps](const json& args) {
    json out = json::object();
    for (const SessionPtr& s : registry.list()) {
      if (args.contains("id") && args["id"] != s->record.id) continue;
      out[s->record.id] = verdicts_json(maps.counters(s->record.session_idx));
    }
    if (args.contains("id") && out.empty())
      throw SessionError("no session '" + args["id"].get<std::string>() + "'");
    return out;
  });
}

void register_events_verb(ControlServer& server, EventFeed& feed) {
  server.stream("events", [&feed](const json&, const std::function<bool(const json&)>& emit,
                                  const std::atomic<bool>& stopping) { feed.serve(emit, stopping); });
}

}  // namespace zn::broker
