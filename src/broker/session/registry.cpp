#include "broker/session/registry.h"
#include "broker/session/cap_handles.h"
#include "broker/session/placeholders.h"

#include <malloc.h>
#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <system_error>

#include "broker/policy/parser.h"
#include "broker/session/datapath_entry.h"
#include "broker/session/sealed_policy.h"
#include "broker/session/state_file.h"
#include "userspace/datapath/tc_attachment.h"
#include "userspace/proxy/secret_scrubber.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/tap_device.h"
#include "zn_abi.h"

namespace zn::broker {
namespace {

// An address with its slot's prefix length (the plan's per-guest prefix).
std::string cidr(const in_addr& a, const vmm::GuestNetwork& net) {
  return net::to_string(a) + "/" + std::to_string(net.prefix4);
}
std::string cidr(const in6_addr& a, const vmm::GuestNetwork& net) {
  return net::to_string(a) + "/" + std::to_string(net.prefix6);
}

// Adds the gateway addresses an adopted device may already carry.
void ensure_gateway_addresses(int ifindex, const vmm::GuestNetwork& net) {
  vmm::RouteNetlink nl;
  const auto present = nl.addresses(ifindex);
  for (const std::string& want : {cidr(net.gateway_ip4, net), cidr(net.gateway_ip6, net)})
    if (std::find(present.begin(), present.end(), want) == present.end()) nl.add_address(ifindex, want);
}

nlohmann::json describe_network(const Session& s) {
  return {{"device", s.record.device},
          {"guest_ip4", net::to_string(s.net.guest_ip4)},
          {"gateway_ip4", net::to_string(s.net.gateway_ip4)},
          {"guest_ip6", net::to_string(s.net.guest_ip6)},
          {"guest_mac", net::to_string(s.net.guest_mac)}};
}

}  // namespace

bool valid_session_id(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  if (!(std::islower(static_cast<unsigned char>(id[0])) || std::isdigit(static_cast<unsigned char>(id[0]))))
    return false;
  return std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '-' || c == '_';
  });
}

SessionRegistry::SessionRegistry(Options options)
    : options_(std::move(options)),
      state_(options_.state_path.empty() ? nullptr : std::make_unique<StateFile>(options_.state_path)),
      reaper_(
          [this](const std::vector<std::string>& gone, const std::vector<std::string>&) {
            {
              // Not control_mu_: a create holding it may be waiting in drain().
              // A TAP that could not be deleted keeps its slot.
              std::lock_guard lock(reaped_mu_);
              reaped_.insert(reaped_.end(), gone.begin(), gone.end());
            }
            // glibc keeps freed heap mapped; after many deletes hand it back.
            // malloc_trim walks the arenas (milliseconds at 100 MB), so not
            // per delete, and here, off the control lock.
            reaped_since_trim_ += gone.size();
            if (reaped_since_trim_ >= std::max<size_t>(kTrimAfterDeletes, index_.size() / 4)) {
              reaped_since_trim_ = 0;
              ::malloc_trim(0);
            }
          },
          options_.before_reap) {
  if (!options_.maps) throw std::invalid_argument("SessionRegistry needs the datapath maps");
  if (state_ && !options_.host_key)
    throw std::invalid_argument("SessionRegistry: a state file needs a host key to seal resources under");
  used_idx_.take(0);  // datapath index 0 is "no session"
  if (!options_.resolve) options_.resolve = [](const std::string&) { return std::vector<ResolvedAddress>{}; };
}

SessionRegistry::~SessionRegistry() = default;

void SessionRegistry::collect_reaped_locked() {
  std::vector<std::string> gone;
  {
    std::lock_guard lock(reaped_mu_);
    gone.swap(reaped_);
  }
  for (const std::string& name : gone) {
    auto it = reaping_.find(name);
    if (it == reaping_.end()) continue;
    used_slots_.release(it->second);
    reaping_.erase(it);
  }
}

void SessionRegistry::emit(const std::string& event, const std::string& sid,
                           const nlohmann::json& detail) const {
  if (options_.audit) options_.audit(event, sid, detail);
}

