#include "broker/control/verbs.h"

#include <string.h>

#include <spdlog/spdlog.h>

#include "broker/audit/event.h"
#include "broker/session/cap_handles.h"
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
    // A handle per capability: what the guest presents to reach it.
    json caps = json::object();
    for (const auto& [name, cap] : s.policy->policy().caps) {
      caps[name] = {{"kind", capability_kind_name(cap.kind)},
                    {"mode", cap.read_only ? "ro" : "rw"},
                    {"store", cap.store}};
      auto h = s.record.cap_handles.find(name);
      if (h != s.record.cap_handles.end()) env[cap_env_name(name)] = h->second;
    }
    out["policy"]["caps"] = caps;
    out["guest_env"] = env;
    json exposed = json::object();
    for (const auto& [port, e] : s.record.exposed)
      exposed[std::to_string(port)] = {{"mode", e.public_mode ? "public" : "ticket"},
                                       {"listen_port", e.listen_port},
                                       {"family", e.family}};
    out["exposed"] = exposed;
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
  server.handle("session.parked", [verbs](const json&) {
    json out = json::array();
    for (const SessionRegistry::ParkedDevice& d : verbs.registry.parked())
      out.push_back({{"device", d.name}, {"ifindex", d.ifindex}});
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
    spdlog::info("session {} created on {} (slot {})", s->record.id, s->record.device, s->record.slot);
    return session_json(*s, verbs.ca_certificate, false);
  });
  server.handle("session.update", [verbs](const json& args) {
    SessionPtr s = verbs.registry.update(require(args, "id"), require(args, "policy"));
    spdlog::info("session {} policy v{}", s->record.id, s->record.policy_version);
    return session_json(*s, verbs.ca_certificate, false);
  });
  server.handle("session.delete", [verbs](const json& args) {
    const std::string id = require(args, "id");
    // An adopted device stays denying unless the operator asks, in so many
    // words, to hand it back ungoverned.
    bool detach = false;
    if (args.contains("detach")) {
      if (!args["detach"].is_boolean()) throw SessionError("\"detach\" must be true or false");
      detach = args["detach"].get<bool>();
    }
    // One call: the registry tells every part that keeps something of the
    // session (its VM stops before its TAP goes; daemon/session_participants.h).
    verbs.registry.remove(id, detach);
    spdlog::info("session {} deleted", id);
    return json{{"deleted", id}};
  });
}

json held_request_json(const HeldRequest& h, std::chrono::system_clock::time_point now) {
  const auto held = std::chrono::duration_cast<std::chrono::seconds>(now - h.held_at);
  return {{"ticket", h.ticket},
          {"session", h.session},
          {"scheme", h.scheme},
          {"host", h.host},
          {"method", h.method},
          {"path", h.path},
          {"url", h.scheme + "://" + h.host + h.path},
          {"header_names", h.header_names},
          {"body_preview", h.body_preview},
          {"held_at", format_audit_ts(h.held_at)},
          {"held_s", std::max<int64_t>(0, held.count())},
          {"expires", format_audit_ts(h.expires_at)}};
}

json grant_json(const Grant& g) {
  return {{"id", g.id},
          {"session", g.scope.session},
          {"scheme", g.scope.scheme},
          {"method", g.scope.method},
          {"host", g.scope.host},
          {"path", g.scope.path},
          {"path_pattern", g.scope.pattern},
          {"ticket", g.ticket},
          {"uid", g.uid},
          {"created", format_audit_ts(g.created)},
          {"expires", format_audit_ts(g.expires)}};
}

json ticket_notice(const HeldRequest& h, TicketEvent event, std::optional<uint32_t> uid) {
  static constexpr const char* kNames[] = {"held", "approved", "denied", "expired", "cancelled"};
  json out = held_request_json(h);
  out["event"] = kNames[static_cast<int>(event)];
  if (uid) out["uid"] = *uid;
  return out;
}

json grant_notice(const Grant& g, GrantEvent event) {
  static constexpr const char* kNames[] = {"grant_created", "grant_revoked", "grant_expired",
                                           "grant_session_deleted"};
  return {{"event", kNames[static_cast<int>(event)]}, {"grant", grant_json(g)}};
}

