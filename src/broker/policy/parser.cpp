#include "broker/policy/parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <set>
#include <vector>

namespace zn::broker {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 7> kMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                      "PATCH", "DELETE", "OPTIONS"};

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw PolicyError(path, message);
}

std::string at(const std::string& path, const std::string& key) { return path + "." + key; }
std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// Unknown fields are refused so a typo ("method" for "methods") never
// silently widens or narrows a rule.
void only_fields(const json& obj, const std::string& path, std::initializer_list<const char*> known) {
  if (!obj.is_object()) fail(path, "must be an object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) == known.end())
      fail(at(path, key), "unknown field");
  }
}

const std::string& as_string(const json& v, const std::string& path) {
  if (!v.is_string()) fail(path, "must be a string");
  return v.get_ref<const std::string&>();
}

const json::array_t& as_array(const json& v, const std::string& path, size_t max) {
  if (!v.is_array()) fail(path, "must be an array");
  if (v.size() > max) fail(path, "more than " + std::to_string(max) + " entries");
  return v.get_ref<const json::array_t&>();
}

uint64_t as_uint(const json& v, const std::string& path, uint64_t min, uint64_t max) {
  if (!v.is_number_integer()) fail(path, "must be an integer");
  const bool negative = !v.is_number_unsigned() && v.get<int64_t>() < 0;
  const uint64_t n = negative ? 0 : v.get<uint64_t>();
  if (negative || n < min || n > max)
    fail(path, "must be between " + std::to_string(min) + " and " + std::to_string(max));
  return n;
}

HostPattern parse_host(const json& v, const std::string& path) {
  std::string why;
  auto host = parse_host_pattern(as_string(v, path), &why);
  if (!host) fail(path, why);
  return *host;
}

bool valid_resource_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '_' || c == '-';
  });
}

AllowRule parse_allow(const json& r, const std::string& path, size_t index, const PolicyLimits& limits) {
  only_fields(r, path, {"host", "methods", "paths", "identity", "action", "port", "proto"});
  AllowRule rule;
  rule.index = index;
  if (!r.contains("host")) fail(at(path, "host"), "required");
  rule.host = parse_host(r["host"], at(path, "host"));
  if (r.contains("methods")) {
    const std::string mpath = at(path, "methods");
    const auto& methods = as_array(r["methods"], mpath, limits.max_methods);
    if (methods.empty()) fail(mpath, "must not be empty (omit it to allow any method)");
    for (size_t i = 0; i < methods.size(); ++i) {
      std::string m = as_string(methods[i], at(mpath, i));
      if (std::find(kMethods.begin(), kMethods.end(), m) == kMethods.end())
        fail(at(mpath, i), "unknown or unsupported method '" + m + "'");
      if (std::find(rule.methods.begin(), rule.methods.end(), m) != rule.methods.end())
        fail(at(mpath, i), "duplicate method");
      rule.methods.push_back(std::move(m));
    }
  }
  if (r.contains("paths")) {
    const std::string ppath = at(path, "paths");
    const auto& paths = as_array(r["paths"], ppath, limits.max_paths_per_rule);
    if (paths.empty()) fail(ppath, "must not be empty (omit it to allow any path)");
    for (size_t i = 0; i < paths.size(); ++i) {
      std::string why;
      auto p = PathPattern::parse(as_string(paths[i], at(ppath, i)), &why);
      if (!p) fail(at(ppath, i), why);
      rule.paths.push_back(std::move(*p));
    }
  }
  if (r.contains("identity")) {
    const std::string& id = as_string(r["identity"], at(path, "identity"));
    if (id.rfind("cap:", 0) != 0 || !valid_resource_name(id.substr(4)))
      fail(at(path, "identity"), "must be \"cap:<resource>\"");
    rule.identity = id.substr(4);
  }
  if (r.contains("action")) {
    const std::string& a = as_string(r["action"], at(path, "action"));
    if (a == "allow")
      rule.action = RuleAction::kAllow;
    else if (a == "ask")
      rule.action = RuleAction::kAsk;
    else
      fail(at(path, "action"), "must be \"allow\" or \"ask\"");
  }
  if (r.contains("proto")) {
    if (as_string(r["proto"], at(path, "proto")) != "tcp")
      fail(at(path, "proto"), "only \"tcp\" is supported");
    if (!r.contains("port")) fail(at(path, "port"), "required with proto");
  }
  if (r.contains("port")) {
    rule.port = static_cast<uint16_t>(as_uint(r["port"], at(path, "port"), 1, 65535));
    if (rule.needs_interception())
      fail(path, "an L4 rule (port/proto) cannot have methods, paths, identity or ask");
    if (rule.host.kind == HostPattern::Kind::kWildcard)
      fail(at(path, "host"), "an L4 rule needs a name or an address, not a wildcard");
  } else if (rule.host.kind == HostPattern::Kind::kAddress && rule.host.name.find('/') != std::string::npos) {
    fail(at(path, "host"), "a CIDR is only allowed in an L4 rule (with port)");
  }
  return rule;
}