std::string SessionRegistry::sealed_locked(const std::string& id, const std::string& policy_json,
                                           const Policy& parsed) const {
  // A policy without resources has nothing to seal: not parsed again (a
  // 10k-rule policy would cost milliseconds more per change). Decided on the
  // parsed policy, never on the text, which may spell its keys with escapes.
  if (!options_.host_key || parsed.resources.empty()) return policy_json;
  return seal_policy_json(*options_.host_key, id, policy_json);
}

std::vector<SessionRecord> SessionRegistry::live_records_locked() const {
  std::vector<SessionRecord> records;
  records.reserve(index_.size());
  for (const SessionPtr& s : index_.all()) records.push_back(s->record);
  return records;
}

std::string SessionRegistry::host_key_id() const {
  std::lock_guard lock(control_mu_);
  return options_.host_key ? options_.host_key->id() : std::string();
}

uint32_t SessionRegistry::free_session_idx_locked() {
  const uint32_t idx = used_idx_.lowest_free();
  if (idx >= ZN_MAX_SESSIONS) throw SessionError("no free datapath session index");
  return idx;
}

unsigned SessionRegistry::free_slot_locked(std::optional<unsigned> wanted) {
  if (wanted) {
    if (*wanted >= options_.addresses.max_slots()) throw SessionError("slot out of range");
    // A slot whose TAP is still being reaped is free in a moment: wait for
    // it rather than refuse (the reaper never takes control_mu_).
    if (used_slots_.taken(*wanted) &&
        reaping_.count(vmm::guest_network(options_.addresses, *wanted).tap_name)) {
      reaper_.drain();
      collect_reaped_locked();
    }
    if (used_slots_.taken(*wanted)) throw SessionError("slot " + std::to_string(*wanted) + " is taken");
    return *wanted;
  }
  const unsigned slot = used_slots_.lowest_free();
  if (slot >= options_.addresses.max_slots()) throw SessionError("no free address slot");
  return slot;
}

void SessionRegistry::publish_locked(SessionPtr s) {
  used_idx_.take(s->record.session_idx);
  used_slots_.take(s->record.slot);
  index_.put(std::move(s));
}

SessionPtr SessionRegistry::withdraw_locked(const std::string& id, bool keep_slot) {
  SessionPtr s = index_.erase(id);
  if (s) {
    used_idx_.release(s->record.session_idx);
    if (!keep_slot) used_slots_.release(s->record.slot);
  }
  return s;
}

dp::SessionEntry SessionRegistry::entry_locked(const Session& s) const {
  dp::SessionEntry entry = session_entry_for(s.net, s.record.session_idx);
  entry.steered_ports = s.plan.steered_ports;
  entry.event_rate = options_.event_rate;
  entry.event_burst = options_.event_burst;
  entry.dns_rate = options_.dns_rate;
  entry.dns_burst = options_.dns_burst;
  for (const auto& [port, exposure] : s.record.exposed) entry.exposed_ports.push_back(port);
  if (options_.agent_port && s.agent_over_tcp) entry.exposed_ports.push_back(options_.agent_port);
  // An adopted device's link-local comes from its own MAC, not from the
  // plan: zero tells the datapath it is not known (any link-local stands in).
  if (s.record.adopted) entry.gateway_ip6_ll = {};
  return entry;
}

void SessionRegistry::install_locked(Session& s, bool created_device) {
  try {
    if (!created_device) ensure_gateway_addresses(s.ifindex, s.net);
    const dp::SessionEntry entry = entry_locked(s);
    // Rules before the session entry: the first steered packet sees them.
    apply_l4_change(*options_.maps, s.record.session_idx, {}, s.plan);
    options_.maps->put_session(s.ifindex, entry);
    dp::TcAttachment::attach(s.ifindex, options_.ingress_prog_fd, options_.egress_prog_fd).release();
    // A device restored or adopted from a zerod configured with the other
    // backend (tc_attach) still carries that one's programs: removed once
    // ours are on, so the device is never without a deny.
    if (!created_device) dp::TcAttachment::remove_other_backend(s.ifindex);
  } catch (...) {
    options_.maps->delete_session(s.ifindex);
    options_.maps->delete_l4_rules(s.record.session_idx);
    if (created_device) vmm::delete_tap(s.record.device);
    throw;
  }
}

