#include "userspace/datapath/l4_entries.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace zn::dp {
namespace {

using PrefixKey = std::tuple<uint8_t, uint8_t, std::array<uint8_t, 16>>;  // family, length, address

std::array<uint8_t, 16> mask_to(const std::array<uint8_t, 16>& addr, unsigned prefix_len) {
  std::array<uint8_t, 16> out{};
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned bits = prefix_len > i * 8 ? prefix_len - i * 8 : 0;
    const uint8_t mask = bits >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - bits));
    out[i] = addr[i] & mask;
  }
  return out;
}

std::string prefix_text(const L4Entry& e) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(e.family == 6 ? AF_INET6 : AF_INET, e.addr.data(), buf, sizeof(buf));
  return std::string(buf) + "/" + std::to_string(e.prefix_len);
}

}  // namespace

std::vector<L4Entry> fold_l4_rules(const std::vector<L4Rule>& rules) {
  std::map<PrefixKey, L4Entry> by_prefix;
  std::map<uint8_t, std::set<uint8_t>> lengths;  // family -> prefix lengths present
  for (const L4Rule& r : rules) {
    // Validates the family and prefix length (the session index is not
    // part of an entry) and clears the host bits.
    const zn_l4_key key = to_abi_key(1, r);
    std::array<uint8_t, 16> addr{};
    std::memcpy(addr.data(), key.addr, addr.size());
    auto [it, fresh] = by_prefix.try_emplace(PrefixKey{r.family, r.prefix_len, addr});
    L4Entry& e = it->second;
    if (fresh) {
      e.family = r.family;
      e.addr = addr;
      e.prefix_len = r.prefix_len;
      e.rule_id = r.rule_id;
      lengths[r.family].insert(r.prefix_len);
    }
    if (r.port == 0)
      e.own_any = true;
    else if (!std::binary_search(e.own_ports.begin(), e.own_ports.end(), r.port))
      e.own_ports.insert(std::upper_bound(e.own_ports.begin(), e.own_ports.end(), r.port), r.port);
  }

  std::vector<L4Entry> out;
  out.reserve(by_prefix.size());
  for (const auto& [pk, own] : by_prefix) {
    L4Entry e = own;
    e.any_port = e.own_any;
    std::set<uint16_t> inherited;
    // Every covering prefix present, found by masking this one's address to
    // each shorter length in use (few distinct lengths, so no tree needed).
    for (uint8_t len : lengths[e.family]) {
      if (len >= e.prefix_len) break;
      auto cover = by_prefix.find(PrefixKey{e.family, len, mask_to(e.addr, len)});
      if (cover == by_prefix.end()) continue;
      e.any_port = e.any_port || cover->second.own_any;
      inherited.insert(cover->second.own_ports.begin(), cover->second.own_ports.end());
    }
    if (!e.any_port)
      for (uint16_t p : inherited)
        if (!std::binary_search(e.own_ports.begin(), e.own_ports.end(), p)) e.inherited.push_back(p);
    if (e.own_ports.size() + e.inherited.size() > ZN_L4_MAX_PORTS)
      throw std::invalid_argument("L4 rules allow more than " + std::to_string(ZN_L4_MAX_PORTS) +
                                  " distinct ports to " + prefix_text(e) +
                                  " (the datapath's limit; an any-port rule has none)");
    out.push_back(std::move(e));
  }
  // Longest prefix first: the order replace_l4_rules writes them in.
  std::stable_sort(out.begin(), out.end(),
                   [](const L4Entry& a, const L4Entry& b) { return a.prefix_len > b.prefix_len; });
  return out;
}

zn_l4_key to_abi_key(uint32_t session_idx, const L4Entry& entry) {
  L4Rule r;
  r.family = entry.family;
  r.addr = entry.addr;
  r.prefix_len = entry.prefix_len;
  return to_abi_key(session_idx, r);
}

zn_l4_value to_abi_value(const L4Entry& entry) {
  zn_l4_value v{};
  const size_t total = entry.own_ports.size() + (entry.any_port ? 0 : entry.inherited.size());
  if (total > ZN_L4_MAX_PORTS) throw std::invalid_argument("L4 entry with too many ports");
  v.rule_id = entry.rule_id;
  v.any_port = entry.any_port ? 1 : 0;
  v.own_any = entry.own_any ? 1 : 0;
  v.own_nports = static_cast<uint8_t>(entry.own_ports.size());
  v.nports = static_cast<uint8_t>(total);
  size_t i = 0;
  for (uint16_t p : entry.own_ports) v.ports[i++] = htons(p);
  if (!entry.any_port)
    for (uint16_t p : entry.inherited) v.ports[i++] = htons(p);
  return v;
}

zn_l4_summary summarize_l4_rules(const std::vector<L4Rule>& rules) {
  zn_l4_summary out{};
  for (const L4Rule& r : rules) {
    if (r.port == 0)
      out.any_port = 1;
    else
      out.port_bits |= uint64_t{1} << (r.port % 64);
  }
  return out;
}

std::vector<L4Rule> own_rules(const zn_l4_key& key, const zn_l4_value& value) {
  L4Rule base;
  base.family = key.family;
  std::memcpy(base.addr.data(), key.addr, base.addr.size());
  base.prefix_len = static_cast<uint8_t>(key.prefixlen - ZN_L4_KEY_FIXED_BITS);
  base.rule_id = value.rule_id;
  std::vector<L4Rule> out;
  if (value.own_any) out.push_back(base);  // port 0
  for (unsigned i = 0; i < value.own_nports && i < ZN_L4_MAX_PORTS; ++i) {
    L4Rule r = base;
    r.port = ntohs(value.ports[i]);
    out.push_back(r);
  }
  return out;
}

}  // namespace zn::dp
