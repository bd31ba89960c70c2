#include "userspace/datapath/maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <tuple>

#include "userspace/datapath/l4_entries.h"

namespace zn::dp {
namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw std::system_error(errno, std::generic_category(), what);
}

uint32_t counter_key(uint32_t session_idx, uint32_t stat) {
  return session_idx * ZN_STATS_PER_SESSION + stat;
}

void check_session_idx(uint32_t idx) {
  if (idx == 0 || idx >= ZN_MAX_SESSIONS)
    throw std::invalid_argument("session index " + std::to_string(idx) + " out of range 1.." +
                                std::to_string(ZN_MAX_SESSIONS - 1));
}

}  // namespace

zn_session to_abi(const SessionEntry& e) {
  check_session_idx(e.session_idx);
  if (e.steered_ports.size() > ZN_MAX_STEERED_PORTS)
    throw std::invalid_argument("at most " + std::to_string(ZN_MAX_STEERED_PORTS) + " steered ports");
  zn_session s{};
  s.session_idx = e.session_idx;
  std::memcpy(s.guest_mac, e.guest_mac.data(), sizeof(s.guest_mac));
  if (e.guest_ip4) s.guest_ip4 = e.guest_ip4->s_addr;
  s.gateway_ip4 = e.gateway_ip4.s_addr;
  if (e.guest_ip6) std::memcpy(s.guest_ip6, e.guest_ip6->s6_addr, 16);
  std::memcpy(s.guest_ip6_ll, e.guest_ip6_ll.s6_addr, 16);
  std::memcpy(s.gateway_ip6, e.gateway_ip6.s6_addr, 16);
  std::memcpy(s.gateway_ip6_ll, e.gateway_ip6_ll.s6_addr, 16);
  for (size_t i = 0; i < e.steered_ports.size(); ++i) {
    if (e.steered_ports[i] == 0) throw std::invalid_argument("steered port 0");
    s.steered_ports[i] = htons(e.steered_ports[i]);
  }
  if (e.exposed_ports.size() > ZN_MAX_EXPOSED_PORTS)
    throw std::invalid_argument("at most " + std::to_string(ZN_MAX_EXPOSED_PORTS) + " exposed ports");
  for (size_t i = 0; i < e.exposed_ports.size(); ++i) {
    if (e.exposed_ports[i] == 0) throw std::invalid_argument("exposed port 0");
    s.exposed_ports[i] = htons(e.exposed_ports[i]);
  }
  s.event_rate = e.event_rate;
  s.event_burst = e.event_burst;
  s.dns_rate = e.dns_rate;
  s.dns_burst = e.dns_burst;
  return s;
}

zn_l4_key to_abi_key(uint32_t session_idx, const L4Rule& rule) {
  check_session_idx(session_idx);
  const unsigned max_prefix = rule.family == 4 ? 32 : rule.family == 6 ? 128 : 0;
  if (max_prefix == 0) throw std::invalid_argument("L4 rule family must be 4 or 6");
  if (rule.prefix_len > max_prefix)
    throw std::invalid_argument("L4 rule prefix /" + std::to_string(rule.prefix_len) + " too long for IPv" +
                                std::to_string(rule.family));
  zn_l4_key key{};
  key.prefixlen = ZN_L4_KEY_FIXED_BITS + rule.prefix_len;
  key.session_idx = session_idx;
  key.family = rule.family;
  key.proto = IPPROTO_TCP;
  // Host bits are cleared so one prefix has exactly one key.
  for (unsigned i = 0; i < max_prefix / 8; ++i) {
    unsigned bits = rule.prefix_len > i * 8 ? rule.prefix_len - i * 8 : 0;
    uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    key.addr[i] = rule.addr[i] & mask;
  }
  return key;
}

void DatapathMaps::set_listeners(const Listeners& l) {
  zn_listeners v{};
  v.proxy_ip4 = l.proxy_ip4.s_addr;
  v.dns_ip4 = l.dns_ip4.s_addr;
  std::memcpy(v.proxy_ip6, l.proxy_ip6.s6_addr, 16);
  std::memcpy(v.dns_ip6, l.dns_ip6.s6_addr, 16);
  v.proxy_port = htons(l.proxy_port);
  v.dns_port = htons(l.dns_port);
  uint32_t zero = 0;
  check(bpf_map_update_elem(fds_.listeners, &zero, &v, BPF_ANY), "update zn_listeners");
}

