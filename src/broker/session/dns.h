// The broker's side of governed DNS: which session asks, whether its policy
// lets it reach the name, what was answered (for the proxy's SNI pinning,
// kept in the session's own state: session_state.h, answer_book.h), and the dns:allow / dns:deny /
// dns:unanswered audit events (the last aggregated: dns_outcomes.h). Also the configured resolver:
// static overrides first, then the upstream servers, else NXDOMAIN.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/audit/dns_outcomes.h"
#include "broker/audit/log.h"
#include "broker/session/answer_book.h"
#include "broker/session/directory.h"
#include "broker/session/upstream_cache.h"
#include "userspace/dns/policy.h"
#include "userspace/dns/resolver.h"

namespace zn::broker {

struct SessionDnsOptions {
  // What kCapabilityHost resolves to for every session (zerod's config);
  // empty: the name is decided like any other.
  std::vector<net::IpAddress> capability_addresses;
  // dns:unanswered records with their own name, per session per second.
  uint32_t unanswered_names_per_second = DnsOutcomeAggregator::kDefaultNamesPerSecond;
  // When answers are told and looked up; unset: steady_clock (tests move their own).
  std::function<DnsAnswerBook::TimePoint()> clock;
};

class SessionDnsPolicy : public dns::DnsPolicy {
 public:
  SessionDnsPolicy(const SessionDirectory& sessions, AuditLog& audit, SessionDnsOptions options = {});

  // The session holding the address, its snapshot as the query's owner.
  std::optional<dns::DnsSession> session_of(const sockaddr_storage& guest_source) const override;
  // Without an owner (a caller that only knows the id), the session as it
  // is now.
  dns::DnsDecision decide(const dns::DnsSession& session, const std::string& qname) const override;
  // Told to the owner's own state: a session deleted meanwhile keeps it in
  // its dead state, which goes with it.
  void on_answer(const dns::DnsSession& session, const std::string& qname,
                 const std::vector<net::IpAddress>& addresses, uint32_t ttl) override;
  void on_unanswered(const dns::DnsSession& session, const std::string& qname, dns::NoAnswer why,
                     bool forwarded) override;
  void on_denied(const dns::DnsSession& session, const std::string& qname,
                 const std::string& reason) override;

  // Unexpired answers given to the session for a name (the name becomes the
  // session's most recently used).
  std::vector<net::IpAddress> answers(const Session& session, const std::string& qname) const;
  // Posts the dns:unanswered records gathered since the last call: once a
  // second, off the DNS loop (zerod's periodic thread), and at shutdown.
  void flush_unanswered() { unanswered_.flush(); }

  // Answers pushed out of a full session (metrics).
  uint64_t answers_evicted() const { return answers_evicted_.load(std::memory_order_relaxed); }

 private:
  const SessionDirectory& sessions_;
  AuditLog& audit_;
  // The session a query names: its owner, else the one of its id now.
  SessionPtr session_for(const dns::DnsSession& session) const;
  DnsAnswerBook::TimePoint now() const { return clock_ ? clock_() : std::chrono::steady_clock::now(); }

  const std::vector<net::IpAddress> capability_addresses_;
  const std::function<DnsAnswerBook::TimePoint()> clock_;
  std::atomic<uint64_t> answers_evicted_{0};
  DnsOutcomeAggregator unanswered_;
};

class ConfiguredResolver : public dns::Resolver {
 public:
  ConfiguredResolver(const std::map<std::string, std::vector<std::string>>& static_names,
                     const std::vector<std::string>& upstream);
  void resolve(const std::string& name, dns::QType qtype, Callback callback) override;
  // A and AAAA, waiting (bounded) for the answers: for the control path and
  // the proxy's pool, never for an event loop.
  std::vector<net::IpAddress> resolve_now(const std::string& name);
  // The same, with the smallest TTL of the answers (0 if either failed).
  TimedAddresses resolve_timed(const std::string& name);

 private:
  std::map<std::string, std::vector<net::IpAddress>> static_;
  std::unique_ptr<dns::Resolver> static_resolver_, upstream_;
};

}  // namespace zn::broker
