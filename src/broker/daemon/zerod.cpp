#include "broker/daemon/zerod.h"

#include "broker/daemon/zerod_services.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <future>
#include <vector>

#include "broker/audit/drop_events.h"
#include "broker/audit/event.h"
#include "broker/control/metrics.h"
#include "broker/control/command_verbs.h"
#include "broker/control/exposure_verbs.h"
#include "broker/control/verbs.h"
#include "broker/control/vm_verbs.h"
#include "vmm/microvm/firecracker.h"
#include "vmm/microvm/qemu.h"
#include "broker/policy/parser.h"
#include "broker/secrets/guarded_bytes.h"
#include "broker/session/sealed_policy.h"
#include "broker/session/state_file.h"
#include "common/netns.h"
#include "userspace/datapath/drop_events.h"
#include "userspace/datapath/tc_attachment.h"
#include "userspace/datapath/verdict_names.h"
#include "userspace/net/address.h"
#include "vmm/host/steering_routes.h"

namespace zn::broker {
namespace {

// The zn-agent microVMs are given: the configured one, else the one beside
// zerod (installed, or in a build tree). "" when there is none.
std::string find_agent_binary(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> candidates;
  if (!ec) {
    candidates.push_back(self.parent_path() / "zn-agent");
    candidates.push_back(self.parent_path().parent_path() / "zn-agent" / "zn-agent");
  }
  candidates.emplace_back("/usr/lib/zeroness/zn-agent");
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c.string();
  return "";
}

// The zn-sql-call every SQL capability call runs in (resources/sql_store.h):
// beside zerod (installed, or in a build tree), else the installed one. ""
// when there is none (a config with a SQL store then stops zerod's start).
std::string find_sql_helper() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::filesystem::path> candidates;
  if (!ec) {
    candidates.push_back(self.parent_path() / "zn-sql-call");
    candidates.push_back(self.parent_path().parent_path() / "zn-sql-call" / "zn-sql-call");
  }
  candidates.emplace_back("/usr/lib/zeroness/zn-sql-call");
  for (const auto& c : candidates)
    if (::access(c.c_str(), X_OK) == 0) return c.string();
  return "";
}

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
  const vmm::AddressPlan plan = c.address_plan();  // the registry's pools
  for (const std::string& pool : {plan.pool4(), plan.pool6()})
    if (auto p = net::AddressPrefix::parse(pool)) g.guest_pools.push_back(*p);
  for (const std::string& text : c.upstream_allow)
    if (auto p = net::AddressPrefix::parse(text)) g.allow.push_back(*p);
  if (!c.nat64_prefix.empty()) g.nat64 = net::AddressPrefix::parse(c.nat64_prefix);
  // Every session's TAP adds and removes local prefixes in the pools (its
  // gateway addresses) and in IPv6 link-local: kept in the table changed in
  // place, so a create or delete never copies the whole local table.
  std::vector<net::AddressPrefix> churning = g.guest_pools;
  churning.push_back(*net::AddressPrefix::parse("fe80::/10"));
  return std::make_shared<const proxy::DestinationGuard>(
      std::move(g), std::make_shared<net::LocalAddresses>(std::move(churning)));
}

// Whether the state file holds any sealed value (then a missing host key is
// a refusal, not a new key). A corrupt file throws here, as restore would.
bool state_holds_sealed_values(const std::string& state_file) {
  for (const SessionRecord& r : load_session_records(state_file))
    if (r.policy_json.find("\"znsealed:") != std::string::npos) return true;
  return false;
}

// Four bytes of a hash of this zerod's state_dir, in hex: names its VMs
// host-wide (VmRegistryOptions::instance), the same after a restart.
std::string state_dir_tag(const std::string& state_dir) {
  unsigned char digest[crypto_generichash_BYTES_MIN];
  crypto_generichash(digest, sizeof digest, reinterpret_cast<const unsigned char*>(state_dir.data()),
                     state_dir.size(), nullptr, 0);
  char hex[2 * 4 + 1];
  sodium_bin2hex(hex, sizeof hex, digest, 4);
  return hex;
}

}  // namespace

ZerodDaemon::ZerodDaemon(DaemonConfig config) : config_(std::move(config)), services_(zerod_services()) {
  bind_services();
  // Each in an order where what it needs is there (zerod_services.cpp); a
  // start that throws stops what had started and zerod does not start.
  services_.start_all();
  spdlog::info("zerod ready: control {}, pins {}, {} session(s)", config_.control_socket, config_.pin_root,
               registry_->size());
}

