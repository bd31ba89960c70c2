#include "broker/daemon/zerod.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <deque>

#include "broker/audit/drop_events.h"
#include "broker/policy/parser.h"
#include "common/netns.h"
#include "userspace/datapath/drop_events.h"
#include "userspace/datapath/verdict_names.h"
#include "userspace/net/address.h"
#include "vmm/host/steering_routes.h"

namespace zn::broker {
namespace {

using json = nlohmann::json;

// L4 rule names resolved like guest DNS (static overrides, then upstream).
std::vector<ResolvedAddress> to_resolved(const std::vector<net::IpAddress>& addresses) {
  std::vector<ResolvedAddress> out;
  for (const net::IpAddress& a : addresses) {
    ResolvedAddress r;
    r.family = a.family == AF_INET6 ? 6 : 4;
    std::copy(a.bytes.begin(), a.bytes.end(), r.addr.begin());
    out.push_back(r);
  }
  return out;
}

// The guard from zerod's config: the guest pools refused, the configured
// allowances and NAT64 prefix (validated by parse_daemon_config).
std::shared_ptr<const proxy::DestinationGuard> make_guard(const DaemonConfig& c) {
  proxy::GuardConfig g;
  for (const std::string* pool : {&c.address_pool_ipv4, &c.address_pool_ipv6})
    if (auto p = net::AddressPrefix::parse(*pool)) g.guest_pools.push_back(*p);
  for (const std::string& text : c.upstream_allow)
    if (auto p = net::AddressPrefix::parse(text)) g.allow.push_back(*p);
  if (!c.nat64_prefix.empty()) g.nat64 = net::AddressPrefix::parse(c.nat64_prefix);
  return std::make_shared<const proxy::DestinationGuard>(std::move(g), std::make_shared<net::LocalAddresses>());
}

const json& require(const json& args, const char* key) {
  if (!args.contains(key) || !args[key].is_string())
    throw SessionError(std::string("missing \"") + key + "\" (string)");
  return args[key];
}

}  // namespace

struct ZerodDaemon::Subscriber {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<json> queue;
  static constexpr size_t kMax = 1000;  // a slow reader loses the oldest
};

ZerodDaemon::ZerodDaemon(DaemonConfig config) : config_(std::move(config)) {
  if (!config_.netns.empty()) {
    // For the whole process: every later socket and thread lives there.
    NetnsScope enter(config_.netns);
    enter.stay();
  }
  vmm::install_steering_routes();
  datapath_ = dp::Datapath::load({config_.pin_root});
  maps_ = std::make_unique<dp::DatapathMaps>(datapath_->map_fds());
  dp::Listeners listeners;
  listeners.proxy_port = config_.proxy_port;
  listeners.dns_port = config_.dns_port;
  maps_->set_listeners(listeners);

  // State holds policies with their resources (secrets): root only.
  std::filesystem::create_directories(config_.state_dir);
  std::filesystem::permissions(config_.state_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  ca_ = ensure_deployment_ca(config_.state_dir + "/ca");
  AuditLogOptions audit_options;
  audit_options.db_path = config_.audit_db();
  audit_ = std::make_unique<AuditLog>(audit_options);

  SessionRegistry::Options o;
  o.maps = maps_.get();
  o.ingress_prog_fd = datapath_->ingress_prog_fd();
  o.egress_prog_fd = datapath_->egress_prog_fd();
  o.addresses = vmm::AddressPlan::parse(config_.address_pool_ipv4, config_.address_pool_ipv6);
  resolver_ = std::make_unique<ConfiguredResolver>(config_.dns_static, config_.dns_upstream);
  // Where the proxy may connect: made here, in zerod's namespace (entered
  // above), so the local-table watcher's netlink sockets see this host's
  // addresses. Shared by the broker's checks and the proxy's connect-time one.
  const std::shared_ptr<const proxy::DestinationGuard> guard = make_guard(config_);
  o.resolve = [this, guard](const std::string& name) {
    // An L4 rule's name never puts the host itself, a guest pool or a
    // special-purpose range into the datapath (the proxy refuses them too).
    std::vector<net::IpAddress> kept;
    for (const net::IpAddress& a : resolver_->resolve_now(name)) {
      if (auto why = guard->refusal(a)) {
        spdlog::warn("L4 rule host {}: {} refused ({})", name, a.to_string(), *why);
        audit_->append({"egress:deny", "", {{"host", name}, {"address", a.to_string()}, {"reason", *why},
                                            {"stage", "l4 rule"}}});
        continue;
      }
      kept.push_back(a);
    }
    return to_resolved(kept);
  };
  o.state_path = config_.state_file();
  o.event_rate = config_.drop_event_rate;
  o.event_burst = config_.drop_event_burst;
  o.audit = [this](const std::string& event, const std::string& sid, const json& detail) {
    audit_->append({event, sid, detail});
  };
  registry_ = std::make_unique<SessionRegistry>(o);
  std::vector<std::string> failed;
  auto restored = registry_->restore(&failed);
  for (const auto& id : restored) {
    if (auto s = registry_->get(id)) register_secrets(*s);
    spdlog::info("re-adopted session {}", id);
  }
  for (const auto& f : failed) spdlog::error("could not restore session {}", f);

  dns_policy_ = std::make_unique<SessionDnsPolicy>(*registry_, *audit_);
  dns_ = std::make_unique<dns::Responder>(dns::responder_config_for(listeners), *dns_policy_, *resolver_);

  approvals_ = std::make_unique<ApprovalBook>(std::chrono::milliseconds(config_.approval_timeout_ms));
  proxy_policy_ =
      std::make_unique<SessionProxyPolicy>(*registry_, *dns_policy_, *resolver_, *audit_, *approvals_, guard);
  proxy::ProxyConfig proxy_config;
  proxy_config.port = config_.proxy_port;
  proxy_config.idle_timeout = std::chrono::milliseconds(config_.proxy_idle_timeout_ms);
  proxy_config.header_timeout = std::chrono::milliseconds(config_.proxy_header_timeout_ms);
  proxy_config.max_connections_per_guest = config_.proxy_max_connections_per_guest;
  proxy_config.ca_cert_path = ca_.cert;
  proxy_config.ca_key_path = ca_.key;
  proxy_config.upstream_ca_bundle = config_.upstream_ca_bundle;
  proxy_config.guard = guard;
  proxy_ = std::make_unique<proxy::TransparentProxy>(proxy_config, *proxy_policy_);

  drop_events_ = std::thread([this] { drop_event_loop(); });
  if (config_.metrics_port)
    metrics_ = std::make_unique<MetricsServer>(config_.metrics_port, [this] { return render_metrics(); });
  control_ = std::make_unique<ControlServer>(config_.control_socket);
  register_verbs();
  control_->start();
  spdlog::info("zerod ready: control {}, pins {}, {} session(s)", config_.control_socket,
               config_.pin_root, restored.size());
}

ZerodDaemon::~ZerodDaemon() { stop(); }

void ZerodDaemon::stop() {
  if (stopping_.exchange(true)) return;
  if (control_) control_->stop();
  metrics_.reset();
  proxy_.reset();
  dns_.reset();
  if (drop_events_.joinable()) drop_events_.join();
  spdlog::info("zerod stopped; the datapath stays attached and denying");
}

void ZerodDaemon::register_secrets(const Session& s) {
  for (const auto& [name, resource] : s.policy->policy().resources)
    for (const auto& [field, value] : resource.fields) audit_->add_secret(value);
}

json ZerodDaemon::describe(const Session& s, bool with_policy) const {
  json out = {{"id", s.record.id},
              {"session_idx", s.record.session_idx},
              {"device", s.record.device},
              {"ifindex", s.ifindex},
              {"adopted", s.record.adopted},
              {"policy_version", s.record.policy_version},
              {"network",
               {{"address", net::to_string(s.net.guest_ip4) + "/" + std::to_string(vmm::GuestNetwork::kPrefix4)},
                {"gateway", net::to_string(s.net.gateway_ip4)},
                {"address6", net::to_string(s.net.guest_ip6) + "/" + std::to_string(vmm::GuestNetwork::kPrefix6)},
                {"gateway6", net::to_string(s.net.gateway_ip6)},
                {"dns", net::to_string(s.net.gateway_ip4)},
                {"mac", net::to_string(s.net.guest_mac)},
                {"mtu", vmm::GuestNetwork::kMtu},
                {"ca_certificate", ca_.cert}}}};
  if (with_policy) {
    // The policy as compiled, never its resources' values.
    json allow = json::array();
    for (const AllowRule& r : s.policy->policy().allow) {
      json rule = {{"host", r.host.kind == HostPattern::Kind::kWildcard ? "*." + r.host.name : r.host.name}};
      if (!r.methods.empty()) rule["methods"] = r.methods;
      if (!r.paths.empty()) {
        json paths = json::array();
        for (const auto& p : r.paths) paths.push_back(p.text());
        rule["paths"] = paths;
      }
      if (r.identity) rule["identity"] = "cap:" + *r.identity;
      if (r.action == RuleAction::kAsk) rule["action"] = "ask";
      if (r.port) rule["port"] = *r.port;
      allow.push_back(rule);
    }
    json deny = json::array();
    for (const DenyRule& d : s.policy->policy().deny)
      deny.push_back({{"host", d.host.kind == HostPattern::Kind::kWildcard ? "*." + d.host.name : d.host.name}});
    json resources = json::array();
    for (const auto& [name, r] : s.policy->policy().resources) resources.push_back(name);
    out["policy"] = {{"default", "deny"}, {"allow", allow}, {"deny", deny}, {"resources", resources}};
    if (auto rate = s.policy->policy().rate)
      out["policy"]["rate"] = {{"burst", rate->burst}, {"per_second", rate->per_second}};
  }
  return out;
}

void ZerodDaemon::register_verbs() {
  control_->handle("status", [this](const json&) {
    const auto dns = dns_->counters();
    return json{{"sessions", registry_->list().size()},
                {"pin_root", config_.pin_root},
                {"netns", config_.netns},
                {"dns", {{"queries", dns.queries}, {"allowed", dns.allowed}, {"denied", dns.denied},
                         {"refused", dns.refused}, {"malformed", dns.malformed},
                         {"upstream_failures", dns.upstream_failures}}}};
  });
  control_->handle("session.list", [this](const json&) {
    json out = json::array();
    for (const Session& s : registry_->list()) out.push_back(describe(s, false));
    return out;
  });
  control_->handle("session.show", [this](const json& args) {
    auto s = registry_->get(require(args, "id"));
    if (!s) throw SessionError("no session '" + args["id"].get<std::string>() + "'");
    return describe(*s, true);
  });
  control_->handle("session.create", [this](const json& args) {
    SessionSpec spec;
    spec.id = require(args, "id");
    spec.policy_json = require(args, "policy");
    if (args.contains("device")) spec.adopt_device = require(args, "device").get<std::string>();
    if (args.contains("slot")) {
      if (!args["slot"].is_number_unsigned()) throw SessionError("\"slot\" must be a number");
      spec.slot = args["slot"].get<unsigned>();
    }
    Session s = registry_->create(spec);
    register_secrets(s);
    spdlog::info("session {} created on {} (slot {})", s.record.id, s.record.device, s.record.slot);
    return describe(s, false);
  });
  control_->handle("session.update", [this](const json& args) {
    Session s = registry_->update(require(args, "id"), require(args, "policy"));
    register_secrets(s);
    spdlog::info("session {} policy v{}", s.record.id, s.record.policy_version);
    return describe(s, false);
  });
  control_->handle("session.delete", [this](const json& args) {
    const std::string id = require(args, "id");
    registry_->remove(id);
    dns_policy_->forget(id);
    approvals_->forget_session(id);
    proxy_policy_->forget_session(id);
    spdlog::info("session {} deleted", id);
    return json{{"deleted", id}};
  });
  control_->handle("approval.list", [this](const json&) {
    json out = json::array();
    for (const HeldRequest& h : approvals_->pending())
      out.push_back({{"ticket", h.ticket}, {"session", h.session}, {"scheme", h.scheme}, {"host", h.host},
                     {"method", h.method}, {"path", h.path}, {"url", h.scheme + "://" + h.host + h.path},
                     {"expires", format_audit_ts(h.expires_at)}});
    return out;
  });
  for (const bool approve : {true, false}) {
    control_->handle(approve ? "approval.allow" : "approval.deny", [this, approve](const json& args) {
      if (!args.contains("ticket") || !args["ticket"].is_number_unsigned())
        throw SessionError("missing \"ticket\" (number)");
      const json& t = args["ticket"];
      // Only a pending ticket can be decided: a replayed command is refused.
      std::optional<HeldRequest> h = approvals_->decide(t.get<uint64_t>(), approve);
      if (!h) throw SessionError("no pending request with ticket " + std::to_string(t.get<uint64_t>()));
      audit_->append({approve ? "egress:approved" : "egress:deny", h->session,
                      {{"host", h->host}, {"method", h->method}, {"path", h->path}, {"ticket", h->ticket},
                       {"reason", approve ? "approved by operator" : "denied by operator"}}});
      return json{{"ticket", h->ticket}, {"approved", approve}};
    });
  }
  control_->handle("stats", [this](const json& args) {
    json out = json::object();
    for (const Session& s : registry_->list()) {
      if (args.contains("id") && args["id"] != s.record.id) continue;
      json counters = json::object();
      const auto c = maps_->counters(s.record.session_idx);
      for (unsigned v = 0; v < c.size(); ++v)
        if (c[v]) counters[std::string(dp::verdict_name(v))] = c[v];
      out[s.record.id] = counters;
    }
    if (args.contains("id") && out.empty()) throw SessionError("no session '" + args["id"].get<std::string>() + "'");
    return out;
  });
  control_->stream("events", [this](const json&, const std::function<bool(const json&)>& emit,
                                    const std::atomic<bool>& stopping) {
    auto sub = std::make_shared<Subscriber>();
    {
      std::lock_guard lock(subscribers_mu_);
      subscribers_.push_back(sub);
    }
    while (!stopping && !stopping_) {
      std::deque<json> batch;
      {
        std::unique_lock lock(sub->mu);
        sub->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return !sub->queue.empty(); });
        batch.swap(sub->queue);
      }
      bool alive = true;
      for (const json& e : batch) alive = alive && emit(e);
      // A heartbeat finds a client that went away while nothing happened.
      if (!alive || (batch.empty() && !emit(json{{"heartbeat", true}}))) break;
    }
    std::lock_guard lock(subscribers_mu_);
    subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), sub), subscribers_.end());
  });
}

