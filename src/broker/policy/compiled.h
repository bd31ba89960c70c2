// A policy compiled for lookups: the immutable snapshot the proxy and the DNS
// responder read. A policy update builds a new snapshot and swaps a pointer,
// so a decision in flight never sees half of two policies.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "broker/policy/policy.h"
#include "userspace/datapath/maps.h"

namespace zn::broker {

struct HostVerdict {
  bool allowed = false;
  std::string reason;  // why denied: "default deny", "deny rule 0 (evil.example)"
  // The allow rules of the most specific matching host entry, policy order.
  std::vector<const AllowRule*> rules;
  // Any of those rules has request conditions: TLS must be terminated.
  bool intercept = false;
};

enum class RequestAction { kAllow, kAsk, kDeny };

struct RequestVerdict {
  RequestAction action = RequestAction::kDeny;
  std::string reason;
  const AllowRule* rule = nullptr;
};

// An L4 rule's destination for the datapath: an address prefix, or a name
// the compiler's caller resolves.
struct L4Target {
  const AllowRule* rule;
  uint16_t port;
};

class CompiledPolicy {
 public:
  static std::shared_ptr<const CompiledPolicy> compile(Policy policy);
  // Rules are referenced by address: a copy would point into another snapshot.
  CompiledPolicy(const CompiledPolicy&) = delete;
  CompiledPolicy& operator=(const CompiledPolicy&) = delete;

  // host: any case, optional trailing dot; invalid names are denied.
  // Precedence: an explicit deny (exact or wildcard, at any level) beats
  // every allow; then the exact name; then the longest wildcard suffix.
  HostVerdict match_host(std::string_view host) const;

  // method: uppercase; path: normalised. Rules of the host are tried in
  // policy order; the first whose method and path match decides. A
  // WebSocket handshake (`websocket`) matches only rules that allow one.
  RequestVerdict match_request(std::string_view host, std::string_view method, std::string_view path,
                               bool websocket = false) const;

  const std::vector<L4Target>& l4_targets() const { return l4_targets_; }
  const std::vector<uint16_t>& steered_ports() const { return steered_ports_; }
  const Policy& policy() const { return policy_; }

 private:
  CompiledPolicy() = default;
  struct Entry {
    std::vector<const AllowRule*> rules;
    bool intercept = false;
  };
  const Entry* find_allow(const std::string& name) const;
  const DenyRule* find_deny(const std::string& name) const;

  Policy policy_;
  std::unordered_map<std::string, Entry> exact_, wildcard_;  // wildcard_ keyed by suffix
  std::unordered_map<std::string, Entry> addresses_;         // exact IP literals
  std::unordered_map<std::string, const DenyRule*> deny_exact_, deny_wildcard_;
  std::vector<L4Target> l4_targets_;
  std::vector<uint16_t> steered_ports_{dp::kDefaultSteeredPorts.begin(), dp::kDefaultSteeredPorts.end()};
};

}  // namespace zn::broker