void DatapathMaps::put_session(int ifindex, const SessionEntry& entry) {
  zn_session s = to_abi(entry);
  uint32_t key = static_cast<uint32_t>(ifindex);
  check(bpf_map_update_elem(fds_.sessions, &key, &s, BPF_ANY), "update zn_sessions");
}

std::optional<zn_session> DatapathMaps::get_session(int ifindex) const {
  uint32_t key = static_cast<uint32_t>(ifindex);
  zn_session s{};
  if (bpf_map_lookup_elem(fds_.sessions, &key, &s) != 0) {
    if (errno == ENOENT) return std::nullopt;
    throw std::system_error(errno, std::generic_category(), "lookup zn_sessions");
  }
  return s;
}

void DatapathMaps::delete_session(int ifindex) {
  auto s = get_session(ifindex);
  if (!s) return;
  uint32_t key = static_cast<uint32_t>(ifindex);
  // The entry goes first: from then on the TAP denies as "no session".
  if (bpf_map_delete_elem(fds_.sessions, &key) != 0 && errno != ENOENT)
    throw std::system_error(errno, std::generic_category(), "delete zn_sessions");
  delete_l4_rules(s->session_idx);
  clear_counters(s->session_idx);
  zn_event_bucket empty{};
  uint32_t idx = s->session_idx;
  check(bpf_map_update_elem(fds_.event_buckets, &idx, &empty, BPF_ANY), "reset zn_ev_bucket");
  check(bpf_map_update_elem(fds_.dns_buckets, &idx, &empty, BPF_ANY), "reset zn_dns_bucket");
}

namespace {

using EntryId = std::tuple<uint8_t, uint8_t, std::array<uint8_t, 16>>;  // family, length, address
EntryId id_of(const L4Entry& e) { return {e.family, e.prefix_len, e.addr}; }

bool same_rule(const L4Rule& a, const L4Rule& b) {
  const zn_l4_key ka = to_abi_key(1, a), kb = to_abi_key(1, b);
  return ka.family == kb.family && ka.prefixlen == kb.prefixlen &&
         std::memcmp(ka.addr, kb.addr, sizeof(ka.addr)) == 0 && a.port == b.port;
}

}  // namespace

void DatapathMaps::replace_l4_rules(uint32_t session_idx, const std::vector<L4Rule>& from,
                                    const std::vector<L4Rule>& to) {
  check_session_idx(session_idx);
  const std::vector<L4Entry> old_entries = fold_l4_rules(from);
  const std::vector<L4Entry> new_entries = fold_l4_rules(to);  // longest prefix first

  // What the trie holds now decides what to write and how the count moves
  // (`from` may be less than the trie holds, e.g. re-adopted pins).
  std::vector<std::pair<zn_l4_key, zn_l4_value>> writes;
  uint32_t added = 0;
  for (const L4Entry& e : new_entries) {
    const zn_l4_key key = to_abi_key(session_idx, e);
    const zn_l4_value value = to_abi_value(e);
    zn_l4_value current{};
    if (bpf_map_lookup_elem(fds_.l4_allow, &key, &current) != 0) {
      if (errno != ENOENT) throw std::system_error(errno, std::generic_category(), "lookup zn_l4_allow");
      ++added;
    } else if (std::memcmp(&current, &value, sizeof(value)) == 0) {
      continue;
    }
    writes.emplace_back(key, value);
  }
  // The summary first, and for the while a superset of what the trie holds
  // and of both sets (the program skips the trie on what it excludes): an
  // entry must never be hidden by it. A torn read of it mixes fields of two
  // supersets, still one.
  const zn_l4_summary before = l4_summary(session_idx);
  zn_l4_summary during = summarize_l4_rules(from);
  const zn_l4_summary after = summarize_l4_rules(to);
  during.entries = before.entries + added;
  during.any_port |= before.any_port | after.any_port;
  during.port_bits |= before.port_bits | after.port_bits;
  if (std::memcmp(&during, &before, sizeof(during)) != 0) set_l4_summary(session_idx, during);
  for (const auto& [key, value] : writes)
    check(bpf_map_update_elem(fds_.l4_allow, &key, &value, BPF_ANY), "update zn_l4_allow");

  std::set<EntryId> keep;
  for (const L4Entry& e : new_entries) keep.insert(id_of(e));
  uint32_t removed = 0;
  // Shortest prefix first: a longer stale entry still answers for its
  // addresses until every shorter stale one that could take over is gone.
  for (auto it = old_entries.rbegin(); it != old_entries.rend(); ++it) {
    if (keep.count(id_of(*it))) continue;
    const zn_l4_key key = to_abi_key(session_idx, *it);
    if (bpf_map_delete_elem(fds_.l4_allow, &key) != 0) {
      if (errno == ENOENT) continue;
      throw std::system_error(errno, std::generic_category(), "delete zn_l4_allow");
    }
    ++removed;
  }
  // Then exactly `to`'s (entries left over from before `from`, e.g. on
  // re-adopted pins, stay counted but lose their ports).
  zn_l4_summary final_summary = after;
  final_summary.entries = during.entries > removed ? during.entries - removed : 0;
  if (std::memcmp(&final_summary, &during, sizeof(during)) != 0) set_l4_summary(session_idx, final_summary);
}

