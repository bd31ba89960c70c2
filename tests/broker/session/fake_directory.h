// The broker's answers to DNS and the proxy without root: a SessionDirectory
// of sessions built as the registry builds them (parsed and compiled policy,
// datapath plan, the lab's address plan by slot) but with no TAP or map, and
// the real parts that need no root around it: the audit over SQLite in a
// temp dir, the configured resolver with static names only, the lab's
// destination guard (no local table).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/audit/log.h"
#include "broker/policy/parser.h"
#include "broker/session/approval_book.h"
#include "broker/session/directory.h"
#include "broker/session/dns.h"
#include "broker/session/placeholders.h"
#include "broker/session/proxy.h"
#include "support/temp_dir.h"
#include "userspace/net/transparent_socket.h"

namespace zn::broker::test {

// The lab's stand-in internet (tests/integration/zerod_fixture.h), plus
// names for the pinning cases.
inline const std::map<std::string, std::vector<std::string>> kStaticNames = {
    {"api.github.com", {"198.18.0.10"}},
    {"api.stripe.com", {"198.18.0.11"}},
    {"registry.npmjs.org", {"198.18.0.12", "2001:db8:18::12"}},
    {"other.npmjs.org", {"198.18.0.12"}},
    {"db.internal", {"198.18.0.13"}},
    {"meta.npmjs.org", {"169.254.169.254"}},
    {"good.example.com", {"198.18.0.20"}},
    {"bad.example.com", {"198.18.0.21"}},
};

class FakeDirectory : public SessionDirectory {
 public:
  explicit FakeDirectory(ConfiguredResolver& resolver) : resolver_(resolver) {}

  // A session in `slot` of the lab's address plan (guest 198.19.<slot>.2 and
  // 2001:db8:19:<slot>::2); replaces one of the same id (a policy update).
  // L4 rule names resolve through the configured resolver, as in zerod.
  void put(const std::string& id, const std::string& policy_json, unsigned slot = 0) {
    Session s;
    s.record.id = id;
    s.state = std::make_shared<SessionState>(limits);
    s.record.slot = slot;
    s.record.policy_json = policy_json;
    s.net = vmm::guest_network(vmm::AddressPlan::lab_default(), slot);
    s.policy = CompiledPolicy::compile(parse_policy(policy_json));
    {
      std::lock_guard lock(mu_);
      auto previous = sessions_.find(id);
      s.record.placeholders = assign_placeholders(
          s.policy->policy(), previous == sessions_.end() ? std::map<std::string, std::string>{}
                                                          : previous->second->record.placeholders);
      // As SessionRegistry::update: each put of an id is the next version,
      // sharing the session's one state.
      if (previous != sessions_.end()) {
        s.record.policy_version = previous->second->record.policy_version + 1;
        s.state = previous->second->state;
      }
    }
    s.plan = plan_datapath(*s.policy, [this](const std::string& name) {
      std::vector<ResolvedAddress> out;
      for (const net::IpAddress& a : resolver_.resolve_now(name)) {
        ResolvedAddress r;
        r.family = a.family == AF_INET6 ? 6 : 4;
        std::memcpy(r.addr.data(), a.bytes.data(), a.size());
        out.push_back(r);
      }
      return out;
    });
    std::lock_guard lock(mu_);
    sessions_[id] = std::make_shared<const Session>(std::move(s));
  }

  // As SessionRegistry::remove: the data path no longer finds it.
  void remove(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }
  SessionLimits limits;  // of the sessions put from now on

  SessionPtr get(const std::string& id) const override {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second;
  }
  SessionPtr find_by_guest_ip4(in_addr addr) const override {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_)
      if (s->net.guest_ip4.s_addr == addr.s_addr) return s;
    return nullptr;
  }
  SessionPtr find_by_guest_ip6(const in6_addr& addr) const override {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sessions_)
      if (std::memcmp(&s->net.guest_ip6, &addr, sizeof(addr)) == 0) return s;
    return nullptr;
  }

 private:
  ConfiguredResolver& resolver_;
  mutable std::mutex mu_;
  std::map<std::string, SessionPtr> sessions_;
};

// zerod's guard in the lab (tests/integration/zerod_fixture.h): guests in
// 198.19/16 and 2001:db8:19::/48, the stand-in internet allowed.
inline std::shared_ptr<const proxy::DestinationGuard> lab_guard() {
  proxy::GuardConfig c;
  c.guest_pools = {*net::AddressPrefix::parse("198.19.0.0/16"),
                   *net::AddressPrefix::parse("2001:db8:19::/48")};
  c.allow = {*net::AddressPrefix::parse("198.18.0.0/16"), *net::AddressPrefix::parse("2001:db8:18::/48")};
  return std::make_shared<proxy::DestinationGuard>(c);
}

// The broker's side of one zerod, with a hand-moved clock for the rate.
struct Broker {
  // `before_commit` and `high_water`: the audit's (a stuck disk, a backlog).
  explicit Broker(std::chrono::milliseconds approval_ttl = std::chrono::hours(1),
                  std::function<void()> before_commit = {}, size_t high_water = 50000)
      : audit(audit_options(dir, std::move(before_commit), high_water)), approvals(approval_ttl) {}

  static AuditLogOptions audit_options(zn::test::TempDir& dir, std::function<void()> before_commit,
                                       size_t high_water) {
    AuditLogOptions o{dir.file("audit.db"), {}, [](const std::string&) {}};
    o.before_commit = std::move(before_commit);
    o.high_water = high_water;
    o.queue_limit = std::max<size_t>(high_water * 2, 100);
    return o;
  }

  zn::test::TempDir dir;
  AuditLog audit;
  ConfiguredResolver resolver{kStaticNames, {}};
  FakeDirectory sessions{resolver};
  SessionDnsPolicy dns{sessions, audit};
  ApprovalBook approvals;
  RateBucket::Clock::time_point now = RateBucket::Clock::now();
  SessionProxyPolicy proxy{sessions, dns, resolver, audit, approvals, lab_guard(), [this] { return now; }};

  // Every record posted so far, once committed.
  std::vector<AuditRecord> records() {
    audit.flush();
    return audit.query({});
  }
  // Names of the events recorded after the first `from`.
  std::vector<std::string> events_since(size_t from) {
    std::vector<std::string> out;
    const auto all = records();
    for (size_t i = from; i < all.size(); ++i) out.push_back(all[i].event);
    return out;
  }
  // What governed DNS told the session about `name`, as the responder would
  // have recorded it.
  void told(const std::string& sid, const std::string& name) {
    dns.on_answer({sid, nullptr}, name, resolver.resolve_now(name), 60);
  }
};

inline sockaddr_storage endpoint(const std::string& address, uint16_t port) {
  return net::make_endpoint(address, port);
}

}  // namespace zn::broker::test
