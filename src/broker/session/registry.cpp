#include "broker/session/registry.h"

#include <net/if.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "broker/session/datapath_entry.h"
#include "broker/policy/parser.h"
#include "broker/session/state_file.h"
#include "userspace/datapath/tc_attachment.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/tap_device.h"
#include "zn_abi.h"

namespace zn::broker {
namespace {

std::string cidr(const in_addr& a) {
  return net::to_string(a) + "/" + std::to_string(vmm::GuestNetwork::kPrefix4);
}
std::string cidr(const in6_addr& a) {
  return net::to_string(a) + "/" + std::to_string(vmm::GuestNetwork::kPrefix6);
}

// Adds the gateway addresses an adopted device may already carry.
void ensure_gateway_addresses(int ifindex, const vmm::GuestNetwork& net) {
  vmm::RouteNetlink nl;
  const auto present = nl.addresses(ifindex);
  for (const std::string& want : {cidr(net.gateway_ip4), cidr(net.gateway_ip6)})
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

SessionRegistry::SessionRegistry(Options options) : options_(std::move(options)) {
  if (!options_.maps) throw std::invalid_argument("SessionRegistry needs the datapath maps");
  if (!options_.resolve) options_.resolve = [](const std::string&) { return std::vector<ResolvedAddress>{}; };
}

void SessionRegistry::emit(const std::string& event, const std::string& sid,
                           const nlohmann::json& detail) const {
  if (options_.audit) options_.audit(event, sid, detail);
}

uint32_t SessionRegistry::free_session_idx_locked() const {
  for (uint32_t idx = 1; idx < ZN_MAX_SESSIONS; ++idx) {
    bool used = std::any_of(sessions_.begin(), sessions_.end(),
                            [&](const auto& kv) { return kv.second.record.session_idx == idx; });
    if (!used) return idx;
  }
  throw SessionError("no free datapath session index");
}

unsigned SessionRegistry::free_slot_locked(std::optional<unsigned> wanted) const {
  auto used = [&](unsigned slot) {
    return std::any_of(sessions_.begin(), sessions_.end(),
                       [&](const auto& kv) { return kv.second.record.slot == slot; });
  };
  if (wanted) {
    if (*wanted >= vmm::AddressPlan::kMaxSlots) throw SessionError("slot out of range");
    if (used(*wanted)) throw SessionError("slot " + std::to_string(*wanted) + " is taken");
    return *wanted;
  }
  for (unsigned slot = 0; slot < vmm::AddressPlan::kMaxSlots; ++slot)
    if (!used(slot)) return slot;
  throw SessionError("no free address slot");
}

void SessionRegistry::install_locked(Session& s, bool created_device) {
  try {
    if (!created_device) ensure_gateway_addresses(s.ifindex, s.net);
    dp::SessionEntry entry = session_entry_for(s.net, s.record.session_idx);
    entry.steered_ports = s.plan.steered_ports;
    entry.event_rate = options_.event_rate;
    entry.event_burst = options_.event_burst;
    // An adopted device's link-local comes from its own MAC, not from the
    // plan: zero tells the datapath it is not known (any link-local stands in).
    if (s.record.adopted) entry.gateway_ip6_ll = {};
    // Rules before the session entry: the first steered packet sees them.
    apply_l4_change(*options_.maps, s.record.session_idx, {}, s.plan);
    options_.maps->put_session(s.ifindex, entry);
    dp::TcAttachment::attach(s.ifindex, options_.ingress_prog_fd, options_.egress_prog_fd).release();
  } catch (...) {
    options_.maps->delete_session(s.ifindex);
    options_.maps->delete_l4_rules(s.record.session_idx);
    if (created_device) vmm::delete_tap(s.record.device);
    throw;
  }
}

Session SessionRegistry::create(const SessionSpec& spec) {
  if (!valid_session_id(spec.id))
    throw SessionError("bad session id '" + spec.id + "': [a-z0-9][a-z0-9_-]{0,63}");
  auto compiled = CompiledPolicy::compile(parse_policy(spec.policy_json));
  std::lock_guard lock(mu_);
  if (sessions_.count(spec.id)) throw SessionError("session '" + spec.id + "' exists");

  Session s;
  s.record.id = spec.id;
  s.record.session_idx = free_session_idx_locked();
  s.record.slot = free_slot_locked(spec.slot);
  s.record.policy_json = spec.policy_json;
  s.record.created_unix =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  s.net = vmm::guest_network(options_.addresses, s.record.slot);
  s.policy = compiled;
  s.plan = plan_datapath(*compiled, options_.resolve);
  bool created_device = false;
  if (spec.adopt_device) {
    for (const auto& [id, other] : sessions_)
      if (other.record.device == *spec.adopt_device)
        throw SessionError("device " + *spec.adopt_device + " belongs to session '" + id + "'");
    s.record.device = *spec.adopt_device;
    s.record.adopted = true;
    s.ifindex = static_cast<int>(if_nametoindex(s.record.device.c_str()));
    if (s.ifindex == 0) throw SessionError("no device " + s.record.device + " to adopt");
  } else {
    s.record.device = s.net.tap_name;
    vmm::TapSettings tap;
    tap.mac = s.net.host_mac;
    tap.mtu = vmm::GuestNetwork::kMtu;
    tap.addresses = {cidr(s.net.gateway_ip4), cidr(s.net.gateway_ip6)};
    s.ifindex = vmm::create_tap(s.record.device, tap);
    created_device = true;
  }
  install_locked(s, created_device);
  sessions_[s.record.id] = s;
  try {
    persist_locked();
  } catch (...) {
    sessions_.erase(s.record.id);
    options_.maps->delete_session(s.ifindex);
    if (created_device) vmm::delete_tap(s.record.device);
    throw;
  }
  nlohmann::json detail = describe_network(s);
  detail["policy_version"] = s.record.policy_version;
  emit("session:create", s.record.id, detail);
  return s;
}

Session SessionRegistry::update(const std::string& id, const std::string& policy_json) {
  auto compiled = CompiledPolicy::compile(parse_policy(policy_json));
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) throw SessionError("no session '" + id + "'");
  Session next = it->second;
  next.policy = compiled;
  next.plan = plan_datapath(*compiled, options_.resolve);
  next.record.policy_json = policy_json;
  next.record.policy_version += 1;
  // New entries in, stale ones out; steered ports do not change with policy.
  apply_l4_change(*options_.maps, next.record.session_idx, it->second.plan, next.plan);
  Session previous = it->second;
  it->second = next;
  try {
    persist_locked();
  } catch (...) {
    apply_l4_change(*options_.maps, next.record.session_idx, next.plan, previous.plan);
    it->second = previous;
    throw;
  }
  emit("session:update", id, {{"policy_version", next.record.policy_version}});
  return next;
}

void SessionRegistry::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) throw SessionError("no session '" + id + "'");
  const Session s = it->second;
  options_.maps->delete_session(s.ifindex);  // from here the TAP denies everything
  if (s.record.adopted) {
    dp::TcAttachment::attach(s.ifindex, options_.ingress_prog_fd, options_.egress_prog_fd).detach();
  } else {
    vmm::delete_tap(s.record.device);
  }
  sessions_.erase(it);
  persist_locked();
  emit("session:delete", id, {{"device", s.record.device}});
}