ZerodDaemon::~ZerodDaemon() { stop(); }

void ZerodDaemon::stop() {
  if (stopping_.exchange(true)) return;
  // The reverse of the start: nothing stops while a service that needs it runs.
  services_.stop_all([](const std::string& service, const std::string& what) {
    spdlog::error("stopping {}: {}", service, what);
  });
  spdlog::info("zerod stopped; the datapath stays attached and denying");
}

void ZerodDaemon::bind_services() {
  services_.bind("netns", [this] {
    if (!config_.netns.empty()) {
      // For the whole process: every later socket and thread lives there.
      NetnsScope enter(config_.netns);
      enter.stay();
    }
    vmm::install_steering_routes();
  });
  services_.bind("datapath", [this] {
    if (config_.tc_attach == "tcx") {
      if (!dp::TcAttachment::tcx_supported())
        throw std::runtime_error("tc_attach \"tcx\": this kernel has no TCX (Linux 6.6+); use \"clsact\"");
      dp::TcAttachment::use_backend(dp::TcBackend::kTcx);
    } else {
      dp::TcAttachment::use_backend(dp::TcBackend::kClsact);
    }
    datapath_ = dp::Datapath::load({config_.pin_root});
    maps_ = std::make_unique<dp::DatapathMaps>(datapath_->map_fds());
    maps_->set_listeners(listeners());
  });
  services_.bind("host_keys", [this] { start_host_keys(); });
  services_.bind("audit", [this] { start_audit(); });
  services_.bind(
      "audit_export", [this] { start_audit_export(); }, [this] { stop_audit_export(); });
  services_.bind("resolver", [this] {
    resolver_ = std::make_unique<ConfiguredResolver>(config_.dns_static, config_.dns_upstream);
    // Where the proxy may connect: made in zerod's namespace, so the
    // local-table watcher's netlink sockets see this host's addresses.
    // Shared by the broker's checks and the proxy's connect-time one.
    guard_ = make_guard(config_);
  });
  services_.bind("capabilities", [this] { start_capabilities(); });
  services_.bind("sessions", [this] { start_sessions(); });
  services_.bind(
      "dns_policy",
      [this] {
        SessionDnsOptions dns_options;
        for (const std::string& a : config_.capability_addresses)
          dns_options.capability_addresses.push_back(*net::IpAddress::parse(a));  // validated with the config
        dns_options.unanswered_names_per_second = config_.dns_unanswered_rate;
        dns_policy_ = std::make_unique<SessionDnsPolicy>(*registry_, *audit_, std::move(dns_options));
      },
      [this] {
        // What the DNS loop gathered after the periodic thread's last flush.
        dns_policy_->flush_unanswered();
      });
  services_.bind(
      "approvals", [this] { start_approvals(); },
      [this] {
        if (webhook_) webhook_->stop();
      });
  services_.bind("proxy_policy", [this] {
    JwtMinterOptions mint_options;
    mint_options.token_lifetime = std::chrono::seconds(config_.jwt_lifetime_s);
    minter_ = std::make_shared<JwtMinter>(config_.jwt_issuer, mint_options);
    proxy_policy_ =
        std::make_unique<SessionProxyPolicy>(*registry_, *dns_policy_, *resolver_, *audit_, *approvals_,
                                             guard_, SessionProxyPolicy::Clock{}, minter_);
    proxy_policy_->set_capability_service(capabilities_);
  });
  services_.bind(
      "vms", [this] { start_vms(); },
      [this] {
        vms_.reset();  // every VM stopped, its directory and cgroup removed
      });
  services_.bind(
      "exposures", [this] { start_exposures(); },
      [this] {
        exposures_.reset();  // listeners closed, admitted connections cut
      });
  services_.bind("commands", [this] { start_commands(); });
  services_.bind("participants", [this] {
    // Every part keeping something of a session outside its own state joins
    // before the first session is restored (session_participants.h).
    audit_secrets_part_ = std::make_unique<AuditSecretsParticipant>(*audit_);
    capability_part_ = std::make_unique<CapabilityParticipant>(*capabilities_);
    approval_part_ = std::make_unique<ApprovalParticipant>(*approvals_, *proxy_policy_);
    guest_part_ = std::make_unique<GuestParticipant>(*vms_, *exposures_);
    for (SessionParticipant* p : std::initializer_list<SessionParticipant*>{
             audit_secrets_part_.get(), capability_part_.get(), approval_part_.get(), guest_part_.get()})
      registry_->add_participant(*p);
  });
  services_.bind("restore", [this] { restore_sessions(); });
  services_.bind(
      "dns",
      [this] {
        dns::ResponderConfig dns_config = dns::responder_config_for(listeners());
        dns_config.handler.max_pending_per_session = config_.dns_pending_per_session;
        dns_config.max_tcp_per_session = config_.dns_tcp_per_session;
        dns_config.handler.session_rate.per_second = config_.dns_queries_per_second;
        dns_config.handler.session_rate.burst = config_.dns_query_burst;
        dns_ = std::make_unique<dns::Responder>(std::move(dns_config), *dns_policy_, *resolver_);
      },
      [this] { dns_.reset(); });
  services_.bind(
      "proxy", [this] { start_proxy(); }, [this] { proxy_.reset(); });
  services_.bind(
      "listener_lookup",
      [this] {
        // In zerod's namespace (this thread's, since "netns"), where the
        // listeners and the governed devices are. Not a control (TC ingress
        // decides every packet either way): a kernel without sk_lookup
        // (before 5.9) runs without it, slower for a guest that reconnects
        // from a port zerod closed, and says so.
        try {
          listener_lookup_ = std::make_unique<dp::ListenerLookup>(*datapath_);
        } catch (const std::exception& e) {
          spdlog::warn(
              "no listener lookup ({}): a guest's SYN on a four-tuple zerod holds in TIME_WAIT waits "
              "for its retry",
              e.what());
          return;
        }
        for (int fd : proxy_->listener_fds()) listener_lookup_->set(dp::ListenerKind::kProxy, fd);
        for (int fd : dns_->tcp_listener_fds()) listener_lookup_->set(dp::ListenerKind::kDns, fd);
      },
      [this] { listener_lookup_.reset(); });
  // Calls are taken from the start (the capabilities service); stopped here,
  // while the proxy's loops their answers are posted to still run.
  services_.bind("capability_calls", {}, [this] { capabilities_->shutdown(); });
  services_.bind(
      "drop_events", [this] { drop_events_ = std::thread([this] { drop_event_loop(); }); },
      [this] {
        // The loop ends on stopping_ (set by stop()).
        stopping_ = true;
        if (drop_events_.joinable()) drop_events_.join();
      });
  services_.bind(
      "metrics",
      [this] {
        if (!config_.metrics_port) return;
        metrics_ = std::make_unique<DocumentServer>(
            "127.0.0.1", config_.metrics_port,
            std::vector<DocumentServer::Document>{{"/metrics", "text/plain; version=0.0.4", [this] {
                                                     return render_metrics(read_metrics(
                                                                *registry_, *maps_, *dns_, *dns_policy_,
                                                                *proxy_, *audit_, capabilities_.get())) +
                                                            audit_export_->metrics();
                                                   }}});
      },
      [this] { metrics_.reset(); });
  services_.bind(
      "jwks",
      [this] {
        if (!config_.jwks_port) return;
        jwks_ = std::make_unique<DocumentServer>(
            config_.jwks_address, config_.jwks_port,
            std::vector<DocumentServer::Document>{{"/.well-known/jwks.json", "application/jwk-set+json",
                                                   [this] { return minter_->jwks().dump(); }}});
      },
      [this] { jwks_.reset(); });
  services_.bind(
      "control",
      [this] {
        control_ = std::make_unique<ControlServer>(config_.control_socket);
        register_verbs();
        control_->start();
      },
      [this] {
        // The streaming verbs' feeds first: their clients are woken, not waited for.
        events_.close();
        approval_events_.close();
        control_->stop();
      });
}

