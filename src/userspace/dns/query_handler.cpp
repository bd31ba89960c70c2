#include "userspace/dns/query_handler.h"

#include "userspace/dns/ldns.h"

#include <algorithm>

namespace zn::dns {
namespace {
// Short: the addresses are zerod's config, which a restart may change.
constexpr uint32_t kLocalAnswerTtl = 60;
}  // namespace

QueryHandler::QueryHandler(DnsPolicy& policy, Resolver& resolver, HandlerConfig config, Post post)
    : policy_(policy),
      resolver_(resolver),
      config_(config),
      post_(std::move(post)),
      rate_(config.session_rate) {}

QueryHandler::~QueryHandler() = default;

void QueryHandler::handle(std::span<const uint8_t> wire, const sockaddr_storage& source, Transport transport,
                          Done done) {
  ++counters_.queries;
  auto parsed = parse_query(wire);
  if (auto* rej = std::get_if<Rejection>(&parsed)) {
    ++(is_malformed(rej->problem) ? counters_.malformed : counters_.unsupported);
    done(rej->reply.empty() ? std::nullopt : std::optional<Bytes>(std::move(rej->reply)));
    return;
  }
  Query& q = std::get<Query>(parsed);
  const size_t max_size = transport == Transport::Udp ? udp_reply_limit(q) : 65535;
  // Policy and resolver are other people's code: what they throw becomes
  // SERVFAIL, never an exception in the event loop.
  Bytes servfail = build_reply(q, Rcode::ServFail, {}, 0, max_size);
  try {
    decide(std::move(q), source, max_size, done);
  } catch (const std::exception&) {
    ++counters_.internal_errors;
    if (done) done(std::move(servfail));
  }
}

// Calls done (and clears it) unless the query went to the resolver.
void QueryHandler::decide(Query q, const sockaddr_storage& source, size_t max_size, Done& done) {
  auto reply_now = [&done](Bytes reply) {
    Done d = std::move(done);
    done = nullptr;
    d(std::move(reply));
  };
  auto session = policy_.session_of(source);
  if (!session) {
    ++counters_.refused;
    return reply_now(build_reply(q, Rcode::Refused, {}, 0, max_size));
  }
  // Before the policy: a refused query costs neither an audit record nor
  // a resolver slot.
  if (!rate_.take(session->id)) {
    ++counters_.rate_limited;
    return reply_now(build_reply(q, Rcode::Refused, {}, 0, max_size));
  }
  DnsDecision decision = policy_.decide(*session, q.qname);
  if (!decision.allow) {
    ++counters_.denied;
    policy_.on_denied(*session, q.qname, decision.reason);
    return reply_now(build_reply(q, config_.denied_rcode, {}, 0, max_size));
  }
  if (q.qname.find('\\') != std::string::npos) {
    ++counters_.allowed;  // no hostname needs escapes; do not hand it to a resolver
    policy_.on_unanswered(*session, q.qname, NoAnswer::NxDomain, false);
    return reply_now(build_reply(q, Rcode::NxDomain, {}, 0, max_size));
  }
  if (q.qtype != LDNS_RR_TYPE_A && q.qtype != LDNS_RR_TYPE_AAAA) {
    ++counters_.allowed;  // NODATA: other types are not forwarded
    policy_.on_unanswered(*session, q.qname, NoAnswer::NoData, false);
    return reply_now(build_reply(q, Rcode::NoError, {}, 0, max_size));
  }
  if (!decision.local_answers.empty()) {
    // A name the host serves: answered here, never resolved upstream.
    ResolveResult local{Rcode::NoError, std::move(decision.local_answers), kLocalAnswerTtl};
    Pending p{std::move(q), std::move(*session), max_size, std::move(done)};
    done = nullptr;
    Bytes servfail = build_reply(p.query, Rcode::ServFail, {}, 0, max_size);
    try {
      finish(p, std::move(local), /*forwarded=*/false);
    } catch (const std::exception&) {
      ++counters_.internal_errors;
      if (p.done) p.done(std::move(servfail));
    }
    return;
  }
  if (pending_of(session->id) >= config_.max_pending_per_session) {
    ++counters_.session_busy;
    return reply_now(build_reply(q, Rcode::Refused, {}, 0, max_size));
  }
  const QType qtype = q.qtype == LDNS_RR_TYPE_A ? QType::A : QType::AAAA;
  const std::string name = q.qname;
  const uint64_t id = next_id_++;
  ++pending_per_session_[session->id];
  pending_.emplace(id, Pending{std::move(q), std::move(*session), max_size, std::move(done)});
  done = nullptr;
  try {
    // The callback holds no reference to the pending state: if the owner is
    // gone when it fires, post drops it.
    resolver_.resolve(name, qtype, [post = post_, this, id](ResolveResult result) {
      post([this, id, result = std::move(result)]() mutable { complete(id, std::move(result)); });
    });
  } catch (...) {
    auto it = pending_.find(id);
    if (it != pending_.end()) {  // not answered: give done back for the SERVFAIL
      done = std::move(it->second.done);
      release(it->second.session.id);
      pending_.erase(it);
    }
    throw;
  }
}

void QueryHandler::release(const std::string& session) {
  auto it = pending_per_session_.find(session);
  if (it != pending_per_session_.end() && --it->second == 0) pending_per_session_.erase(it);
}

void QueryHandler::complete(uint64_t id, ResolveResult result) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending p = std::move(it->second);
  pending_.erase(it);
  release(p.session.id);
  Bytes servfail = build_reply(p.query, Rcode::ServFail, {}, 0, p.max_size);
  try {
    finish(p, std::move(result), /*forwarded=*/true);
  } catch (const std::exception&) {
    ++counters_.internal_errors;
    if (p.done) p.done(std::move(servfail));
  }
}

void QueryHandler::finish(Pending& p, ResolveResult result, bool forwarded) {
  Done done = std::move(p.done);
  p.done = nullptr;
  switch (result.rcode) {
    case Rcode::NoError: {
      ++counters_.allowed;
      const int family = p.query.qtype == LDNS_RR_TYPE_A ? AF_INET : AF_INET6;
      std::erase_if(result.addresses, [family](const net::IpAddress& a) { return a.family != family; });
      const uint32_t ttl = std::min(result.ttl, config_.max_ttl);
      Bytes reply = build_reply(p.query, Rcode::NoError, result.addresses, ttl, p.max_size);
      // Either hook may throw: done is kept for the SERVFAIL.
      p.done = std::move(done);
      if (!result.addresses.empty())
        policy_.on_answer(p.session, p.query.qname, result.addresses, ttl);
      else
        policy_.on_unanswered(p.session, p.query.qname, NoAnswer::NoData, forwarded);
      done = std::move(p.done);
      p.done = nullptr;
      done(std::move(reply));
      return;
    }
    case Rcode::NxDomain:
      ++counters_.allowed;
      p.done = std::move(done);  // the hook may throw: keep done for the SERVFAIL
      policy_.on_unanswered(p.session, p.query.qname, NoAnswer::NxDomain, forwarded);
      done = std::move(p.done);
      p.done = nullptr;
      done(build_reply(p.query, Rcode::NxDomain, {}, 0, p.max_size));
      return;
    default:
      ++counters_.upstream_failures;
      // Audited too, then SERVFAIL whatever the hook does.
      try {
        policy_.on_unanswered(p.session, p.query.qname, NoAnswer::Error, forwarded);
      } catch (const std::exception&) {
        ++counters_.internal_errors;
      }
      done(build_reply(p.query, Rcode::ServFail, {}, 0, p.max_size));
      return;
  }
}

}  // namespace zn::dns