SessionPtr SessionRegistry::create(const SessionSpec& spec) {
  if (!valid_session_id(spec.id))
    throw SessionError("bad session id '" + spec.id + "': [a-z0-9][a-z0-9_-]{0,63}");
  auto compiled = CompiledPolicy::compile(parse_policy(spec.policy_json));
  if (options_.check_policy) options_.check_policy(compiled->policy());
  std::lock_guard lock(control_mu_);
  if (index_.by_id(spec.id)) throw SessionError("session '" + spec.id + "' exists");
  collect_reaped_locked();

  auto s = std::make_shared<Session>();
  s->record.id = spec.id;
  s->record.session_idx = free_session_idx_locked();
  s->record.slot = free_slot_locked(spec.slot);
  s->record.policy_json = sealed_locked(spec.id, spec.policy_json, compiled->policy());
  s->record.placeholders = assign_placeholders(compiled->policy(), {});
  s->record.cap_handles = assign_cap_handles(compiled->policy(), {});
  s->record.created_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  s->net = vmm::guest_network(options_.addresses, s->record.slot);
  s->state = std::make_shared<SessionState>(options_.limits);
  s->policy = compiled;
  s->plan = plan_datapath(*compiled, options_.resolve);
  bool created_device = false;
  if (spec.adopt_device) {
    for (const SessionPtr& other : index_.all())
      if (other->record.device == *spec.adopt_device)
        throw SessionError("device " + *spec.adopt_device + " belongs to session '" + other->record.id + "'");
    s->record.device = *spec.adopt_device;
    s->record.adopted = true;
    s->ifindex = static_cast<int>(if_nametoindex(s->record.device.c_str()));
    if (s->ifindex == 0) throw SessionError("no device " + s->record.device + " to adopt");
  } else {
    s->record.device = s->net.tap_name;
    vmm::TapSettings tap;
    tap.mac = s->net.host_mac;
    tap.mtu = vmm::GuestNetwork::kMtu;
    tap.addresses = {cidr(s->net.gateway_ip4, s->net), cidr(s->net.gateway_ip6, s->net)};
    s->ifindex = vmm::create_tap(s->record.device, tap);
    created_device = true;
  }
  install_locked(*s, created_device);
  tell_publishing_locked(nullptr, *s);
  publish_locked(s);
  try {
    persist_put_locked(s->record);
  } catch (...) {
    withdraw_locked(s->record.id);
    options_.maps->delete_session(s->ifindex);
    if (created_device) vmm::delete_tap(s->record.device);
    tell_removed_locked(*s);
    throw;
  }
  tell_published_locked(nullptr, *s);
  nlohmann::json detail = describe_network(*s);
  detail["policy_version"] = s->record.policy_version;
  emit("session:create", s->record.id, detail);
  return s;
}

SessionPtr SessionRegistry::update(const std::string& id, const std::string& policy_json) {
  auto compiled = CompiledPolicy::compile(parse_policy(policy_json));
  if (options_.check_policy) options_.check_policy(compiled->policy());
  std::lock_guard lock(control_mu_);
  SessionPtr previous = index_.by_id(id);
  if (!previous) throw SessionError("no session '" + id + "'");
  auto next = std::make_shared<Session>(*previous);
  next->policy = compiled;
  next->plan = plan_datapath(*compiled, options_.resolve);
  next->record.policy_json = sealed_locked(id, policy_json, compiled->policy());
  next->record.placeholders = assign_placeholders(compiled->policy(), previous->record.placeholders);
  next->record.cap_handles = assign_cap_handles(compiled->policy(), previous->record.cap_handles);
  next->record.policy_version += 1;
  // New entries in, stale ones out; steered ports do not change with policy.
  apply_l4_change(*options_.maps, next->record.session_idx, previous->plan, next->plan);
  tell_publishing_locked(previous.get(), *next);
  publish_locked(next);
  try {
    persist_put_locked(next->record);
  } catch (...) {
    apply_l4_change(*options_.maps, next->record.session_idx, next->plan, previous->plan);
    tell_publishing_locked(next.get(), *previous);
    publish_locked(previous);
    throw;
  }
  tell_published_locked(previous.get(), *next);
  // Automata kept warm for connections to come may hold secrets the new
  // policy no longer injects: built again when next armed.
  proxy::SecretScrubber::forget_warm();
  emit("session:update", id, {{"policy_version", next->record.policy_version}});
  return next;
}

