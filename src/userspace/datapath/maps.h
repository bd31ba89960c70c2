// Writing sessions, listeners and L4 rules into the datapath maps, and
// reading its counters. Callers validate policy; this layer validates only
// what would corrupt the maps.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "userspace/net/address.h"
#include "zn_abi.h"

namespace zn::dp {

// TCP ports steered to the proxy unless a session says otherwise.
inline constexpr std::array<uint16_t, 2> kDefaultSteeredPorts{80, 443};

// Where the host sockets that guests are steered to listen.
struct Listeners {
  in_addr proxy_ip4{htonl(INADDR_LOOPBACK)};
  in6_addr proxy_ip6 = in6addr_loopback;
  uint16_t proxy_port = ZN_DEFAULT_PROXY_PORT;  // host order
  in_addr dns_ip4{htonl(INADDR_LOOPBACK)};
  in6_addr dns_ip6 = in6addr_loopback;
  uint16_t dns_port = ZN_DEFAULT_DNS_PORT;  // host order, UDP and TCP
};

struct SessionEntry {
  uint32_t session_idx = 0;  // 1 .. ZN_MAX_SESSIONS-1
  net::MacAddress guest_mac{};
  std::optional<in_addr> guest_ip4;
  in_addr gateway_ip4{};
  std::optional<in6_addr> guest_ip6;
  in6_addr guest_ip6_ll{};
  in6_addr gateway_ip6{};
  in6_addr gateway_ip6_ll{};  // the host's link-local on the device; zero = not known
  std::vector<uint16_t> steered_ports{kDefaultSteeredPorts.begin(),
                                      kDefaultSteeredPorts.end()};  // host order
  uint32_t event_rate = ZN_DEFAULT_EVENT_RATE;                      // drop events per second
  uint32_t event_burst = ZN_DEFAULT_EVENT_BURST;
  uint32_t dns_rate = ZN_DEFAULT_DNS_RATE;  // the guest's DNS datagrams per second
  uint32_t dns_burst = ZN_DEFAULT_DNS_BURST;
  // TCP ports zerod may open to the guest (host order, at most
  // ZN_MAX_EXPOSED_PORTS): none unless the operator declares them.
  std::vector<uint16_t> exposed_ports;
};

// One allow rule: TCP to a prefix on one port (or any). The datapath holds
// a session's rules folded by prefix (l4_entries.h).
struct L4Rule {
  uint8_t family = 4;  // 4 or 6
  std::array<uint8_t, 16> addr{};
  uint8_t prefix_len = 32;
  uint16_t port = 0;  // host order, 0 = any port
  uint32_t rule_id = 0;
};

// Packets per verdict (enum zn_verdict) plus the extra stats, summed over CPUs.
using SessionCounters = std::array<uint64_t, ZN_STATS_PER_SESSION>;

zn_session to_abi(const SessionEntry& entry);  // throws std::invalid_argument
zn_l4_key to_abi_key(uint32_t session_idx, const L4Rule& rule);

class DatapathMaps {
 public:
  struct Fds {
    int sessions, listeners, l4_allow, l4_count, counters, event_buckets, dns_buckets;
  };
  explicit DatapathMaps(Fds fds) : fds_(fds) {}

  void set_listeners(const Listeners& listeners);
  // Replaces the session on ifindex atomically (one map update).
  void put_session(int ifindex, const SessionEntry& entry);
  std::optional<zn_session> get_session(int ifindex) const;
  // Removes the session entry, its L4 rules, counters and event bucket.
  void delete_session(int ifindex);

  // The session's L4 rules become `to` (they were `from`): the folded
  // entries (fold_l4_rules) that change are written longest prefix first,
  // then the stale ones deleted shortest prefix first, so a destination and
  // port allowed by both sets never stops matching and nothing allowed by
  // neither ever matches. Keeps zn_l4_count in step with the trie: the
  // datapath skips the trie for sessions whose count is zero. Single writer
  // (the daemon) assumed. Throws std::invalid_argument (nothing written) for
  // a set the maps cannot hold.
  void replace_l4_rules(uint32_t session_idx, const std::vector<L4Rule>& from, const std::vector<L4Rule>& to);
  // One rule more or less, next to the session's others as the trie holds
  // them (reads the session's entries back: for tests and tools; the daemon
  // uses replace_l4_rules).
  void put_l4_rule(uint32_t session_idx, const L4Rule& rule);
  void delete_l4_rule(uint32_t session_idx, const L4Rule& rule);
  std::vector<L4Rule> l4_rules(uint32_t session_idx) const;
  size_t delete_l4_rules(uint32_t session_idx);
  // Entries (distinct prefixes) the session has in zn_l4_allow.
  uint32_t l4_rule_count(uint32_t session_idx) const;
  // What lets the program skip the trie (zn_abi.h).
  zn_l4_summary l4_summary(uint32_t session_idx) const;

  SessionCounters counters(uint32_t session_idx) const;
  void clear_counters(uint32_t session_idx);

 private:
  void set_l4_summary(uint32_t session_idx, const zn_l4_summary& summary);
  Fds fds_;
};

}  // namespace zn::dp
