// The narrow interface the governed DNS responder asks its questions through.
// The broker implements it from the session registry and compiled policy.
// All calls come from the responder's event-loop thread, one at a time.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "userspace/net/address.h"

namespace zn::dns {

// Why an allowed query got no address.
enum class NoAnswer {
  NxDomain,  // the name does not exist (upstream's answer, or a name no resolver is asked)
  NoData,    // it exists, without an address of that type (or a type zerod does not forward)
  Error,     // the resolver failed (SERVFAIL, timeout, overload)
};

struct DnsDecision {
  bool allow = false;
  std::string reason;  // for the audit event, e.g. "default deny", "deny list"
  // Allowed, and answered with these (A or AAAA by family) instead of asking
  // the resolver: a name the host itself serves.
  std::vector<net::IpAddress> local_answers;
};

// The session a query belongs to, as the policy found it when the query came.
// `owner` is the policy's own object for that session (opaque here): the
// query holds it until it is answered, so what the answer teaches goes to
// that very session, even one deleted meanwhile, never to a session created
// later under the same id.
struct DnsSession {
  std::string id;
  std::shared_ptr<const void> owner;
};

// Executor: every method is called on the DNS responder's I/O loop thread
// (QueryHandler; resolver completions are posted back to it), while the
// broker's other threads share the implementation's state. They should not
// block; today on_denied and on_answer commit an audit record (fsync) on the
// loop, a known departure that issue 11's audit pipeline removes
// (docs/HACKING.md).
class DnsPolicy {
 public:
  virtual ~DnsPolicy() = default;

  // The session a guest source address (address and port, as received)
  // belongs to; nullopt for strangers, which are answered REFUSED.
  virtual std::optional<DnsSession> session_of(const sockaddr_storage& guest_source) const = 0;

  // qname: lowercase, no trailing dot, in ldns presentation form (unusual
  // bytes escaped as \DDD or \.). The root name is "".
  virtual DnsDecision decide(const DnsSession& session, const std::string& qname) const = 0;

  // An answer with at least one address given to the guest; ttl is the
  // capped TTL the guest saw. For the proxy's SNI pinning.
  virtual void on_answer(const DnsSession& session, const std::string& qname,
                         const std::vector<net::IpAddress>& addresses, uint32_t ttl) = 0;

  // An allowed query answered without an address. `forwarded`: the name was
  // asked upstream (its labels left the host). Called once per such query,
  // before the reply is sent.
  virtual void on_unanswered(const DnsSession& session, const std::string& qname, NoAnswer why,
                             bool forwarded) = 0;

  // A denied name (becomes a dns:deny audit event). Never forwarded upstream.
  virtual void on_denied(const DnsSession& session, const std::string& qname, const std::string& reason) = 0;
};

}  // namespace zn::dns