Policy parse_document(const json& doc, const PolicyLimits& limits) {
  const std::string root = "$";
  only_fields(doc, root, {"policy", "resources"});
  if (!doc.contains("policy")) fail(at(root, "policy"), "required");
  const json& p = doc["policy"];
  const std::string ppath = at(root, "policy");
  only_fields(p, ppath, {"default", "allow", "deny", "rate"});

  Policy policy;
  if (p.contains("default") && as_string(p["default"], at(ppath, "default")) != "deny")
    fail(at(ppath, "default"), "only \"deny\" is supported");
  if (doc.contains("resources")) {
    const std::string rpath = at(root, "resources");
    const json& res = doc["resources"];
    if (!res.is_object()) fail(rpath, "must be an object");
    if (res.size() > limits.max_resources) fail(rpath, "too many resources");
    for (const auto& [name, fields] : res.items()) {
      const std::string npath = at(rpath, name);
      if (!valid_resource_name(name)) fail(npath, "resource names are [a-z0-9_-], 1-64 characters");
      if (!fields.is_object()) fail(npath, "must be an object of strings");
      if (fields.size() > limits.max_resource_fields) fail(npath, "too many fields");
      Resource resource;
      for (const auto& [field, value] : fields.items()) {
        // Never echo a secret in an error: name the field only.
        if (!value.is_string()) fail(at(npath, field), "must be a string");
        if (value.get_ref<const std::string&>().size() > limits.max_secret_bytes)
          fail(at(npath, field), "too long");
        resource.fields[field] = value.get<std::string>();
      }
      policy.resources[name] = std::move(resource);
    }
  }
  if (p.contains("allow")) {
    const std::string apath = at(ppath, "allow");
    const auto& rules = as_array(p["allow"], apath, limits.max_allow_rules);
    policy.allow.reserve(rules.size());
    for (size_t i = 0; i < rules.size(); ++i) {
      AllowRule rule = parse_allow(rules[i], at(apath, i), i, limits);
      if (rule.identity) {
        auto it = policy.resources.find(*rule.identity);
        if (it == policy.resources.end())
          fail(at(at(apath, i), "identity"), "no resource '" + *rule.identity + "'");
        if (!it->second.fields.count("accessToken"))
          fail(at(at(apath, i), "identity"), "resource '" + *rule.identity + "' has no accessToken");
      }
      policy.allow.push_back(std::move(rule));
    }
  }
  if (p.contains("deny")) {
    const std::string dpath = at(ppath, "deny");
    const auto& rules = as_array(p["deny"], dpath, limits.max_deny_rules);
    for (size_t i = 0; i < rules.size(); ++i) {
      only_fields(rules[i], at(dpath, i), {"host"});
      if (!rules[i].contains("host")) fail(at(at(dpath, i), "host"), "required");
      policy.deny.push_back({i, parse_host(rules[i]["host"], at(at(dpath, i), "host"))});
    }
  }
  if (p.contains("rate")) {
    const std::string rpath = at(ppath, "rate");
    only_fields(p["rate"], rpath, {"burst", "per_second"});
    if (!p["rate"].contains("burst")) fail(at(rpath, "burst"), "required");
    if (!p["rate"].contains("per_second")) fail(at(rpath, "per_second"), "required");
    policy.rate = RateLimit{
        static_cast<uint32_t>(as_uint(p["rate"]["burst"], at(rpath, "burst"), 1, limits.max_rate)),
        static_cast<uint32_t>(as_uint(p["rate"]["per_second"], at(rpath, "per_second"), 1, limits.max_rate))};
  }
  return policy;
}

}  // namespace

Policy parse_policy(std::string_view text, const PolicyLimits& limits) {
  if (text.size() > limits.max_document_bytes) fail("$", "document larger than the limit");
  // Duplicate keys are ambiguous (which "host" wins?): refuse them.
  // Objects here have a handful of keys: a flat stack of (depth, key) beats a
  // set per object by a wide margin on large policies.
  std::vector<std::pair<int, std::string>> keys;
  std::string duplicate;
  json::parser_callback_t reject_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_end) {
      while (!keys.empty() && keys.back().first > depth) keys.pop_back();
    } else if (event == json::parse_event_t::key && duplicate.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      for (auto it = keys.rbegin(); it != keys.rend() && it->first == depth; ++it)
        if (it->second == key) duplicate = key;
      keys.emplace_back(depth, key);
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), reject_duplicates);
  } catch (const json::parse_error& e) {
    fail("$", "invalid JSON at byte " + std::to_string(e.byte));
  } catch (const json::exception& e) {
    // e.g. a number too large for any type (found by the policy fuzzer)
    fail("$", "invalid JSON: " + std::string(e.what()));
  }
  if (!duplicate.empty()) fail("$", "duplicate key '" + duplicate + "'");
  try {
    return parse_document(doc, limits);
  } catch (const json::exception& e) {
    fail("$", std::string("invalid document: ") + e.what());  // every field is type-checked first
  }
}

}  // namespace zn::broker