dp::Listeners ZerodDaemon::listeners() const {
  dp::Listeners l;
  l.proxy_port = config_.proxy_port;
  l.dns_port = config_.dns_port;
  return l;
}

void ZerodDaemon::start_host_keys() {
  // State holds policies with their resources (secrets): root only.
  std::filesystem::create_directories(config_.state_dir);
  std::filesystem::permissions(config_.state_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace);
  GuardedBytes::set_read_linger(std::chrono::milliseconds(config_.secret_read_linger_ms));
  // Before anything is restored: a missing key is made only when nothing is
  // sealed yet, else zerod refuses to start (never an empty store).
  host_keys_ = std::make_unique<HostKeys>(
      config_.host_key, state_holds_sealed_values(config_.state_file()) || deployment_ca_sealed(ca_dir()));
  // The CA key is sealed under the host key (a plain one from before is
  // sealed now); one that opens under no key stops the start.
  ca_ = open_deployment_ca(ca_dir(), *host_keys_->current(), host_keys_->pending().get());
}

void ZerodDaemon::start_audit() {
  AuditLogOptions audit_options;
  audit_options.db_path = config_.audit_db();
  audit_options.gather = std::chrono::milliseconds(config_.audit_gather_ms);
  // Each committed line goes to stdout (the journal); each batch is then
  // flushed and wakes the exporters, which read the store themselves (one
  // write and one wake-up per batch, not per record).
  audit_options.sink = [](const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  };
  audit_options.batch_done = [this] {
    std::fflush(stdout);
    std::lock_guard lk(export_mu_);
    if (audit_export_live_) audit_export_live_->notify();
  };
  audit_ = std::make_unique<AuditLog>(audit_options);
}

