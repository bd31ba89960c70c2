// The narrow interface between the transparent proxy and the broker: the
// proxy reports what it learnt of a connection or a request, the broker says
// what may happen. The proxy never sees policy, sessions or secret storage;
// it asks for one injection for (session, rule) at the moment it forwards.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "userspace/http/injection.h"
#include "userspace/net/address.h"

namespace zn::proxy {

struct ConnectionFacts {
  sockaddr_storage guest{};         // the guest's source address
  sockaddr_storage original_dst{};  // where the guest was connecting
  bool tls = false;                 // the first bytes were a TLS ClientHello
  std::optional<std::string> sni;   // lowercase
  bool sni_is_ip_literal = false;
};

enum class ConnectionMode {
  kReset,        // refuse: the guest learns nothing
  kPassthrough,  // splice to `addresses` (TLS untouched, or an L4 rule)
  kIntercept,    // terminate (TLS with a leaf for `host`) and decide each request
};

struct UpstreamDecision {
  ConnectionMode mode = ConnectionMode::kReset;
  std::string reason;   // why reset (audit)
  std::string session;  // "" when the guest is unknown
  std::string host;     // the name the verdict is about (SNI or address)
  bool tls = false;     // intercept: the guest speaks TLS (443), else plain HTTP (80)
  // Passthrough: where to connect, the broker's own resolution, never the
  // guest's choice.
  std::vector<net::IpAddress> addresses;
  uint16_t port = 0;
  // Intercept: the broker answers the requests itself (serve_local), and
  // nothing of them goes upstream (the capability gateway, issue 13).
  bool local = false;
};

struct RequestFacts {
  std::string session;
  std::optional<std::string> sni;  // intercepted TLS: the name the leaf was minted for
  uint16_t port = 0;               // the guest's destination port
  std::string host_header;         // as sent
  std::string method;              // uppercase token
  std::string path;                // normalised, without the query
  // A WebSocket opening handshake (checked well-formed): only a rule with
  // "websocket": true allows it.
  bool websocket = false;
  // The connection's first request: an allowed decision carries every
  // secret the session could inject (session_secrets), to scrub responses
  // of, and every decision the session's tripwires.
  bool want_session_secrets = false;
  // What an operator is shown of a request held for approval ("ask"): the
  // header names as sent (lowercased, in order; never a value) and up to 256
  // bytes of the decoded body already received with the head. Raw: may hold
  // secrets; the broker redacts it before anyone sees it.
  std::vector<std::string> header_names;
  std::string body_preview;
};

using Injection = http::Injection;

// A secret the session may have injected somewhere, and whose it is.
struct ScrubSecret {
  std::string identity;
  std::string secret;  // never logged, cleansed after use
};

// A string that must never leave in a request: a canary the operator
// planted in the guest ("canary:<n>"), or a placeholder the guest holds for
// a credential ("placeholder:<resource>"), which may only go where a rule
// naming its resource allowed the request (there it is swapped). Looked for
// in the request line, headers and body, in the encodings the response
// scrubber knows.
struct Tripwire {
  std::string pattern;
  std::string label;
};

// In this request: the guest's placeholder swapped for the credential (in
// header values, the query, and a JSON or form body up to a bound).
struct Substitution {
  std::string placeholder;
  std::string credential;  // never logged, cleansed after use
  std::string label;       // the Tripwire label it exempts in this request
};

// A rule the broker allowed a request under; the proxy hands it back to get
// the injection, so a secret is only ever fetched for a request just allowed.
struct RuleRef {
  size_t index = 0;
  std::string identity;  // resource name, "" if none
  // A minted identity ("identity": "jwt"), bound to the request it was
  // allowed for: a held request's injection is minted once approved, for the
  // same host, method and path.
  bool minted = false;
  std::string host, method, path;
};

struct RequestDecision {
  bool allow = false;
  int status = 403;    // when not allowed: 403, 421, 429
  std::string reason;  // shown to the guest in the body; never a secret
  std::string host;    // normalised Host: the upstream name
  std::optional<RuleRef> rule;
  // Allowed under a rule with an identity (and not held): what to inject,
  // given with the verdict so a request takes one trip to the broker. The
  // proxy cleanses it after use. A held request's comes from injection_for
  // once approved.
  std::optional<Injection> injection;
  // Allowed, and asked for with want_session_secrets: every secret the
  // session's policy could inject. Each intercepted connection is scrubbed
  // of them from its first request, injected there or not (an upstream may
  // hand back on one connection what it was given on another). Cleansed
  // after use.
  std::vector<ScrubSecret> session_secrets;
  // Asked for with want_session_secrets (allowed or not): the session's
  // tripwires; the proxy screens each request of the connection for them.
  std::vector<Tripwire> tripwires;
  // Allowed under a rule naming a resource with a placeholder. Cleansed
  // after use.
  std::vector<Substitution> substitutions;
  // Allowed only once a human approves ("ask"): the proxy waits (watch_hold)
  // until the ticket is decided or this time passes, then reads hold_state.
  uint64_t hold_ticket = 0;
  std::chrono::steady_clock::time_point hold_expires{};
};

enum class HoldOutcome { kPending, kApproved, kRefused };
struct HoldState {
  HoldOutcome outcome = HoldOutcome::kRefused;
  std::string reason;  // when refused
};

struct UpstreamAddresses {
  std::vector<net::IpAddress> addresses;  // empty: refused, see reason
  std::string reason;
};

struct RequestSummary {
  std::string session, host, method, path, identity;
  int status = 0;
  // Reached the upstream (egress:allow); otherwise refused by the proxy
  // itself before any byte left (a malformed request, an upgrade attempt).
  bool forwarded = false;
  uint64_t bytes_from_guest = 0, bytes_to_guest = 0;
  std::chrono::milliseconds duration{0};
  std::string error;  // "" or why it failed or was refused
  // An injected secret came back from the upstream in this response and was
  // replaced before the guest saw it (secret:reflected): how often, where,
  // in which encodings ("raw", "base64", ...), and whose (identity names).
  uint64_t reflected_in_head = 0, reflected_in_body = 0;
  std::vector<std::string> reflected_encodings, reflected_identities;
  // The address and port actually connected ("198.18.0.10:443"); "" when
  // no upstream connection was made.
  std::string upstream;
  // No upstream address could be connected (refused by none, reachable by
  // none): an egress:error, never an egress:allow.
  bool upstream_failed = false;
  // A WebSocket handshake. Switched (status 101): the bytes and duration
  // cover the whole WebSocket, its messages counted each way, and how it
  // ended.
  bool websocket = false;
  uint64_t messages_up = 0, messages_down = 0;
  std::string websocket_end;
  // The guest gave up on it after it was forwarded (its connection reset or
  // closed, its HTTP/2 stream cancelled, it stopped reading): the guest's
  // cancel, never an upstream failure. status is the upstream's if its
  // response had started, else 499.
  bool guest_cancelled = false;
};

// A request that carried a tripwire: refused (403) before the tripwire left.
// `labels` name what matched ("canary:0", "placeholder:stripe"), `where`
// the parts ("path", "query", "header", "body"). Never the value.
struct TripwireHit {
  std::string session, host, method, path;
  std::vector<std::string> labels, where;
};

struct ConnectionSummary {
  std::string session, host;
  uint64_t bytes_from_guest = 0, bytes_to_guest = 0;
  std::chrono::milliseconds duration{0};
  std::string end;       // "closed", "upstream unreachable", ...
  std::string upstream;  // the address and port actually connected; "" if none
  // Every upstream address was refused by the DestinationGuard at connect
  // time (egress:deny): why ("local address", "guest pool", ...).
  std::string refused;
};

// A request on a connection the broker answers itself (UpstreamDecision.local),
// read whole by the proxy (bounded: a larger body is refused with 413).
struct LocalRequest {
  std::string session;
  std::string host_header;  // as sent
  std::string method;       // uppercase token
  std::string target;       // the request-target as sent (the broker routes on it)
  std::string body;         // de-chunked
};

struct LocalResponse {
  int status = 500;
  std::string content_type;  // "" for a response without a body
  std::string body;
};

// Executor: implementations are thread-safe; every method is called from
// several threads at once.
// - decide, resolve_upstream and on_closed may block (name resolution): the
//   proxy calls them on its worker pool (co_spawn on TransparentProxy's pool).
//   decide_at_once never blocks: the proxy asks it on the loop first.
// - decide_request, injection_for, on_request_done, hold_state and
//   watch_hold are per request: they never block (short locks only; audit
//   records are posted, never committed in the call), and the proxy calls
//   them on its I/O loops.
// Denials are audited by the broker itself.
class ProxyPolicy {
 public:
  virtual ~ProxyPolicy() = default;
  // Whose share of the proxy's workers a connection's calls take (issue 32):
  // the session of the guest at `guest`. Never blocks: called on the loop,
  // before decide(). By default the guest's address itself (one per guest).
  virtual std::string tenant_of(const sockaddr_storage& guest) const {
    if (guest.ss_family == AF_INET6) {
      const auto& a = reinterpret_cast<const sockaddr_in6&>(guest).sin6_addr;
      return std::string(reinterpret_cast<const char*>(&a), sizeof a);
    }
    const auto& a = reinterpret_cast<const sockaddr_in&>(guest).sin_addr;
    return std::string(reinterpret_cast<const char*>(&a), sizeof a);
  }
  virtual UpstreamDecision decide(const ConnectionFacts& facts) = 0;
  // decide() on the loop itself, for a connection whose decision needs no
  // wait (no name to resolve): the same decision, or nullopt, with nothing
  // charged or recorded, and decide() runs on a worker. Never blocks.
  // Default: nullopt (every decision on the workers).
  virtual std::optional<UpstreamDecision> decide_at_once(const ConnectionFacts& facts) {
    (void)facts;
    return std::nullopt;
  }
  virtual RequestDecision decide_request(const RequestFacts& facts) = 0;
  // Never blocks: called on the proxy's loop. kPending until the ticket is
  // decided or past its expiry; a final state is given once.
  virtual HoldState hold_state(const std::string& session, uint64_t ticket) = 0;
  // Calls `wake` once, from any thread, when the ticket may have been
  // decided (at once if it already has); `wake` only posts to the proxy's
  // loop. Expiry is the proxy's own timer. Default: wakes at once (a policy
  // that never holds).
  virtual void watch_hold(uint64_t ticket, std::function<void()> wake) {
    (void)ticket;
    wake();
  }
  // The held request's guest went before the proxy read a final state (its
  // connection closed, its HTTP/2 stream reset, the exchange ended): the
  // ticket is removed and its ask ends with one audited outcome (cancelled
  // by the guest, or the decision or expiry it already had). Never blocks.
  // Default: nothing to cancel (a policy that never holds).
  virtual HoldState cancel_hold(const std::string& session, uint64_t ticket) {
    (void)session;
    (void)ticket;
    return {HoldOutcome::kRefused, "cancelled by the guest"};
  }
  virtual UpstreamAddresses resolve_upstream(const std::string& session, const std::string& host) = 0;
  // nullopt: the rule has no identity, or it changed since the decision.
  virtual std::optional<Injection> injection_for(const std::string& session, const RuleRef& rule) = 0;
  virtual void on_request_done(const RequestSummary& summary) = 0;
  // A tripwire stopped a request (audited secret:canary / secret:misuse).
  // Never blocks: called on the proxy's loop.
  virtual void on_tripwire(const TripwireHit& hit) { (void)hit; }
  virtual void on_closed(const ConnectionSummary& summary) = 0;
  // Answers a request on a local connection. Never blocks: called on the
  // proxy's loop; the work (a store's disk, a query's time budget) runs on
  // the broker's own threads, and `done` is called once, from any thread
  // (it only posts to the proxy's loop). The broker audits it. Default: 404
  // (a policy that serves nothing locally).
  virtual void serve_local(LocalRequest request, std::function<void(LocalResponse)> done) {
    (void)request;
    done(LocalResponse{404, "text/plain", "not found\n"});
  }
};

}  // namespace zn::proxy
