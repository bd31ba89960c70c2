// The broker's side of the transparent proxy: which session a connection
// belongs to, whether it is spliced, intercepted or reset, each intercepted
// request's verdict (policy, Host == SNI, rate), where upstreams may be
// (pinned to governed-DNS answers), requests held for approval, and the
// identity for a request just allowed. Every verdict is audited here.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include "broker/identity/jwt_minter.h"
#include "broker/session/approval_book.h"
#include "broker/session/capability_service.h"
#include "broker/audit/log.h"
#include "broker/policy/rate_limiter.h"
#include "broker/session/dns.h"
#include "broker/session/directory.h"
#include "userspace/proxy/destination_guard.h"
#include "userspace/proxy/policy.h"

namespace zn::broker {

class SessionProxyPolicy : public proxy::ProxyPolicy {
 public:
  // The rate buckets' clock; unset: RateBucket::Clock::now (a test moves its own).
  using Clock = std::function<RateBucket::Clock::time_point()>;

  // `guard` judges every upstream address the broker picks (the proxy checks
  // it again at connect time).
  SessionProxyPolicy(const SessionDirectory& sessions, const SessionDnsPolicy& dns,
                     ConfiguredResolver& resolver, AuditLog& audit, ApprovalBook& approvals,
                     std::shared_ptr<const proxy::DestinationGuard> guard, Clock clock = {},
                     std::shared_ptr<const JwtMinter> minter = nullptr)
      : sessions_(sessions),
        dns_(dns),
        resolver_(resolver),
        audit_(audit),
        approvals_(approvals),
        guard_(std::move(guard)),
        clock_(std::move(clock)),
        minter_(std::move(minter)) {}

  // The guest's session id ("" for an address no session holds).
  std::string tenant_of(const sockaddr_storage& guest) const override;
  proxy::UpstreamDecision decide(const proxy::ConnectionFacts& facts) override;
  // decide() but for a connection spliced to a name (which needs the name's
  // addresses, maybe a resolution): nullopt before anything is charged.
  std::optional<proxy::UpstreamDecision> decide_at_once(const proxy::ConnectionFacts& facts) override;
  proxy::RequestDecision decide_request(const proxy::RequestFacts& facts) override;
  proxy::HoldState hold_state(const std::string& session, uint64_t ticket) override;
  proxy::HoldState cancel_hold(const std::string& session, uint64_t ticket) override;
  void watch_hold(uint64_t ticket, std::function<void()> wake) override {
    approvals_.watch(ticket, std::move(wake));
  }
  proxy::UpstreamAddresses resolve_upstream(const std::string& session, const std::string& host) override;
  std::optional<proxy::Injection> injection_for(const std::string& session,
                                                const proxy::RuleRef& rule) override;
  void on_request_done(const proxy::RequestSummary& summary) override;
  void on_tripwire(const proxy::TripwireHit& hit) override;
  void on_closed(const proxy::ConnectionSummary& summary) override;
  // The capability gateway's requests (kCapabilityHost): the Host, the
  // session's rate, then the capability service.
  void serve_local(proxy::LocalRequest request, std::function<void(proxy::LocalResponse)> done) override;
  // Set once before the proxy starts; unset: every capability request is 404.
  void set_capability_service(std::shared_ptr<CapabilityService> service) {
    capabilities_ = std::move(service);
  }
  // A deleted session's held requests are forgotten (its rate bucket and
  // remembered resolutions are its own state, gone with it).
  void forget_session(const std::string& session) {
    std::lock_guard lock(held_mu_);
    std::erase_if(held_under_, [&](const auto& e) { return e.second.session == session; });
  }
  // Upstream resolutions performed (cache misses). Any thread.
  uint64_t upstream_resolutions() const { return upstream_resolutions_.load(std::memory_order_relaxed); }

 private:
  // decide(); with may_resolve false, nullopt where the name's addresses are needed.
  std::optional<proxy::UpstreamDecision> decide_connection(const proxy::ConnectionFacts& facts,
                                                           bool may_resolve);
  proxy::UpstreamDecision reset(proxy::UpstreamDecision d, const std::string& reason,
                                const proxy::ConnectionFacts& facts);
  proxy::RequestDecision refuse(proxy::RequestDecision d, int status, const std::string& reason,
                                const proxy::RequestFacts& facts);
  bool take_rate(const Session& s);  // a token of the session's rate
  // What to inject for a request allowed under `ref`, from this snapshot;
  // nullopt when the identity is gone (the policy changed) or cannot be made.
  std::optional<proxy::Injection> injection_in(const Session& s, const proxy::RuleRef& ref) const;
  const SessionDirectory& sessions_;
  const SessionDnsPolicy& dns_;
  ConfiguredResolver& resolver_;
  AuditLog& audit_;
  ApprovalBook& approvals_;
  std::shared_ptr<const proxy::DestinationGuard> guard_;
  Clock clock_;
  std::shared_ptr<const JwtMinter> minter_;  // null: "jwt" identities are unavailable
  std::atomic<uint64_t> upstream_resolutions_{0};
  std::shared_ptr<CapabilityService> capabilities_;
  // The policy version each held request was decided under (issue 30): its
  // decision (rule, placeholders, injection) is that policy's, so a ticket
  // approved after `session update` is refused ("policy changed while
  // held"), and the guest's retry is decided under the policy as it is now.
  struct HeldUnder {
    std::string session;
    uint64_t policy_version = 0;
  };
  std::mutex held_mu_;
  std::map<uint64_t, HeldUnder> held_under_;  // by ticket, until its outcome is read
};

}  // namespace zn::broker