void ZerodDaemon::start_audit_export() {
  AuditExportConfig exports;
  exports.host = config_.audit_host;
  exports.sinks = config_.audit_sinks.get<std::vector<nlohmann::json>>();
  exports.signing_key = config_.audit_signing_key();
  exports.state_dir = config_.state_dir;
  exports.db_path = config_.audit_db();
  audit_export_ = std::make_unique<AuditExportService>(std::move(exports), *audit_);
  {
    std::lock_guard lk(export_mu_);
    audit_export_live_ = audit_export_.get();
  }
  audit_retention_ =
      std::make_unique<AuditRetention>(config_.audit_retention, *audit_, audit_export_->signing_key());
}

void ZerodDaemon::stop_audit_export() {
  // After every service that audits: what they recorded on their way out is
  // exported (or left in the store for the cursor to resume from).
  audit_retention_.reset();
  {
    // Taken from the writer first; destroyed outside the lock (its
    // exporters may still post audit:dropped, whose commit calls the sink).
    std::lock_guard lk(export_mu_);
    audit_export_live_ = nullptr;
  }
  audit_export_.reset();
}

void ZerodDaemon::start_capabilities() {
  {
    // KV and queue "default" live here; 0700 like the rest of the state.
    const std::filesystem::path resources = std::filesystem::path(config_.state_dir) / "resources";
    std::filesystem::create_directories(resources);
    std::filesystem::permissions(resources, std::filesystem::perms::owner_all);
  }
  // Throws (a store that does not open): zerod does not start.
  StoreCatalog catalog = config_.stores;
  catalog.sql_helper = find_sql_helper();
  stores_ = std::make_shared<StoreSet>(catalog);
  capabilities_ = std::make_shared<CapabilityService>(*audit_, stores_, config_.capability_threads, 64, 2,
                                                      config_.capability_calls_per_session);
}

void ZerodDaemon::start_sessions() {
  SessionRegistry::Options o;
  o.maps = maps_.get();
  o.ingress_prog_fd = datapath_->ingress_prog_fd();
  o.egress_prog_fd = datapath_->egress_prog_fd();
  o.addresses = config_.address_plan();
  o.resolve = [this](const std::string& name) {
    // An L4 rule's name never puts the host itself, a guest pool or a
    // special-purpose range into the datapath (the proxy refuses them too).
    std::vector<net::IpAddress> kept;
    for (const net::IpAddress& a : resolver_->resolve_now(name)) {
      if (auto why = guard_->refusal(a)) {
        spdlog::warn("L4 rule host {}: {} refused ({})", name, a.to_string(), *why);
        audit_->append(
            {"egress:deny",
             "",
             {{"host", name}, {"address", a.to_string()}, {"reason", *why}, {"stage", "l4 rule"}}});
        continue;
      }
      kept.push_back(a);
    }
    return to_resolved(kept);
  };
  o.state_path = config_.state_file();
  o.host_key = host_keys_->current();
  o.event_rate = config_.drop_event_rate;
  o.event_burst = config_.drop_event_burst;
  // The same rate in the datapath (datagrams, before the responder's shared
  // socket) and in the responder (queries, before the policy).
  o.dns_rate = config_.dns_queries_per_second;
  o.dns_burst = config_.dns_query_burst;
  o.limits.dns_answers = config_.dns_answers_per_session;
  o.audit = [this](const std::string& event, const std::string& sid, const json& detail) {
    audit_->append({event, sid, detail});
  };
  o.check_policy = [service = capabilities_.get()](const Policy& p) { service->check(p); };
  o.agent_port = static_cast<uint16_t>(config_.agent_port);
  registry_ = std::make_unique<SessionRegistry>(o);
  // A capability call is authorised against its session as it is when it
  // runs (issue 30): an update or delete revokes queued calls too.
  capabilities_->set_sessions(
      [registry = registry_.get()](const std::string& id) { return registry->get(id); });
}

