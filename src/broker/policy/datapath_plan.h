// What a session's compiled policy asks of the BPF datapath (steered ports,
// L4 allow prefixes), and applying a change of it without a gap.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "broker/policy/compiled.h"
#include "userspace/datapath/maps.h"

namespace zn::broker {

struct ResolvedAddress {
  uint8_t family = 4;  // 4 or 6
  std::array<uint8_t, 16> addr{};
};

// Resolves an L4 rule's DNS name (the broker's resolver, or the config's
// static overrides). An empty answer leaves the rule without prefixes.
using NameResolver = std::function<std::vector<ResolvedAddress>(const std::string& name)>;

struct DatapathPlan {
  std::vector<uint16_t> steered_ports;
  std::vector<dp::L4Rule> l4_rules;  // rule_id = index of the allow rule
};

// Throws std::invalid_argument when a prefix would need more than
// ZN_L4_MAX_PORTS distinct ports (dp::fold_l4_rules).
DatapathPlan plan_datapath(const CompiledPolicy& policy, const NameResolver& resolve);

// Moves the session's L4 entries from `from` to `to`
// (DatapathMaps::replace_l4_rules: folded by prefix, changed entries longest
// prefix first, then the stale ones), so a destination allowed by both never
// stops matching. Throws std::invalid_argument, writing nothing, when a
// prefix would need more than ZN_L4_MAX_PORTS distinct ports.
void apply_l4_change(dp::DatapathMaps& maps, uint32_t session_idx, const DatapathPlan& from,
                     const DatapathPlan& to);

}  // namespace zn::broker
