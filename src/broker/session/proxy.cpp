#include "broker/session/proxy.h"

#include <netinet/in.h>

#include <sodium.h>

#include <algorithm>
#include <cctype>

#include "broker/policy/host_header.h"
#include "broker/session/canary_names.h"
#include "broker/session/cap_handles.h"
#include "broker/session/body_preview.h"
#include "userspace/proxy/destination_class.h"
#include "userspace/net/transparent_socket.h"

namespace zn::broker {
namespace {

net::IpAddress address_of(const sockaddr_storage& ss) {
  net::IpAddress a;
  if (ss.ss_family == AF_INET) {
    a.family = AF_INET;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, 4);
  } else {
    a.family = AF_INET6;
    std::memcpy(a.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, 16);
  }
  return a;
}

bool in_l4_plan(const Session& s, const net::IpAddress& dst, uint16_t port) {
  const uint8_t family = dst.family == AF_INET6 ? 6 : 4;
  return std::any_of(s.plan.l4_rules.begin(), s.plan.l4_rules.end(), [&](const dp::L4Rule& r) {
    if (r.family != family || (r.port != 0 && r.port != port)) return false;
    for (unsigned bit = 0; bit < r.prefix_len; ++bit) {
      const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
      if ((r.addr[bit / 8] & mask) != (dst.bytes[bit / 8] & mask)) return false;
    }
    return true;
  });
}

// An injection of `credential` where the rule places it.
proxy::Injection placed(const Placement& where, std::string value, std::string credential) {
  proxy::Injection i;
  i.header = where.name;
  i.query = where.kind == Placement::Kind::kQuery;
  i.value = i.query ? std::move(value) : where.prefix + value;
  // The guest's own credential headers never ride along with the rule's.
  i.strip = {"Authorization", "Proxy-Authorization"};
  // The credential itself is what an echoing upstream must not hand back,
  // in whatever encoding: "Bearer " is no part of it.
  i.scrub = {std::move(credential)};
  sodium_memzero(value.data(), value.size());
  return i;
}

// A resource's credential, for a request allowed under `ref`.
std::optional<proxy::Injection> static_injection(const Session& s, const proxy::RuleRef& ref) {
  const Policy& p = s.policy->policy();
  // The policy may have changed since the verdict: the rule must still be
  // the one that allowed the request.
  if (ref.index >= p.allow.size() || p.allow[ref.index].identity != ref.identity) return std::nullopt;
  const AllowRule& rule = p.allow[ref.index];
  auto resource = p.resources.find(ref.identity);
  if (resource == p.resources.end()) return std::nullopt;
  const Secret* credential = resource->second.credential();
  if (!credential) return std::nullopt;
  // Revealed for this request only: the proxy wipes its copies when the
  // request is done.
  if (resource->second.kind == ResourceKind::kBasic) {
    auto user = resource->second.fields.find("user");
    if (user == resource->second.fields.end()) return std::nullopt;
    std::string pair = user->second.reveal([](std::string_view u) { return std::string(u) + ":"; });
    credential->reveal([&](std::string_view pw) { pair.append(pw); });
    std::string encoded(sodium_base64_encoded_len(pair.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
    sodium_bin2base64(encoded.data(), encoded.size(), reinterpret_cast<const unsigned char*>(pair.data()),
                      pair.size(), sodium_base64_VARIANT_ORIGINAL);
    encoded.pop_back();  // the terminating NUL
    sodium_memzero(pair.data(), pair.size());
    Placement basic = rule.placement;
    basic.prefix = "Basic ";
    return credential->reveal(
        [&](std::string_view pw) { return placed(basic, std::move(encoded), std::string(pw)); });
  }
  return credential->reveal(
      [&](std::string_view t) { return placed(rule.placement, std::string(t), std::string(t)); });
}

std::vector<proxy::ScrubSecret> secrets_of(const Session& s) {
  std::vector<proxy::ScrubSecret> out;
  const Policy& p = s.policy->policy();
  for (const auto& rule : p.allow) {
    if (!rule.identity) continue;
    auto resource = p.resources.find(*rule.identity);
    const Secret* token = resource == p.resources.end() ? nullptr : resource->second.credential();
    if (!token) continue;
    if (std::none_of(out.begin(), out.end(),
                     [&](const proxy::ScrubSecret& x) { return token->equals(x.secret); }))
      token->reveal([&](std::string_view t) { out.push_back({*rule.identity, std::string(t)}); });
  }
  return out;
}

// Canaries and placeholders: what no request of the session may carry
// (a placeholder only where its own rule swaps it).
std::vector<proxy::Tripwire> tripwires_of(const Session& s) {
  std::vector<proxy::Tripwire> out;
  const Policy& p = s.policy->policy();
  for (size_t i = 0; i < p.canaries.size(); ++i) {
    // Also as all-lower and all-upper case: a whole-value case change keeps
    // the credential recoverable (and DNS names fold case anyway).
    const std::string label = "canary:" + std::to_string(i);
    std::string lower = p.canaries[i], upper = p.canaries[i];
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out.push_back({p.canaries[i], label});
    if (lower != p.canaries[i]) out.push_back({lower, label});
    if (upper != p.canaries[i] && upper != lower) out.push_back({upper, label});
  }
  for (const auto& [resource, placeholder] : s.record.placeholders)
    out.push_back({placeholder, "placeholder:" + resource});
  return out;
}

// The swap for a request allowed under `rule`: its resource's placeholder
// for the credential.
std::vector<proxy::Substitution> substitutions_for(const Session& s, const AllowRule& rule) {
  if (!rule.identity) return {};
  auto ph = s.record.placeholders.find(*rule.identity);
  if (ph == s.record.placeholders.end()) return {};
  const Policy& p = s.policy->policy();
  auto resource = p.resources.find(*rule.identity);
  const Secret* credential = resource == p.resources.end() ? nullptr : resource->second.credential();
  if (!credential) return {};
  return credential->reveal([&](std::string_view c) {
    return std::vector<proxy::Substitution>{{ph->second, std::string(c), "placeholder:" + *rule.identity}};
  });
}

}  // namespace

constexpr std::string_view kMintedJwtLabel = "minted:jwt";

std::optional<proxy::Injection> SessionProxyPolicy::injection_in(const Session& s,
                                                                 const proxy::RuleRef& ref) const {
  if (!ref.minted) return ref.identity.empty() ? std::nullopt : static_injection(s, ref);
  const Policy& p = s.policy->policy();
  if (!minter_ || ref.index >= p.allow.size() || !p.allow[ref.index].mint_jwt) return std::nullopt;
  // Minted for this request: its session, the upstream host the policy
  // matched, its method and normalised path; valid for a minute at most.
  MintResult minted = minter_->mint({s.record.id, ref.host, ref.method, ref.path});
  if (!minted.ok()) return std::nullopt;
  // Scrubbed like a static token: an upstream echoing it hands back a live
  // credential for this very request shape.
  std::string token = std::move(minted.token);
  std::string value = token;
  return placed(p.allow[ref.index].placement, std::move(value), std::move(token));
}

bool SessionProxyPolicy::take_rate(const Session& s) {
  return s.state->rate.take(s.policy->policy().rate, clock_ ? clock_() : RateBucket::Clock::now());
}

proxy::UpstreamDecision SessionProxyPolicy::reset(proxy::UpstreamDecision d, const std::string& reason,
                                                  const proxy::ConnectionFacts& facts) {
  d.mode = proxy::ConnectionMode::kReset;
  d.reason = reason;
  d.addresses.clear();
  audit_.post({"egress:deny",
               d.session,
               {{"host", d.host}, {"reason", reason}, {"dst", net::endpoint_text(facts.original_dst)}}});
  return d;
}

std::string SessionProxyPolicy::tenant_of(const sockaddr_storage& guest) const {
  SessionPtr s = sessions_.find_by_guest(guest);
  return s ? s->record.id : std::string();
}

proxy::UpstreamDecision SessionProxyPolicy::decide(const proxy::ConnectionFacts& facts) {
  return *decide_connection(facts, true);
}

std::optional<proxy::UpstreamDecision> SessionProxyPolicy::decide_at_once(
    const proxy::ConnectionFacts& facts) {
  return decide_connection(facts, false);
}

std::optional<proxy::UpstreamDecision> SessionProxyPolicy::decide_connection(
    const proxy::ConnectionFacts& facts, bool may_resolve) {
  proxy::UpstreamDecision d;
  const net::IpAddress dst = address_of(facts.original_dst);
  const uint16_t port = net::endpoint_port(facts.original_dst);
  d.port = port;
  d.host = dst.to_string();
  SessionPtr s = sessions_.find_by_guest(facts.guest);
  if (!s) return reset(d, "unknown guest", facts);
  d.session = s->record.id;
  // Fail closed: nothing crosses that the audit cannot record (a stuck or
  // failing disk, a backlog past its high-water mark).
  if (!audit_.admits()) return reset(d, "audit unavailable", facts);

  if (port == 80) {
    // Plain HTTP is decided per request, from the Host header.
    d.mode = proxy::ConnectionMode::kIntercept;
    d.tls = false;
    return d;
  }
  if (port != 443) {
    // Raw TCP: only to a destination an L4 rule put in the datapath.
    if (!in_l4_plan(*s, dst, port)) return reset(d, "no L4 rule for this destination", facts);
    // A rule naming an address (or a name that resolved to one) does not
    // open the host itself, a guest pool or a special-purpose range.
    if (auto why = guard_->refusal(dst)) return reset(d, *why, facts);
    if (!take_rate(*s)) {
      audit_.post({"egress:rate_limited", d.session, {{"host", d.host}, {"port", port}}});
      d.reason = "rate limited";
      return d;
    }
    d.mode = proxy::ConnectionMode::kPassthrough;
    d.addresses = {dst};
    return d;
  }
  if (!facts.tls) return reset(d, "not TLS on port 443", facts);
  d.tls = true;
  if (!facts.sni || facts.sni_is_ip_literal) {
    // Without a name only a rule naming the address itself can allow it.
    const std::string literal = facts.sni.value_or(dst.to_string());
    d.host = literal;
    HostVerdict v = s->policy->match_host(literal);
    if (!v.allowed) return reset(d, facts.sni ? "IP-literal SNI not named by a rule" : "no SNI", facts);
    auto named = net::IpAddress::parse(literal);
    if (!named) return reset(d, "bad IP-literal SNI", facts);
    if (v.intercept) {
      d.mode = proxy::ConnectionMode::kIntercept;
      return d;
    }
    if (auto why = guard_->refusal(*named)) return reset(d, *why, facts);
    d.mode = proxy::ConnectionMode::kPassthrough;
    d.addresses = {*named};
    return d;
  }
  d.host = *facts.sni;
  if (*facts.sni == kCapabilityHost) {
    // zerod's own capability gateway: terminated and answered here, each
    // request routed, rate-limited and audited by serve_local.
    d.mode = proxy::ConnectionMode::kIntercept;
    d.local = true;
    return d;
  }
  // A planted fake credential spelled into the SNI leaves in the
  // ClientHello whatever happens next: reset, and raise the alarm.
  if (auto canary = canary_in_name(s->policy->policy().canaries, *facts.sni)) {
    audit_.post({"secret:canary",
                 d.session,
                 {{"where", nlohmann::json::array({"sni"})},
                  {"host", d.host},
                  {"canary", nlohmann::json::array({*canary})}}});
    return reset(d, "canary in SNI", facts);
  }
  HostVerdict v = s->policy->match_host(*facts.sni);
  if (!v.allowed || v.intercept) {
    // Terminated, so the guest gets the answer the policy gives: the
    // conditions of the rule, or a 403 with the reason for a denied host.
    d.mode = proxy::ConnectionMode::kIntercept;
    return d;
  }
  // Spliced to a name: its addresses may need a resolution, which only a
  // worker may wait for. Nothing is charged or recorded before this point
  // but for a connection that ends here.
  if (!may_resolve) return std::nullopt;
  if (!take_rate(*s)) {
    audit_.post({"egress:rate_limited", d.session, {{"host", d.host}}});
    d.reason = "rate limited";
    return d;
  }
  proxy::UpstreamAddresses where = resolve_upstream(d.session, *facts.sni);
  if (where.addresses.empty()) return reset(d, where.reason, facts);
  d.mode = proxy::ConnectionMode::kPassthrough;
  d.addresses = std::move(where.addresses);
  return d;
}

proxy::UpstreamAddresses SessionProxyPolicy::resolve_upstream(const std::string& session,
                                                              const std::string& host) {
  proxy::UpstreamAddresses out;
  SessionPtr s = sessions_.get(session);
  if (!s) {
    out.reason = "unknown session";
    return out;
  }
  if (auto literal = net::IpAddress::parse(host)) {
    // Reachable only because a rule names it (checked by the caller's verdict).
    if (!s->policy->match_host(host).allowed) {
      out.reason = "address not named by a rule";
      return out;
    }
    if (auto why = guard_->refusal(*literal)) {
      out.reason = *why;  // a rule naming the address is not enough for a refused class
      return out;
    }
    out.addresses = {*literal};
    return out;
  }
  // Our own resolution, pinned to what this session was told: the guest's
  // choice of address never matters, and a name it never asked us about is
  // refused.
  const std::vector<net::IpAddress> told = dns_.answers(*s, host);
  if (told.empty()) {
    out.reason = "name was not resolved through governed DNS";
    return out;
  }
  std::string refused;
  // The broker's current resolution (remembered by the session for its
  // TTL, capped): only addresses both told and current are used.
  const std::vector<net::IpAddress> current = s->state->upstream.get(host, [this](const std::string& name) {
    upstream_resolutions_.fetch_add(1, std::memory_order_relaxed);
    return resolver_.resolve_timed(name);
  });
  for (const net::IpAddress& a : current) {
    if (std::find(told.begin(), told.end(), a) == told.end()) continue;
    // Never the host itself, a guest, or a special-purpose range unless
    // zerod's own config allows it, whatever name pointed there.
    if (auto why = guard_->refusal(a)) {
      refused = *why;
      continue;
    }
    out.addresses.push_back(a);
  }
  if (out.addresses.empty()) out.reason = refused.empty() ? "no permitted upstream address" : refused;
  return out;
}

proxy::RequestDecision SessionProxyPolicy::refuse(proxy::RequestDecision d, int status,
                                                  const std::string& reason,
                                                  const proxy::RequestFacts& facts) {
  d.allow = false;
  d.status = status;
  d.reason = reason;
  d.rule.reset();
  for (proxy::Substitution& sub : d.substitutions)
    sodium_memzero(sub.credential.data(), sub.credential.size());
  d.substitutions.clear();
  audit_.post({status == 429 ? "egress:rate_limited" : "egress:deny",
               facts.session,
               {{"host", d.host.empty() ? facts.host_header : d.host},
                {"method", facts.method},
                {"path", facts.path},
                {"status", status},
                {"reason", reason}}});
  return d;
}

proxy::RequestDecision SessionProxyPolicy::decide_request(const proxy::RequestFacts& facts) {
  proxy::RequestDecision d;
  SessionPtr s = sessions_.get(facts.session);
  if (!s) return refuse(d, 403, "unknown session", facts);
  // Whatever the verdict: a refused request is screened too, so a canary
  // sent to a denied host is still an alarm.
  if (facts.want_session_secrets) d.tripwires = tripwires_of(*s);
  if (!audit_.admits()) return refuse(d, 503, "audit unavailable", facts);
  std::optional<HostHeader> host = parse_host_header(facts.host_header);
  if (!host) return refuse(d, 400, "bad Host header", facts);
  d.host = host->name;
  // No domain fronting: the name the TLS session was set up for is the only
  // one its requests may address.
  if (facts.sni && host->name != *facts.sni) return refuse(d, 421, "Host does not match SNI", facts);
  if (host->port && *host->port != facts.port)
    return refuse(d, 421, "Host port does not match the connection", facts);
  if (!take_rate(*s)) return refuse(d, 429, "session rate exceeded", facts);

  RequestVerdict v = s->policy->match_request(host->name, facts.method, facts.path, facts.websocket);
  if (v.action == RequestAction::kDeny) return refuse(d, 403, v.reason, facts);
  if (v.rule->injects_identity() && !facts.sni)
    return refuse(d, 403, "identity is never sent over cleartext", facts);
  d.allow = true;
  d.status = 0;
  // A minted identity's label cannot be a resource name ([a-z0-9_-]): it
  // keys the upstream pool and names the identity in the audit.
  d.rule = proxy::RuleRef{v.rule->index,
                          v.rule->mint_jwt ? std::string(kMintedJwtLabel) : v.rule->identity.value_or(""),
                          v.rule->mint_jwt,
                          {},
                          {},
                          {}};
  if (v.rule->mint_jwt) {
    d.rule->host = host->name;
    d.rule->method = facts.method;
    d.rule->path = facts.path;
  }
  // From the snapshot the verdict was made on: the request takes one trip.
  if (facts.want_session_secrets) d.session_secrets = secrets_of(*s);
  d.substitutions = substitutions_for(*s, *v.rule);
  const std::string scheme = facts.sni ? "https" : "http";
  // An "ask" a live standing approval covers passes as if approved (never
  // blocks: the grant book's lock covers a scan of a few grants).
  std::optional<Grant> grant;
  if (v.action == RequestAction::kAsk)
    grant = approvals_.grants().covers(facts.session, scheme, facts.method, host->name, facts.path);
  if ((v.action != RequestAction::kAsk || grant) && v.rule->injects_identity()) {
    d.injection = injection_in(*s, *d.rule);
    if (!d.injection) return refuse(d, 403, "identity unavailable", facts);
  }
  if (grant) {
    audit_.post({"egress:approved",
                 facts.session,
                 {{"host", host->name},
                  {"method", facts.method},
                  {"path", facts.path},
                  {"grant", grant->id},
                  {"by", "grant"}}});
  } else if (v.action == RequestAction::kAsk) {
    HeldRequest held;
    held.session = facts.session;
    held.scheme = scheme;
    held.host = host->name;
    held.method = facts.method;
    held.path = facts.path;
    held.header_names = shown_header_names(facts.header_names);
    // Shown to operators, the audit and the webhook: never a secret of the policy.
    held.body_preview = redact_body_preview(facts.body_preview, s->policy->policy());
    d.hold_ticket = approvals_.hold(held);
    // The session holds its share of the book already (approval_book.h).
    if (d.hold_ticket == 0) return refuse(d, 429, "too many requests awaiting approval", facts);
    {
      std::lock_guard lock(held_mu_);
      held_under_[d.hold_ticket] = {facts.session, s->record.policy_version};
    }
    d.hold_expires = approvals_.expires_at(d.hold_ticket).value_or(std::chrono::steady_clock::now());
    audit_.post({"egress:ask",
                 facts.session,
                 {{"host", host->name},
                  {"method", facts.method},
                  {"path", facts.path},
                  {"ticket", d.hold_ticket},
                  {"header_names", held.header_names},
                  {"body_preview", held.body_preview}}});
  }
  return d;
}

proxy::HoldState SessionProxyPolicy::hold_state(const std::string& session, uint64_t ticket) {
  const ApprovalState state = approvals_.take(ticket);
  if (state == ApprovalState::kPending) return {proxy::HoldOutcome::kPending, ""};
  std::optional<HeldUnder> under;
  {
    std::lock_guard lock(held_mu_);
    if (auto it = held_under_.find(ticket); it != held_under_.end()) {
      under = it->second;
      held_under_.erase(it);
    }
  }
  switch (state) {
    case ApprovalState::kPending:
      return {proxy::HoldOutcome::kPending, ""};
    case ApprovalState::kApproved: {
      // Approved, but under the policy it was held under only: an update
      // (or a delete) since makes the decision stale.
      const SessionPtr now = sessions_.get(session);
      if (!under || under->session != session || !now || now->record.policy_version != under->policy_version)
        return {proxy::HoldOutcome::kRefused, "policy changed while held"};
      return {proxy::HoldOutcome::kApproved, ""};  // audited when the operator decided
    }
    case ApprovalState::kDenied:
      return {proxy::HoldOutcome::kRefused, "denied by operator"};
    case ApprovalState::kExpired:
      audit_.post({"egress:ask_timeout", session, {{"ticket", ticket}, {"reason", "approval timed out"}}});
      return {proxy::HoldOutcome::kRefused, "approval timed out"};
    case ApprovalState::kCancelled:  // cancel() removes the ticket: never taken
    case ApprovalState::kUnknown:
      break;
  }
  return {proxy::HoldOutcome::kRefused, "approval unknown"};
}

proxy::HoldState SessionProxyPolicy::cancel_hold(const std::string& session, uint64_t ticket) {
  switch (approvals_.cancel(ticket)) {
    case ApprovalState::kCancelled:
      audit_.post(
          {"egress:ask_cancelled", session, {{"ticket", ticket}, {"reason", "cancelled by the guest"}}});
      break;
    case ApprovalState::kExpired:
      audit_.post({"egress:ask_timeout", session, {{"ticket", ticket}, {"reason", "approval timed out"}}});
      break;
    case ApprovalState::kPending:   // cancel() never leaves one
    case ApprovalState::kApproved:  // audited when the operator decided
    case ApprovalState::kDenied:
    case ApprovalState::kUnknown:  // taken already: its outcome was audited then
      break;
  }
  return {proxy::HoldOutcome::kRefused, "cancelled by the guest"};
}

std::optional<proxy::Injection> SessionProxyPolicy::injection_for(const std::string& session,
                                                                  const proxy::RuleRef& ref) {
  SessionPtr s = sessions_.get(session);
  if (!s) return std::nullopt;
  return injection_in(*s, ref);
}

namespace {

nlohmann::json request_detail(const proxy::RequestSummary& r) {
  nlohmann::json detail = {{"host", r.host},
                           {"method", r.method},
                           {"path", r.path},
                           {"status", r.status},
                           {"mode", "intercept"},
                           {"bytes_up", r.bytes_from_guest},
                           {"bytes_down", r.bytes_to_guest},
                           {"duration_ms", r.duration.count()}};
  if (!r.identity.empty()) detail["identity"] = r.identity;
  if (!r.upstream.empty()) detail["upstream"] = r.upstream;  // the address and port actually connected
  if (!r.error.empty()) detail[r.forwarded && !r.upstream_failed ? "error" : "reason"] = r.error;
  // The guest's own reset or disconnect: its cancel, not the upstream's failure.
  if (r.guest_cancelled) detail["outcome"] = "guest_cancelled";
  // A WebSocket: the record is written when it ends, its bytes and duration
  // the whole WebSocket's.
  if (r.websocket && r.status == 101)
    detail["websocket"] = {
        {"messages_up", r.messages_up}, {"messages_down", r.messages_down}, {"end", r.websocket_end}};
  else if (r.websocket)
    detail["websocket"] = {{"switched", false}};
  return detail;
}

// The upstream sent an injected secret back; the proxy replaced it before
// the guest saw it. Where and how it was encoded, never the value.
nlohmann::json reflected_detail(const proxy::RequestSummary& r) {
  nlohmann::json where = nlohmann::json::array();
  if (r.reflected_in_head > 0) where.push_back("header");
  if (r.reflected_in_body > 0) where.push_back("body");
  return {{"host", r.host},
          {"method", r.method},
          {"path", r.path},
          {"status", r.status},
          {"identity", r.reflected_identities},
          {"where", where},
          {"encodings", r.reflected_encodings},
          {"matches", r.reflected_in_head + r.reflected_in_body}};
}

}  // namespace

void SessionProxyPolicy::on_request_done(const proxy::RequestSummary& summary) {
  // On the proxy's loop, once per request: the records' details are built
  // on the audit's writer from a copy of the summary (AuditEvent::detail_later).
  auto r = std::make_shared<const proxy::RequestSummary>(summary);
  // No upstream could be connected: an error, never an egress:allow.
  audit_.post({r->upstream_failed ? "egress:error"
               : r->forwarded     ? "egress:allow"
                                  : "egress:deny",
               r->session,
               {},
               [r] { return request_detail(*r); }});
  if (r->reflected_in_head + r->reflected_in_body > 0)
    audit_.post({"secret:reflected", r->session, {}, [r] { return reflected_detail(*r); }});
}

void SessionProxyPolicy::on_tripwire(const proxy::TripwireHit& hit) {
  // One alarm per kind: a canary is an operator's tripwire, a placeholder
  // headed elsewhere a credential being walked off.
  nlohmann::json canaries = nlohmann::json::array(), resources = nlohmann::json::array();
  for (const std::string& label : hit.labels) {
    if (label.rfind("canary:", 0) == 0) canaries.push_back(std::stoul(label.substr(7)));
    if (label.rfind("placeholder:", 0) == 0) resources.push_back(label.substr(12));
  }
  const nlohmann::json base = {
      {"host", hit.host}, {"method", hit.method}, {"path", hit.path}, {"where", hit.where}};
  if (!canaries.empty()) {
    nlohmann::json detail = base;
    detail["canary"] = canaries;
    audit_.post({"secret:canary", hit.session, std::move(detail)});
  }
  if (!resources.empty()) {
    nlohmann::json detail = base;
    detail["resource"] = resources;
    audit_.post({"secret:misuse", hit.session, std::move(detail)});
  }
}

void SessionProxyPolicy::serve_local(proxy::LocalRequest request,
                                     std::function<void(proxy::LocalResponse)> done) {
  auto refuse_local = [&](int status, std::string_view code, std::string_view message) {
    audit_.post({"resource:deny", request.session, {{"status", status}, {"code", code}}});
    done(capability_error(status, code, message));
  };
  SessionPtr s = sessions_.get(request.session);
  // No session, or no capabilities served at all: the same 404 as a
  // handle nobody holds.
  if (!s || !capabilities_) return done(capability_error(404, "not_found", "not found"));
  if (!audit_.admits()) return refuse_local(503, "unavailable", "audit unavailable");
  std::optional<HostHeader> host = parse_host_header(request.host_header);
  if (!host || host->name != kCapabilityHost || (host->port && *host->port != 443))
    return refuse_local(421, "misdirected", "Host must be " + std::string(kCapabilityHost));
  if (!take_rate(*s)) return refuse_local(429, "rate_limited", "session rate exceeded");
  capabilities_->serve(std::move(s), std::move(request), std::move(done));
}

void SessionProxyPolicy::on_closed(const proxy::ConnectionSummary& c) {
  if (!c.refused.empty()) {
    // The connect-time guard refused every address (the broker's own check
    // passed: the local table or a resolution changed in between).
    audit_.post(
        {"egress:deny", c.session, {{"host", c.host}, {"mode", "passthrough"}, {"reason", c.refused}}});
    return;
  }
  if (c.upstream.empty()) {
    // Nothing was connected: not an egress:allow.
    audit_.post({"egress:error",
                 c.session,
                 {{"host", c.host},
                  {"mode", "passthrough"},
                  {"reason", c.end},
                  {"duration_ms", c.duration.count()}}});
    return;
  }
  audit_.post({"egress:allow",
               c.session,
               {{"host", c.host},
                {"mode", "passthrough"},
                {"upstream", c.upstream},
                {"bytes_up", c.bytes_from_guest},
                {"bytes_down", c.bytes_to_guest},
                {"duration_ms", c.duration.count()},
                {"end", c.end}}});
}

}  // namespace zn::broker