SessionPtr SessionRegistry::set_exposed(const std::string& id, uint16_t port,
                                        std::optional<ExposedPort> exposure) {
  if (port == 0) throw SessionError("port 0 cannot be exposed");
  if (port == options_.agent_port)
    throw SessionError("port " + std::to_string(port) + " is the agent's, reached by zerod alone");
  if (exposure && exposure->family != 4 && exposure->family != 6) throw SessionError("family must be 4 or 6");
  std::lock_guard lock(control_mu_);
  SessionPtr previous = index_.by_id(id);
  if (!previous) throw SessionError("no session '" + id + "'");
  auto next = std::make_shared<Session>(*previous);
  if (exposure) {
    const size_t most = ZN_MAX_EXPOSED_PORTS - (options_.agent_port ? 1 : 0);
    if (!next->record.exposed.count(port) && next->record.exposed.size() >= most)
      throw SessionError("session '" + id + "' has " + std::to_string(most) +
                         " exposed ports (the most allowed)");
    next->record.exposed[port] = *exposure;
  } else if (next->record.exposed.erase(port) == 0) {
    throw SessionError("port " + std::to_string(port) + " of session '" + id + "' is not exposed");
  }
  options_.maps->put_session(next->ifindex, entry_locked(*next));
  publish_locked(next);
  try {
    persist_put_locked(next->record);
  } catch (...) {
    options_.maps->put_session(previous->ifindex, entry_locked(*previous));
    publish_locked(previous);
    throw;
  }
  if (exposure)
    emit("ingress:expose", id,
         {{"port", port},
          {"mode", exposure->public_mode ? "public" : "ticket"},
          {"family", exposure->family}});
  else
    emit("ingress:unexpose", id, {{"port", port}});
  return next;
}

void SessionRegistry::set_agent_over_tcp(const std::string& id, bool over_tcp) {
  std::lock_guard lock(control_mu_);
  SessionPtr previous = index_.by_id(id);
  if (!previous || previous->agent_over_tcp == over_tcp) return;
  auto next = std::make_shared<Session>(*previous);
  next->agent_over_tcp = over_tcp;
  options_.maps->put_session(next->ifindex, entry_locked(*next));
  publish_locked(next);
}

void SessionRegistry::remove(const std::string& id, bool detach) {
  if (const SessionPtr leaving = index_.by_id(id))
    for (auto p = participants_.rbegin(); p != participants_.rend(); ++p) (*p)->session_leaving(*leaving);
  std::lock_guard lock(control_mu_);
  const SessionPtr s = index_.by_id(id);
  if (!s) throw SessionError("no session '" + id + "'");
  // Fail closed: from here the attached programs find no session for the
  // TAP and drop everything it carries, so the device itself can go later.
  options_.maps->delete_session(s->ifindex);
  withdraw_locked(id, /*keep_slot=*/!s->record.adopted);
  nlohmann::json detail = {{"device", s->record.device}};
  if (s->record.adopted) {
    // Parked: the programs stay, the device denies all until it is gone
    // (its programs go with it) or adopted again (install_locked replaces
    // them). Only the operator's explicit choice hands it back open.
    if (detach)
      dp::TcAttachment::attach(s->ifindex, options_.ingress_prog_fd, options_.egress_prog_fd).detach();
    detail["device_state"] = detach ? "detached" : "parked";
  } else {
    // Unregistering a netdev waits for an rcu_barrier (~18 ms): the reaper
    // does it off this lock, batched; the slot (the TAP's name and
    // addresses) stays taken until the device is gone.
    reaping_[s->record.device] = s->record.slot;
    reaper_.reap(s->record.device);
    detail["device_state"] = "deleted";
  }
  persist_erase_locked(id);
  // Recorded while the audit still knows the session's own secrets: after
  // its participants are told, a record of it is redacted with every value
  // held (a merge of every session's, rebuilt after each change: 2 % of
  // zerod's CPU while deleting 10,000 sessions when this came after).
  emit("session:delete", id, detail);
  tell_removed_locked(*s);
  // The session's secrets leave the automata kept warm (its connections
  // still open hold theirs until they end).
  proxy::SecretScrubber::forget_warm();
}