std::string ZerodDaemon::render_metrics() const {
  std::string out;
  const auto sessions = registry_->list();
  out += "# HELP zn_sessions Sessions zerod governs.\n# TYPE zn_sessions gauge\n";
  out += prometheus_line("zn_sessions", {}, sessions.size());
  out += "# HELP zn_datapath_packets_total Packets judged by the TAP datapath, per session and verdict.\n"
         "# TYPE zn_datapath_packets_total counter\n";
  for (const Session& s : sessions) {
    const auto c = maps_->counters(s.record.session_idx);
    for (unsigned v = 0; v < ZN_VERDICT_COUNT; ++v)
      if (c[v])
        out += prometheus_line("zn_datapath_packets_total",
                               {{"session", s.record.id}, {"verdict", std::string(dp::verdict_name(v))}}, c[v]);
    out += prometheus_line("zn_datapath_events_suppressed_total", {{"session", s.record.id}},
                           c[ZN_STAT_EVENTS_SUPPRESSED]);
  }
  const auto d = dns_->counters();
  out += "# HELP zn_dns_queries_total Guest DNS queries by outcome.\n# TYPE zn_dns_queries_total counter\n";
  for (const auto& [result, n] : std::vector<std::pair<std::string, uint64_t>>{
           {"allowed", d.allowed}, {"denied", d.denied}, {"refused", d.refused},
           {"malformed", d.malformed}, {"upstream_failure", d.upstream_failures}})
    out += prometheus_line("zn_dns_queries_total", {{"result", result}}, n);
  const auto p = proxy_->counters();
  out += "# HELP zn_proxy_connections_total Steered guest connections by outcome.\n"
         "# TYPE zn_proxy_connections_total counter\n";
  for (const auto& [result, n] : std::vector<std::pair<std::string, uint64_t>>{
           {"accepted", p.accepted}, {"spliced", p.allowed}, {"intercepted", p.intercepted},
           {"reset", p.denied}, {"hello_timeout", p.timed_out}, {"tls_handshake_failure", p.tls_handshake_failures},
           {"busy", p.rejected_busy}, {"guest_cap", p.rejected_guest_cap}, {"idle_closed", p.idle_closed},
           {"accept_error", p.accept_errors}})
    out += prometheus_line("zn_proxy_connections_total", {{"result", result}}, n);
  out += "# HELP zn_proxy_requests_total Intercepted HTTP requests by outcome.\n"
         "# TYPE zn_proxy_requests_total counter\n";
  for (const auto& [result, n] : std::vector<std::pair<std::string, uint64_t>>{
           {"allowed", p.requests_allowed}, {"denied", p.requests_denied}, {"malformed", p.bad_requests},
           {"upstream_failure", p.upstream_failures}})
    out += prometheus_line("zn_proxy_requests_total", {{"result", result}}, n);
  return out;
}

