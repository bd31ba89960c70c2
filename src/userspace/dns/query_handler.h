// The governed-DNS decision for one query, independent of transport:
// parse (ldns) -> session -> policy -> resolver -> reply bytes.
//
//   unknown source session          REFUSED
//   denied name (any qtype)         NXDOMAIN (or REFUSED), on_denied; never resolved
//   allowed A / AAAA                resolved, TTL capped, on_answer
//   ... resolved without an address NXDOMAIN or NODATA as resolved, on_unanswered
//   allowed, any other qtype        NOERROR with no answers (NODATA), not forwarded, on_unanswered
//   allowed, name needs escapes     NXDOMAIN, not forwarded (no hostname has them), on_unanswered
//   resolver failure                SERVFAIL, on_unanswered
//   over the session's query rate,  REFUSED, not forwarded, counted (issue 32: one
//   or its queries at the resolver  guest cannot fill the resolver's shared
//   at their cap                    queue or its audit with a flood)
//   malformed                       dropped or FORMERR (see dns_message.h)
//   policy/resolver code throws     SERVFAIL, internal_errors counted
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "common/token_buckets.h"
#include "userspace/dns/counters.h"
#include "userspace/dns/message.h"
#include "userspace/dns/policy.h"
#include "userspace/dns/resolver.h"
#include "zn_abi.h"

namespace zn::dns {

enum class Transport { Udp, Tcp };

struct HandlerConfig {
  Rcode denied_rcode = Rcode::NxDomain;  // or Rcode::Refused
  uint32_t max_ttl = 300;                // seconds; answers never carry more
  // Per session: queries waiting for the resolver at once (its shared queue
  // holds 1,024), and queries per second (every query of a known session:
  // a denied name costs an audit record).
  size_t max_pending_per_session = 64;
  // The datapath drops a session's datagrams past the same rate (zn_abi.h).
  TokenBucketConfig session_rate{
      .per_second = ZN_DEFAULT_DNS_RATE, .burst = ZN_DEFAULT_DNS_BURST, .max_tracked = 16384};
};

class QueryHandler {
 public:
  // nullopt: send nothing.
  using Done = std::function<void(std::optional<Bytes>)>;
  // Runs a task on the handler's thread (the responder's event loop). Must
  // drop the task once the owner is shutting down.
  using Post = std::function<void(std::function<void()>)>;

  // policy and resolver must outlive the handler. Everything except the
  // resolver callback runs on the calling thread; resolver results come
  // back through post.
  QueryHandler(DnsPolicy& policy, Resolver& resolver, HandlerConfig config, Post post);
  ~QueryHandler();
  QueryHandler(const QueryHandler&) = delete;
  QueryHandler& operator=(const QueryHandler&) = delete;

  // done is called exactly once, on the handler's thread (possibly before
  // handle() returns) — or never if the owner shuts down first.
  void handle(std::span<const uint8_t> wire, const sockaddr_storage& source, Transport transport, Done done);

  DnsCounters& counters() { return counters_; }
  size_t pending() const { return pending_.size(); }
  // A session's queries waiting for the resolver now.
  size_t pending_of(const std::string& session) const {
    auto it = pending_per_session_.find(session);
    return it == pending_per_session_.end() ? 0 : it->second;
  }

 private:
  struct Pending {
    Query query;
    DnsSession session;
    size_t max_size;
    Done done;
  };
  void decide(Query q, const sockaddr_storage& source, size_t max_size, Done& done);
  void complete(uint64_t id, ResolveResult result);
  void release(const std::string& session);  // one of its queries left the resolver
  // forwarded: the answer is the resolver's (the name went upstream).
  void finish(Pending& p, ResolveResult result, bool forwarded);

  DnsPolicy& policy_;
  Resolver& resolver_;
  HandlerConfig config_;
  Post post_;
  DnsCounters counters_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Pending> pending_;
  // Sessions with a query at the resolver (no entry at zero).
  std::unordered_map<std::string, size_t> pending_per_session_;
  TokenBuckets rate_;
};

}  // namespace zn::dns