void SessionRegistry::tell_publishing_locked(const Session* before, const Session& next) {
  for (SessionParticipant* p : participants_) p->session_publishing(before, next);
}

void SessionRegistry::tell_published_locked(const Session* before, const Session& now) {
  for (SessionParticipant* p : participants_) p->session_published(before, now);
}

void SessionRegistry::tell_removed_locked(const Session& s) {
  for (auto p = participants_.rbegin(); p != participants_.rend(); ++p) (*p)->session_removed(s);
}

std::vector<SessionRegistry::ParkedDevice> SessionRegistry::parked() const {
  // Under the control lock: a device a create is adopting right now is
  // either still parked or already its session's, never both or neither.
  std::lock_guard lock(control_mu_);
  std::vector<ParkedDevice> out;
  std::unique_ptr<struct if_nameindex, decltype(&if_freenameindex)> names(if_nameindex(), &if_freenameindex);
  if (!names) throw std::system_error(errno, std::generic_category(), "if_nameindex");
  for (const struct if_nameindex* n = names.get(); n->if_index != 0; ++n) {
    const int ifindex = static_cast<int>(n->if_index);
    if (index_.by_ifindex(ifindex) || !dp::TcAttachment::is_attached(ifindex)) continue;
    out.push_back({n->if_name, ifindex});
  }
  std::sort(out.begin(), out.end(),
            [](const ParkedDevice& a, const ParkedDevice& b) { return a.name < b.name; });
  return out;
}