std::vector<Session> SessionRegistry::list() const {
  std::lock_guard lock(mu_);
  std::vector<Session> out;
  for (const auto& [id, s] : sessions_) out.push_back(s);
  return out;
}

std::optional<Session> SessionRegistry::get(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  return it->second;
}

std::optional<Session> SessionRegistry::find_by_guest_ip4(in_addr addr) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sessions_)
    if (s.net.guest_ip4.s_addr == addr.s_addr) return s;
  return std::nullopt;
}

std::optional<Session> SessionRegistry::find_by_guest_ip6(const in6_addr& addr) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, s] : sessions_)
    if (std::memcmp(&s.net.guest_ip6, &addr, sizeof(addr)) == 0) return s;
  return std::nullopt;
}

std::vector<std::string> SessionRegistry::restore(std::vector<std::string>* failed) {
  std::vector<std::string> restored;
  if (options_.state_path.empty()) return restored;
  std::lock_guard lock(mu_);
  for (SessionRecord& r : load_session_records(options_.state_path)) {
    try {
      Session s;
      s.record = r;
      s.net = vmm::guest_network(options_.addresses, r.slot);
      s.policy = CompiledPolicy::compile(parse_policy(r.policy_json));
      s.plan = plan_datapath(*s.policy, options_.resolve);
      s.ifindex = static_cast<int>(if_nametoindex(r.device.c_str()));
      bool created_device = false;
      if (s.ifindex == 0) {
        if (r.adopted) throw std::runtime_error("adopted device " + r.device + " is gone");
        vmm::TapSettings tap;
        tap.mac = s.net.host_mac;
        tap.addresses = {cidr(s.net.gateway_ip4), cidr(s.net.gateway_ip6)};
        s.ifindex = vmm::create_tap(r.device, tap);
        created_device = true;
      }
      install_locked(s, created_device);
      sessions_[r.id] = s;
      restored.push_back(r.id);
    } catch (const std::exception& e) {
      if (failed) failed->push_back(r.id + ": " + e.what());
    }
  }
  return restored;
}

void SessionRegistry::persist_locked() const {
  if (options_.state_path.empty()) return;
  std::vector<SessionRecord> records;
  for (const auto& [id, s] : sessions_) records.push_back(s.record);
  save_session_records(options_.state_path, records);
}

}  // namespace zn::broker
