#include "broker/policy/datapath_plan.h"

#include <arpa/inet.h>

#include <set>
#include <stdexcept>
#include <tuple>

#include "userspace/datapath/l4_entries.h"

namespace zn::broker {
namespace {

// "198.18.0.0/24", "2001:db8::1" -> family, address, prefix length.
dp::L4Rule rule_for_address(const std::string& text) {
  const size_t slash = text.find('/');
  const std::string addr = text.substr(0, slash);
  dp::L4Rule r;
  if (inet_pton(AF_INET, addr.c_str(), r.addr.data()) == 1) {
    r.family = 4;
    r.prefix_len = 32;
  } else if (inet_pton(AF_INET6, addr.c_str(), r.addr.data()) == 1) {
    r.family = 6;
    r.prefix_len = 128;
  } else {
    throw std::invalid_argument("not an address: " + text);  // the parser guarantees one
  }
  if (slash != std::string::npos) r.prefix_len = static_cast<uint8_t>(std::stoi(text.substr(slash + 1)));
  return r;
}

// One datapath entry per (family, prefix, port); which rule asked is not part of it.
using EntryKey = std::tuple<uint8_t, std::array<uint8_t, 16>, uint8_t, uint16_t>;
EntryKey key_of(const dp::L4Rule& r) { return {r.family, r.addr, r.prefix_len, r.port}; }

}  // namespace

DatapathPlan plan_datapath(const CompiledPolicy& policy, const NameResolver& resolve) {
  DatapathPlan plan;
  std::set<EntryKey> seen;
  plan.steered_ports = policy.steered_ports();
  for (const L4Target& target : policy.l4_targets()) {
    const HostPattern& host = target.rule->host;
    std::vector<dp::L4Rule> rules;
    if (host.kind == HostPattern::Kind::kAddress) {
      rules.push_back(rule_for_address(host.name));
    } else {
      for (const ResolvedAddress& a : resolve(host.name)) {
        dp::L4Rule r;
        r.family = a.family;
        r.addr = a.addr;
        r.prefix_len = a.family == 4 ? 32 : 128;
        rules.push_back(r);
      }
    }
    for (dp::L4Rule& r : rules) {
      r.port = target.port;
      r.rule_id = static_cast<uint32_t>(target.rule->index);
      if (seen.insert(key_of(r)).second) plan.l4_rules.push_back(r);
    }
  }
  // What the maps cannot hold (too many ports for one prefix) is refused
  // here, before the session has a device or map entries.
  dp::fold_l4_rules(plan.l4_rules);
  return plan;
}

void apply_l4_change(dp::DatapathMaps& maps, uint32_t session_idx, const DatapathPlan& from,
                     const DatapathPlan& to) {
  maps.replace_l4_rules(session_idx, from.l4_rules, to.l4_rules);
}

}  // namespace zn::broker
