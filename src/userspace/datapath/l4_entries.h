// Folding a session's L4 rules into zn_l4_allow entries: one entry per
// address prefix, carrying every port the session allows for the addresses
// it covers, so the datapath decides with one longest-prefix lookup.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "userspace/datapath/maps.h"
#include "zn_abi.h"

namespace zn::dp {

struct L4Entry {
  uint8_t family = 4;
  std::array<uint8_t, 16> addr{};  // host bits cleared
  uint8_t prefix_len = 32;
  uint32_t rule_id = 0;             // the first rule for exactly this prefix
  bool own_any = false;             // this prefix has an any-port rule
  std::vector<uint16_t> own_ports;  // host order, sorted: this prefix's rules
  bool any_port = false;            // own_any or a covering prefix's any-port rule
  std::vector<uint16_t> inherited;  // host order, sorted: covering prefixes' ports not in own_ports
  bool operator==(const L4Entry&) const = default;
};

// One entry per distinct (family, prefix) among the rules, each with the
// ports of every rule whose prefix contains it (its own and the covering
// ones'). Throws std::invalid_argument for a rule the maps cannot hold (see
// to_abi_key) or a prefix that would allow more than ZN_L4_MAX_PORTS distinct
// ports without an any-port rule. Entries are ordered longest prefix first.
std::vector<L4Entry> fold_l4_rules(const std::vector<L4Rule>& rules);

zn_l4_key to_abi_key(uint32_t session_idx, const L4Entry& entry);
zn_l4_value to_abi_value(const L4Entry& entry);
// The session-wide summary of the rules (entries left 0 for the caller): any
// any-port rule, and a bit per port slot (port % 64) some rule names.
zn_l4_summary summarize_l4_rules(const std::vector<L4Rule>& rules);

// The rules an entry was made from (its own ports; the rule id of each is the
// entry's), so a single rule can be added to or removed from a session.
std::vector<L4Rule> own_rules(const zn_l4_key& key, const zn_l4_value& value);

}  // namespace zn::dp
