#include "userspace/datapath/maps.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

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
  s.event_rate = e.event_rate;
  s.event_burst = e.event_burst;
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
  key.port = htons(rule.port);
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
}

void DatapathMaps::put_l4_rule(uint32_t session_idx, const L4Rule& rule) {
  zn_l4_key key = to_abi_key(session_idx, rule);
  zn_l4_value value{rule.rule_id, 0};
  zn_l4_value old{};
  const bool existed = bpf_map_lookup_elem(fds_.l4_allow, &key, &old) == 0;
  // Count first: a rule in the trie must never be hidden by a zero count.
  if (!existed) set_l4_rule_count(session_idx, l4_rule_count(session_idx) + 1);
  check(bpf_map_update_elem(fds_.l4_allow, &key, &value, BPF_ANY), "update zn_l4_allow");
}

void DatapathMaps::delete_l4_rule(uint32_t session_idx, const L4Rule& rule) {
  zn_l4_key key = to_abi_key(session_idx, rule);
  if (bpf_map_delete_elem(fds_.l4_allow, &key) != 0) {
    if (errno == ENOENT) return;
    throw std::system_error(errno, std::generic_category(), "delete zn_l4_allow");
  }
  const uint32_t count = l4_rule_count(session_idx);
  set_l4_rule_count(session_idx, count ? count - 1 : 0);
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
  set_l4_rule_count(session_idx, 0);
  return doomed.size();
}

uint32_t DatapathMaps::l4_rule_count(uint32_t session_idx) const {
  check_session_idx(session_idx);
  uint32_t count = 0;
  check(bpf_map_lookup_elem(fds_.l4_count, &session_idx, &count), "lookup zn_l4_count");
  return count;
}

void DatapathMaps::set_l4_rule_count(uint32_t session_idx, uint32_t count) {
  check(bpf_map_update_elem(fds_.l4_count, &session_idx, &count, BPF_ANY), "update zn_l4_count");
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