void ZerodDaemon::start_vms() {
  VmRegistryOptions vm_options;
  vm_options.directory = config_.state_dir + "/vms";
  vm_options.instance = state_dir_tag(config_.state_dir);
  vm_options.ca_cert_path = ca_.paths.cert;
  vm_options.uid_base = config_.vm_uid_base;
  if (config_.agent_port) {
    vm_options.agent_binary = find_agent_binary(config_.agent_binary);
    if (vm_options.agent_binary.empty())
      spdlog::warn("no zn-agent found: microVMs boot without a command agent");
    vm_options.agent_port = static_cast<uint16_t>(config_.agent_port);
    // commands_ is made below; a VM is only ever run after start-up.
    vm_options.agent_config = [this](const std::string& id) {
      return commands_ ? commands_->agent_config(id) : std::string();
    };
    // A VM reached over virtio-serial needs no inward TCP path for it.
    vm_options.agent_over_tcp = [this](const std::string& id, bool over_tcp) {
      registry_->set_agent_over_tcp(id, over_tcp);
    };
  }
  vmm::QemuOptions qemu;
  qemu.binary = config_.vm_qemu;
  qemu.accel = config_.vm_accel;
  qemu.cache_dir = config_.vm_cache_dir;
  vm_options.backends = {std::make_shared<vmm::QemuBackend>(qemu),
                         std::make_shared<vmm::FirecrackerBackend>()};
  vms_ = std::make_unique<VmRegistry>(*registry_, std::move(vm_options));
}

void ZerodDaemon::start_exposures() {
  ExposureServiceOptions expose;
  expose.listen_address = config_.expose_address;
  expose.ticket_ttl = std::chrono::seconds(config_.expose_ticket_ttl_s);
  expose.broker.binding_ttl = std::chrono::seconds(config_.expose_binding_s);
  expose.server.head_timeout = std::chrono::milliseconds(config_.expose_head_timeout_ms);
  expose.broker.refusals.burst = config_.expose_refusal_burst;
  expose.broker.refusals.per_second = config_.expose_refusals_per_minute / 60.0;
  exposures_ = std::make_unique<ExposureService>(*registry_, *audit_, std::move(expose));
}

void ZerodDaemon::start_commands() {
  if (config_.agent_port) {
    // Like the webhook key: a seed file beside the host key (0600, ours),
    // read into guarded pages. A rotation a crash interrupted is finished:
    // its agents may pin the next key already; the others are rekeyed
    // under the old one (kept in memory) the first time they refuse.
    command_keys_ = std::make_unique<HostKeys>(config_.command_signing_key(), false);
    auto signing = [](const HostKey& seed) {
      return seed.with_key([](std::span<const unsigned char> s) { return SigningKey::from_seed(s); });
    };
    std::shared_ptr<const SigningKey> previous;
    if (command_keys_->pending()) {
      previous = signing(*command_keys_->current());
      command_keys_->commit_rotation();
      spdlog::warn("command key: finished a rotation a restart interrupted");
    }
    CommandClientOptions command;
    command.agent_port = static_cast<uint16_t>(config_.agent_port);
    command.agent_channels = [this](const std::string& id) { return vms_->agent_channels(id); };
    commands_ = std::make_unique<CommandClient>(*registry_, signing(*command_keys_->current()),
                                                HostKey::load_or_create(config_.command_result_root()),
                                                *audit_, command, std::move(previous));
  }
}

