// The broker's side of governed DNS: which session asks, whether its policy
// lets it reach the name, what was answered (for the proxy's SNI pinning),
// and the dns:allow / dns:deny audit events. Also the configured resolver:
// static overrides first, then the upstream servers, else NXDOMAIN.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "broker/audit/log.h"
#include "broker/session/directory.h"
#include "broker/session/upstream_cache.h"
#include "userspace/dns/policy.h"
#include "userspace/dns/resolver.h"

namespace zn::broker {

struct RecordedAnswer {
  std::vector<net::IpAddress> addresses;
  std::chrono::steady_clock::time_point expires;
};

class SessionDnsPolicy : public dns::DnsPolicy {
 public:
  // `capability_addresses`: what kCapabilityHost resolves to for every
  // session (zerod's config); empty: the name is decided like any other.
  SessionDnsPolicy(const SessionDirectory& sessions, AuditLog& audit,
                   std::vector<net::IpAddress> capability_addresses = {})
      : sessions_(sessions), audit_(audit), capability_addresses_(std::move(capability_addresses)) {}

  std::optional<std::string> session_of(const sockaddr_storage& guest_source) const override;
  dns::DnsDecision decide(const std::string& session_id, const std::string& qname) const override;
  void on_answer(const std::string& session_id, const std::string& qname,
                 const std::vector<net::IpAddress>& addresses, uint32_t ttl) override;
  void on_denied(const std::string& session_id, const std::string& qname, const std::string& reason) override;

  // Unexpired answers given to a session for a name.
  std::vector<net::IpAddress> answers(const std::string& session_id, const std::string& qname) const;
  void forget(const std::string& session_id);

 private:
  const SessionDirectory& sessions_;
  AuditLog& audit_;
  const std::vector<net::IpAddress> capability_addresses_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, RecordedAnswer>> answers_;
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
