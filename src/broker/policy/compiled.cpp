#include "broker/policy/compiled.h"

#include <algorithm>

namespace zn::broker {
namespace {

// "a.b.example.com" -> "b.example.com", "example.com", "com".
template <typename Fn>
const auto* walk_suffixes(const std::string& name, Fn&& probe) {
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1))
    if (const auto* hit = probe(name.substr(dot + 1))) return hit;
  return decltype(probe(std::string()))(nullptr);
}

std::string describe(const HostPattern& h) {
  return h.kind == HostPattern::Kind::kWildcard ? "*." + h.name : h.name;
}

}  // namespace

std::shared_ptr<const CompiledPolicy> CompiledPolicy::compile(Policy policy) {
  std::shared_ptr<CompiledPolicy> c(new CompiledPolicy());
  c->policy_ = std::move(policy);
  // Sized up front: a large policy would otherwise rehash each table several times.
  size_t l4 = 0, exact = 0, wildcard = 0, addresses = 0, deny_wildcard = 0;
  for (const AllowRule& rule : c->policy_.allow) {
    l4 += rule.is_l4();
    switch (rule.host.kind) {
      case HostPattern::Kind::kExact:
        ++exact;
        break;
      case HostPattern::Kind::kWildcard:
        ++wildcard;
        break;
      case HostPattern::Kind::kAddress:
        ++addresses;
        break;
    }
  }
  for (const DenyRule& rule : c->policy_.deny)
    deny_wildcard += rule.host.kind == HostPattern::Kind::kWildcard;
  c->l4_targets_.reserve(l4);
  c->exact_.reserve(exact);
  c->wildcard_.reserve(wildcard);
  c->addresses_.reserve(addresses);
  c->deny_wildcard_.reserve(deny_wildcard);
  c->deny_exact_.reserve(c->policy_.deny.size() - deny_wildcard);
  for (const AllowRule& rule : c->policy_.allow) {
    if (rule.is_l4()) c->l4_targets_.push_back({&rule, *rule.port});
    Entry* entry = nullptr;
    switch (rule.host.kind) {
      case HostPattern::Kind::kExact:
        entry = &c->exact_[rule.host.name];
        break;
      case HostPattern::Kind::kWildcard:
        entry = &c->wildcard_[rule.host.name];
        break;
      case HostPattern::Kind::kAddress:
        // CIDRs are L4-only and reach the datapath as prefixes; a literal
        // may also be named by HTTP(S) rules (SNI-less / Host: 1.2.3.4).
        if (rule.host.name.find('/') == std::string::npos) entry = &c->addresses_[rule.host.name];
        break;
    }
    if (!entry) continue;
    entry->rules.push_back(&rule);
    entry->intercept = entry->intercept || rule.needs_interception();
  }
  for (const DenyRule& rule : c->policy_.deny) {
    auto& table = rule.host.kind == HostPattern::Kind::kWildcard ? c->deny_wildcard_ : c->deny_exact_;
    table.emplace(rule.host.name, &rule);
  }
  return c;
}

const CompiledPolicy::Entry* CompiledPolicy::find_allow(const std::string& name) const {
  if (auto it = exact_.find(name); it != exact_.end()) return &it->second;
  if (auto it = addresses_.find(name); it != addresses_.end()) return &it->second;
  return walk_suffixes(name, [&](const std::string& suffix) -> const Entry* {
    auto it = wildcard_.find(suffix);
    return it == wildcard_.end() ? nullptr : &it->second;
  });
}

const DenyRule* CompiledPolicy::find_deny(const std::string& name) const {
  if (auto it = deny_exact_.find(name); it != deny_exact_.end()) return it->second;
  return walk_suffixes(name, [&](const std::string& suffix) -> const DenyRule* {
    auto it = deny_wildcard_.find(suffix);
    return it == deny_wildcard_.end() ? nullptr : it->second;
  });
}

HostVerdict CompiledPolicy::match_host(std::string_view host) const {
  HostVerdict v;
  std::string name;
  if (is_ip_literal(host)) {
    name = std::string(host);
  } else {
    auto normalized = normalize_dns_name(host);
    if (!normalized) {
      v.reason = "invalid host name";
      return v;
    }
    name = std::move(*normalized);
  }
  if (const DenyRule* deny = find_deny(name)) {
    v.reason = "deny rule " + std::to_string(deny->index) + " (" + describe(deny->host) + ")";
    return v;
  }
  const Entry* entry = find_allow(name);
  if (!entry) {
    v.reason = "default deny";
    return v;
  }
  v.allowed = true;
  v.rules = entry->rules;
  v.intercept = entry->intercept;
  return v;
}

RequestVerdict CompiledPolicy::match_request(std::string_view host, std::string_view method,
                                             std::string_view path, bool websocket) const {
  RequestVerdict r;
  HostVerdict h = match_host(host);
  if (!h.allowed) {
    r.reason = h.reason;
    return r;
  }
  bool method_matched = false, path_matched = false;
  for (const AllowRule* rule : h.rules) {
    if (rule->is_l4()) continue;
    if (!rule->methods.empty() &&
        std::find(rule->methods.begin(), rule->methods.end(), method) == rule->methods.end())
      continue;
    method_matched = true;
    if (!rule->paths.empty() && std::none_of(rule->paths.begin(), rule->paths.end(),
                                             [&](const PathPattern& p) { return p.matches(path); }))
      continue;
    path_matched = true;
    if (websocket && !rule->websocket) continue;
    r.action = rule->action == RuleAction::kAsk ? RequestAction::kAsk : RequestAction::kAllow;
    r.rule = rule;
    return r;
  }
  r.reason = path_matched     ? "websocket not allowed"
             : method_matched ? "path not allowed"
                              : "method not allowed";
  return r;
}

}  // namespace zn::broker