void ZerodDaemon::start_approvals() {
  if (config_.approval_webhook) {
    webhook_ = std::make_unique<ApprovalWebhook>(
        ApprovalWebhook::options_for(*config_.approval_webhook, config_.webhook_signing_key()));
    spdlog::info("approval webhook: {}", config_.approval_webhook->url);
  }
  ApprovalBook::Options approval_options;
  approval_options.ttl = std::chrono::milliseconds(config_.approval_timeout_ms);
  approval_options.max_held_per_session = config_.approval_held_per_session;
  approval_options.max_grant = std::chrono::seconds(config_.approval_grant_max_s);
  // Both hooks run where the change happened (a proxy I/O loop, a control
  // thread, the periodic thread): they only queue and post.
  approval_options.on_ticket = [this](const HeldRequest& h, TicketEvent event, std::optional<uint32_t> uid) {
    json notice = ticket_notice(h, event, uid);
    if (event == TicketEvent::kHeld && webhook_) webhook_->enqueue(notice);
    approval_events_.publish(notice);
  };
  approval_options.on_grant = [this](const Grant& g, GrantEvent event) {
    // Created and revoked are audited by the verb, with who did it.
    if (event == GrantEvent::kExpired || event == GrantEvent::kSessionDeleted)
      audit_->post({event == GrantEvent::kExpired ? "grant:expired" : "grant:revoked",
                    g.scope.session,
                    {{"grant", g.id},
                     {"method", g.scope.method},
                     {"host", g.scope.host},
                     {"path", g.scope.path},
                     {"expires", format_audit_ts(g.expires)},
                     {"reason", event == GrantEvent::kExpired ? "expired" : "session deleted"}}});
    approval_events_.publish(grant_notice(g, event));
  };
  approvals_ = std::make_unique<ApprovalBook>(std::move(approval_options));
}

void ZerodDaemon::restore_sessions() {
  std::vector<std::string> failed;
  const std::shared_ptr<const HostKey> rotating_to = host_keys_->pending();
  // Throws SealedStateError (a value no key opens): zerod does not start.
  const std::vector<std::string> restored = registry_->restore(&failed, rotating_to.get());
  if (rotating_to) {
    // A rotation a crash interrupted: finished now, before anything is served.
    const std::string from = registry_->host_key_id();
    reseal_deployment_ca(ca_dir(), *host_keys_->current(), *rotating_to);
    registry_->reseal_all(rotating_to);
    host_keys_->commit_rotation();
    audit_->append({"key:rotate", "", {{"from", from}, {"to", rotating_to->id()}, {"resumed", true}}});
    spdlog::warn("finished an interrupted host key rotation: key {}", rotating_to->id());
  }
  for (const auto& id : restored) spdlog::info("re-adopted session {}", id);
  for (const auto& f : failed) spdlog::error("could not restore session {}", f);
  for (const std::string& f : exposures_->reopen_all())
    spdlog::error("could not reopen declared port: {}", f);
}

void ZerodDaemon::start_proxy() {
  proxy::ProxyConfig proxy_config;
  proxy_config.port = config_.proxy_port;
  proxy_config.idle_timeout = std::chrono::milliseconds(config_.proxy_idle_timeout_ms);
  proxy_config.header_timeout = std::chrono::milliseconds(config_.proxy_header_timeout_ms);
  proxy_config.max_connections = config_.proxy_max_connections;
  proxy_config.max_connections_per_guest = config_.proxy_max_connections_per_guest;
  proxy_config.workers.slots = config_.proxy_workers;
  proxy_config.workers.per_tenant = config_.proxy_workers_per_session;
  proxy_config.kernel_splice = config_.proxy_kernel_splice;
  proxy_config.http2 = config_.proxy_http2;
  proxy_config.upstream_http2 = config_.proxy_upstream_http2;
  proxy_config.guest_tls_resumption = config_.proxy_tls_resumption;
  proxy_config.websocket.idle_timeout = std::chrono::milliseconds(config_.proxy_websocket_idle_timeout_ms);
  proxy_config.websocket.max_message = config_.proxy_websocket_max_message;
  proxy_config.ca_cert_path = ca_.paths.cert;
  proxy_config.ca_key = ca_.key;
  proxy_config.upstream_ca_bundle = config_.upstream_ca_bundle;
  proxy_config.guard = guard_;
  proxy_ = std::make_unique<proxy::TransparentProxy>(proxy_config, *proxy_policy_);
}