std::vector<std::string> SessionRegistry::restore(std::vector<std::string>* failed,
                                                  const HostKey* rotating_to) {
  std::vector<std::string> restored;
  if (!state_) return restored;
  std::lock_guard lock(control_mu_);
  std::vector<const HostKey*> keys;
  if (options_.host_key) keys.push_back(options_.host_key.get());
  if (rotating_to) keys.push_back(rotating_to);

  // First every policy, sealed values opened, with nothing installed: a
  // value no key opens stops the start here (SealedStateError propagates).
  struct Opened {
    SessionRecord record;
    std::shared_ptr<const CompiledPolicy> policy;  // null: the policy does not parse
    std::string error;
  };
  std::vector<Opened> opened;
  bool rewrite = false;  // records from before sealing, sealed now
  for (SessionRecord& r : state_->load()) {
    Opened o{std::move(r), nullptr, {}};
    try {
      OpenedPolicy p = keys.empty() ? OpenedPolicy{parse_policy(o.record.policy_json)}
                                    : open_sealed_policy(keys, o.record.id, o.record.policy_json);
      // Values under rotating_to stay as they are: the caller finishes the
      // rotation (reseal_all) once restored.
      if (p.had_plaintext) {
        o.record.policy_json =
            reseal_policy_json(*keys.front(), *keys.front(), o.record.id, o.record.policy_json);
        rewrite = true;
      }
      o.policy = CompiledPolicy::compile(std::move(p.policy));
      // A record from before placeholders, or one missing one, gets it now.
      auto placeholders = assign_placeholders(o.policy->policy(), o.record.placeholders);
      if (placeholders != o.record.placeholders) {
        o.record.placeholders = std::move(placeholders);
        rewrite = true;
      }
      auto handles = assign_cap_handles(o.policy->policy(), o.record.cap_handles);
      if (handles != o.record.cap_handles) {
        o.record.cap_handles = std::move(handles);
        rewrite = true;
      }
    } catch (const SealedStateError&) {
      throw;
    } catch (const std::exception& e) {
      o.error = e.what();
    }
    opened.push_back(std::move(o));
  }

  bool dropped = false;
  for (Opened& o : opened) {
    const SessionRecord& r = o.record;
    try {
      if (!o.policy) throw std::runtime_error(o.error);
      Session s;
      s.record = r;
      s.net = vmm::guest_network(options_.addresses, r.slot);
      s.state = std::make_shared<SessionState>(options_.limits);
      s.policy = std::move(o.policy);
      s.plan = plan_datapath(*s.policy, options_.resolve);
      s.ifindex = static_cast<int>(if_nametoindex(r.device.c_str()));
      if (used_idx_.taken(r.session_idx) || used_slots_.taken(r.slot))
        throw std::runtime_error("datapath index or address slot used twice in the state file");
      bool created_device = false;
      if (s.ifindex == 0) {
        if (r.adopted) throw std::runtime_error("adopted device " + r.device + " is gone");
        vmm::TapSettings tap;
        tap.mac = s.net.host_mac;
        tap.addresses = {cidr(s.net.gateway_ip4, s.net), cidr(s.net.gateway_ip6, s.net)};
        s.ifindex = vmm::create_tap(r.device, tap);
        created_device = true;
      }
      install_locked(s, created_device);
      auto restored_session = std::make_shared<const Session>(std::move(s));
      tell_publishing_locked(nullptr, *restored_session);
      publish_locked(restored_session);
      tell_published_locked(nullptr, *restored_session);
      restored.push_back(r.id);
    } catch (const std::exception& e) {
      if (failed) failed->push_back(r.id + ": " + e.what());
      dropped = true;
    }
  }
  // A session that could not be restored leaves the file now, as the whole
  // rewrite of the first change did before: it must not keep a slot or an
  // index a new session takes. Values found in plaintext (a file from
  // before sealing) are sealed in the same snapshot.
  if (dropped || rewrite) state_->compact(live_records_locked());
  return restored;
}

void SessionRegistry::reseal_all(std::shared_ptr<const HostKey> next) {
  if (!next) throw std::invalid_argument("reseal_all: no key");
  std::lock_guard lock(control_mu_);
  if (!options_.host_key) throw std::logic_error("reseal_all: this registry seals nothing");
  std::vector<std::shared_ptr<Session>> resealed;
  std::vector<SessionRecord> records;
  for (const SessionPtr& s : index_.all()) {
    auto copy = std::make_shared<Session>(*s);
    copy->record.policy_json =
        reseal_policy_json(*options_.host_key, *next, copy->record.id, copy->record.policy_json);
    records.push_back(copy->record);
    resealed.push_back(std::move(copy));
  }
  // The snapshot is the commit point: before it the old key opens the
  // file, after it the new one (restore accepts both while a rotation's
  // next key file is there).
  if (state_) state_->compact(records);
  for (auto& s : resealed) index_.put(std::move(s));
  options_.host_key = std::move(next);
}

void SessionRegistry::persist_put_locked(const SessionRecord& record) {
  if (!state_) return;
  state_->put(record);
  compact_if_due_locked();
}

void SessionRegistry::persist_erase_locked(const std::string& id) {
  if (!state_) return;
  state_->erase(id);
  compact_if_due_locked();
}

void SessionRegistry::compact_if_due_locked() {
  if (!state_->compaction_due(index_.size())) return;
  try {
    state_->compact(live_records_locked());
  } catch (const std::exception&) {
    // The change itself is in the journal; compaction is retried on the next.
  }
}

}  // namespace zn::broker
