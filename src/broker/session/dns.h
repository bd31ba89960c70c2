// The broker's side of governed DNS: which session asks, whether its policy
// lets it reach the name, what was answered (for the proxy's SNI pinning,
// bounded per session: answer_book.h), and the dns:allow / dns:deny /
// dns:unanswered audit events (the last aggregated: dns_outcomes.h). Also the configured resolver:
// static overrides first, then the upstream servers, else NXDOMAIN.
#pragma once

#include <chrono>
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
  // Names whose answers a session keeps (DnsAnswerBook).
  size_t max_answers_per_session = DnsAnswerBook::kDefaultMaxNamesPerSession;
  // dns:unanswered records with their own name, per session per second.
  uint32_t unanswered_names_per_second = DnsOutcomeAggregator::kDefaultNamesPerSecond;
  DnsAnswerBook::Clock clock;  // tests
};

class SessionDnsPolicy : public dns::DnsPolicy {
 public:
  SessionDnsPolicy(const SessionDirectory& sessions, AuditLog& audit, SessionDnsOptions options = {});

  std::optional<std::string> session_of(const sockaddr_storage& guest_source) const override;
  dns::DnsDecision decide(const std::string& session_id, const std::string& qname) const override;
  void on_answer(const std::string& session_id, const std::string& qname,
                 const std::vector<net::IpAddress>& addresses, uint32_t ttl) override;
  void on_unanswered(const std::string& session_id, const std::string& qname, dns::NoAnswer why,
                     bool forwarded) override;
  void on_denied(const std::string& session_id, const std::string& qname, const std::string& reason) override;

  // Unexpired answers given to a session for a name (the name becomes the
  // session's most recently used).
  std::vector<net::IpAddress> answers(const std::string& session_id, const std::string& qname) const;
  void forget(const std::string& session_id);
  // Posts the dns:unanswered records gathered since the last call: once a
  // second, off the DNS loop (zerod's periodic thread), and at shutdown.
  void flush_unanswered() { unanswered_.flush(); }

  // Answers pushed out of a full session (metrics).
  uint64_t answers_evicted() const { return answers_.evictions(); }
  size_t answers_kept(const std::string& session_id) const { return answers_.size(session_id); }

 private:
  const SessionDirectory& sessions_;
  AuditLog& audit_;
  const std::vector<net::IpAddress> capability_addresses_;
  mutable DnsAnswerBook answers_;
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