// The verbs, each family given only what it acts on.
void ZerodDaemon::register_verbs() {
  register_status_verb(*control_, *registry_, *dns_, config_.pin_root, config_.netns);
  register_session_verbs(*control_, {*registry_, ca_.paths.cert});
  register_vm_verbs(*control_, *vms_);
  control_->handle("audit.key", [this](const nlohmann::json&) { return audit_export_->public_key(); });
  control_->handle("audit.sinks", [this](const nlohmann::json&) { return audit_export_->status(); });
  register_exposure_verbs(*control_, *exposures_);
  if (commands_)
    register_command_verbs(*control_, *commands_, [this] {
      // The next key on disk first (<path>.next), then the agents, then
      // the rename: a crash anywhere leaves a state the next start finishes.
      const auto next_seed = command_keys_->begin_rotation();
      auto next =
          next_seed->with_key([](std::span<const unsigned char> s) { return SigningKey::from_seed(s); });
      std::vector<std::string> ids;
      for (const SessionPtr& s : registry_->list()) ids.push_back(s->record.id);
      return commands_->rotate(std::move(next), ids, [this] { command_keys_->commit_rotation(); });
    });
  register_approval_verbs(*control_, *approvals_, *audit_);
  register_approval_watch_verb(*control_, *approvals_, approval_events_);
  control_->handle("approval.webhook_key", [this](const json&) {
    const std::shared_ptr<const SigningKey> key = webhook_ ? webhook_->signing_key() : nullptr;
    if (!key)
      throw std::runtime_error("no Ed25519 webhook key (approval_webhook.signing is not \"ed25519\")");
    const Ed25519PublicKey& pk = key->public_key();
    std::string hex(pk.size() * 2 + 1, '\0');
    sodium_bin2hex(hex.data(), hex.size(), pk.data(), pk.size());
    hex.resize(pk.size() * 2);
    return json{{"algorithm", "ed25519"},
                {"public_key_hex", hex},
                {"jwk", key->jwk()},
                {"path", config_.webhook_signing_key()}};
  });
  register_stats_verb(*control_, *registry_, *maps_);
  register_events_verb(*control_, events_);
  control_->handle("identity.jwks", [this](const json&) { return minter_->jwks(); });
  control_->handle("key.show", [this](const json&) {
    return json{{"path", host_keys_->path()}, {"id", registry_->host_key_id()}};
  });
  control_->handle("key.rotate", [this](const json&) {
    // One rotation at a time; sessions may change meanwhile (the registry
    // reseals under its own lock).
    std::lock_guard lock(rotation_mu_);
    const std::string from = registry_->host_key_id();
    const std::shared_ptr<const HostKey> next = host_keys_->begin_rotation();
    // The CA key first: until the state snapshot below commits, a restart
    // opens it under either key (the next one is on disk beside).
    reseal_deployment_ca(ca_dir(), *host_keys_->current(), *next);
    registry_->reseal_all(next);
    host_keys_->commit_rotation();
    audit_->append({"key:rotate", "", {{"from", from}, {"to", next->id()}}});
    spdlog::info("host key rotated: {} -> {}", from, next->id());
    return json{{"from", from}, {"to", next->id()}, {"path", host_keys_->path()}};
  });
}

void ZerodDaemon::drop_event_loop() {
  auto name_of = [this](uint32_t idx) -> std::string {
    const SessionPtr s = registry_->find_by_session_idx(idx);
    return s ? s->record.id : std::string();
  };
  DropEventAggregator aggregator(name_of, [this](const std::string& sid, const json& detail) {
    audit_->post({"packet:deny", sid, detail});
  });
  dp::DropEventReader reader(datapath_->events_fd(), [&](const zn_drop_event& e) {
    aggregator.add(e);
    if (!events_.has_subscribers()) return;
    events_.publish({{"session", name_of(e.session_idx)},
                     {"event", dp::format_drop_event(e)},
                     {"reason", std::string(dp::verdict_name(e.reason))}});
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
      dns_policy_->flush_unanswered();
      // Expired grants are reported within a second, looked at or not.
      approvals_->grants().sweep();
      // Off the I/O loops: key generation happens here when a key is due.
      try {
        minter_->rotate_if_due();
      } catch (const std::exception& e) {
        spdlog::error("minted identity key rotation: {}", e.what());
      }
      next_flush += std::chrono::seconds(1);
    }
  }
  reader.drain();
  aggregator.flush();
}

}  // namespace zn::broker