void ZerodDaemon::drop_event_loop() {
  auto name_of = [this](uint32_t idx) -> std::string {
    for (const Session& s : registry_->list())
      if (s.record.session_idx == idx) return s.record.id;
    return "";
  };
  DropEventAggregator aggregator(name_of, [this](const std::string& sid, const json& detail) {
    audit_->append({"packet:deny", sid, detail});
  });
  dp::DropEventReader reader(datapath_->events_fd(), [&](const zn_drop_event& e) {
    aggregator.add(e);
    std::vector<std::shared_ptr<Subscriber>> subs;
    {
      std::lock_guard lock(subscribers_mu_);
      subs = subscribers_;
    }
    if (subs.empty()) return;
    json line = {{"session", name_of(e.session_idx)}, {"event", dp::format_drop_event(e)},
                 {"reason", std::string(dp::verdict_name(e.reason))}};
    for (auto& sub : subs) {
      std::lock_guard lock(sub->mu);
      if (sub->queue.size() >= Subscriber::kMax) sub->queue.pop_front();
      sub->queue.push_back(line);
      sub->cv.notify_one();
    }
  });
  auto next_flush = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!stopping_) {
    try {
      reader.poll(200);
    } catch (const std::exception& e) {
      spdlog::error("drop events: {}", e.what());
    }
    if (std::chrono::steady_clock::now() >= next_flush) {
      aggregator.flush();
      next_flush += std::chrono::seconds(1);
    }
  }
  reader.drain();
  aggregator.flush();
}

}  // namespace zn::broker