std::vector<L4Rule> DatapathMaps::l4_rules(uint32_t session_idx) const {
  std::vector<L4Rule> out;
  zn_l4_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fds_.l4_allow, prev, &next) == 0) {
    zn_l4_value value{};
    if (next.session_idx == session_idx && bpf_map_lookup_elem(fds_.l4_allow, &next, &value) == 0) {
      auto own = own_rules(next, value);
      out.insert(out.end(), own.begin(), own.end());
    }
    key = next;
    prev = &key;
  }
  return out;
}

void DatapathMaps::put_l4_rule(uint32_t session_idx, const L4Rule& rule) {
  const std::vector<L4Rule> current = l4_rules(session_idx);
  std::vector<L4Rule> next = current;
  next.push_back(rule);
  replace_l4_rules(session_idx, current, next);
}

void DatapathMaps::delete_l4_rule(uint32_t session_idx, const L4Rule& rule) {
  const std::vector<L4Rule> current = l4_rules(session_idx);
  std::vector<L4Rule> next;
  for (const L4Rule& r : current)
    if (!same_rule(r, rule)) next.push_back(r);
  if (next.size() != current.size()) replace_l4_rules(session_idx, current, next);
}

size_t DatapathMaps::delete_l4_rules(uint32_t session_idx) {
  std::vector<zn_l4_key> doomed;
  zn_l4_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fds_.l4_allow, prev, &next) == 0) {
    if (next.session_idx == session_idx) doomed.push_back(next);
    key = next;
    prev = &key;
  }
  for (const auto& k : doomed) {
    if (bpf_map_delete_elem(fds_.l4_allow, &k) != 0 && errno != ENOENT)
      throw std::system_error(errno, std::generic_category(), "delete zn_l4_allow");
  }
  set_l4_summary(session_idx, zn_l4_summary{});
  return doomed.size();
}

uint32_t DatapathMaps::l4_rule_count(uint32_t session_idx) const { return l4_summary(session_idx).entries; }

zn_l4_summary DatapathMaps::l4_summary(uint32_t session_idx) const {
  check_session_idx(session_idx);
  zn_l4_summary summary{};
  check(bpf_map_lookup_elem(fds_.l4_count, &session_idx, &summary), "lookup zn_l4_count");
  return summary;
}

void DatapathMaps::set_l4_summary(uint32_t session_idx, const zn_l4_summary& summary) {
  check(bpf_map_update_elem(fds_.l4_count, &session_idx, &summary, BPF_ANY), "update zn_l4_count");
}

SessionCounters DatapathMaps::counters(uint32_t session_idx) const {
  if (session_idx >= ZN_MAX_SESSIONS) throw std::invalid_argument("session index out of range");
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error("cannot count possible CPUs");
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  SessionCounters totals{};
  for (uint32_t stat = 0; stat < ZN_STATS_PER_SESSION; ++stat) {
    uint32_t key = counter_key(session_idx, stat);
    check(bpf_map_lookup_elem(fds_.counters, &key, per_cpu.data()), "lookup zn_counters");
    for (uint64_t v : per_cpu) totals[stat] += v;
  }
  return totals;
}

void DatapathMaps::clear_counters(uint32_t session_idx) {
  if (session_idx >= ZN_MAX_SESSIONS) throw std::invalid_argument("session index out of range");
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) throw std::runtime_error("cannot count possible CPUs");
  std::vector<uint64_t> zeros(static_cast<size_t>(ncpu), 0);
  for (uint32_t stat = 0; stat < ZN_STATS_PER_SESSION; ++stat) {
    uint32_t key = counter_key(session_idx, stat);
    check(bpf_map_update_elem(fds_.counters, &key, zeros.data(), BPF_ANY), "clear zn_counters");
  }
}

}  // namespace zn::dp