namespace {

uint64_t require_id(const json& args, const char* key) {
  if (!args.contains(key) || !args[key].is_number_unsigned())
    throw SessionError(std::string("missing \"") + key + "\" (number)");
  return args[key].get<uint64_t>();
}

// What approval.allow grants besides the one request; nullopt: --once.
// Checked before the ticket is decided, so a refused grant decides nothing.
std::optional<GrantScope> requested_grant(const json& args, ApprovalBook& approvals, uint64_t ticket,
                                          std::chrono::seconds& duration) {
  if (!args.contains("for_s")) {
    if (args.contains("path")) throw SessionError("\"path\" widens a grant: it needs \"for_s\"");
    return std::nullopt;
  }
  if (!args["for_s"].is_number_integer()) throw SessionError("\"for_s\" must be a number of seconds");
  duration = std::chrono::seconds(args["for_s"].get<int64_t>());
  const std::chrono::seconds max = approvals.grants().max_duration();
  if (duration.count() <= 0) throw SessionError("a grant's duration must be at least 1s");
  if (duration > max)
    throw SessionError("a grant's duration must be at most " + std::to_string(max.count()) +
                       "s (zerod's approval_grant_max_s)");
  std::optional<HeldRequest> held;
  for (const HeldRequest& h : approvals.pending())
    if (h.ticket == ticket) held = h;
  if (!held) throw SessionError("no pending request with ticket " + std::to_string(ticket));
  GrantScope scope{held->session, held->scheme, held->method, held->host, held->path, false};
  if (args.contains("path")) {
    if (!args["path"].is_string()) throw SessionError("\"path\" must be a path pattern");
    std::string why;
    auto pattern = PathPattern::parse(args["path"].get<std::string>(), &why);
    if (!pattern) throw SessionError("bad path pattern: " + why);
    // A grant widens the approval of this request, never replaces it.
    if (!pattern->matches(held->path))
      throw SessionError("path pattern '" + pattern->text() + "' does not cover the held path " + held->path);
    scope.path = pattern->text();
    scope.pattern = true;
  }
  return scope;
}

}  // namespace

void register_approval_verbs(ControlServer& server, ApprovalBook& approvals, AuditLog& audit) {
  server.handle("approval.list", [&approvals](const json&) {
    json out = json::array();
    const auto now = std::chrono::system_clock::now();
    for (const HeldRequest& h : approvals.pending()) out.push_back(held_request_json(h, now));
    return out;
  });
  server.handle_with_caller(
      "approval.allow", [&approvals, &audit](const json& args, const ControlCaller& by) {
        const uint64_t ticket = require_id(args, "ticket");
        std::chrono::seconds duration{0};
        const std::optional<GrantScope> scope = requested_grant(args, approvals, ticket, duration);
        // Only a pending ticket can be decided: a replayed command is refused.
        std::optional<HeldRequest> h = approvals.decide(ticket, true, ApprovalBook::Clock::now(), by.uid);
        if (!h) throw SessionError("no pending request with ticket " + std::to_string(ticket));
        audit.append({"egress:approved",
                      h->session,
                      {{"host", h->host},
                       {"method", h->method},
                       {"path", h->path},
                       {"ticket", h->ticket},
                       {"reason", "approved by operator"},
                       {"by", "operator"},
                       {"uid", by.uid},
                       {"pid", by.pid}}});
        json out = {{"ticket", h->ticket}, {"approved", true}};
        if (scope) {
          const Grant g = approvals.grants().create(*scope, duration, by.uid, h->ticket);
          audit.append({"grant:created",
                        g.scope.session,
                        {{"grant", g.id},
                         {"ticket", g.ticket},
                         {"scheme", g.scope.scheme},
                         {"method", g.scope.method},
                         {"host", g.scope.host},
                         {"path", g.scope.path},
                         {"path_pattern", g.scope.pattern},
                         {"expires", format_audit_ts(g.expires)},
                         {"uid", by.uid}}});
          out["grant"] = grant_json(g);
        }
        return out;
      });
  server.handle_with_caller("approval.deny", [&approvals, &audit](const json& args, const ControlCaller& by) {
    const uint64_t ticket = require_id(args, "ticket");
    std::optional<HeldRequest> h = approvals.decide(ticket, false, ApprovalBook::Clock::now(), by.uid);
    if (!h) throw SessionError("no pending request with ticket " + std::to_string(ticket));
    // egress:denied is an operator's; egress:deny stays the policy's.
    audit.append({"egress:denied",
                  h->session,
                  {{"host", h->host},
                   {"method", h->method},
                   {"path", h->path},
                   {"ticket", h->ticket},
                   {"reason", "denied by operator"},
                   {"by", "operator"},
                   {"uid", by.uid},
                   {"pid", by.pid}}});
    return json{{"ticket", h->ticket}, {"approved", false}};
  });
  server.handle("approval.grants", [&approvals](const json&) {
    json out = json::array();
    for (const Grant& g : approvals.grants().live()) out.push_back(grant_json(g));
    return out;
  });
  server.handle_with_caller("approval.revoke",
                            [&approvals, &audit](const json& args, const ControlCaller& by) {
                              const uint64_t id = require_id(args, "grant");
                              std::optional<Grant> g = approvals.grants().revoke(id);
                              if (!g) throw SessionError("no live grant " + std::to_string(id));
                              audit.append({"grant:revoked",
                                            g->scope.session,
                                            {{"grant", g->id},
                                             {"method", g->scope.method},
                                             {"host", g->scope.host},
                                             {"path", g->scope.path},
                                             {"uid", by.uid},
                                             {"pid", by.pid}}});
                              return json{{"revoked", g->id}};
                            });
}

void register_approval_watch_verb(ControlServer& server, ApprovalBook& approvals, EventFeed& feed) {
  server.stream("approval.watch",
                [&approvals, &feed](const json&, const std::function<bool(const json&)>& emit,
                                    const std::atomic<bool>& stopping) {
                  feed.serve(emit, stopping, [&approvals] {
                    std::vector<json> pending;
                    for (const HeldRequest& h : approvals.pending()) {
                      json n = held_request_json(h);
                      n["event"] = "pending";
                      pending.push_back(std::move(n));
                    }
                    return pending;
                  });
                });
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
