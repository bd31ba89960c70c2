// The request path as a chain of small filters (issue 31; Envoy's decoder
// filters, made smaller). A filter has one job, reads and writes one request
// model and its connection's state, and says what happens next: go on,
// refuse the request, or stop until the exchange has done some I/O for it
// (the body's first bytes, a human's approval), after which the chain runs
// that filter again. Filters never touch a socket or wait: everything they
// do is testable with a fake broker and no network (tests/userspace/proxy/
// filters/). The order is declared once, in chain.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/http/content_coding.h"
#include "userspace/http/injection.h"
#include "userspace/http/message.h"
#include "userspace/http/target.h"
#include "userspace/proxy/counters.h"
#include "userspace/proxy/policy.h"
#include "userspace/proxy/request_screen.h"
#include "userspace/proxy/secret_scrubber.h"

namespace zn::proxy::filters {

// One request as the filters see it: its head as parsed and as sent, what
// the filters found out about it, and the audit record being built.
struct Request {
  const http::RequestHead& head;
  // The connection's input, which starts with the head's bytes as the guest
  // sent them (request line and fields; head_bytes long). The tripwire
  // screen reads these, whatever the parser made of them. A reference, not
  // a view: the exchange appends to the input while a filter waits.
  const std::string& input;
  size_t head_bytes = 0;
  std::string_view raw_head() const { return std::string_view(input).substr(0, head_bytes); }
  // Set by the target filter (absent on a local connection whose target
  // did not normalise: the broker's own service reads it itself).
  std::optional<http::NormalisedTarget> target;
  bool websocket = false;  // a WebSocket handshake a rule must allow
  // The first bytes of the body, for the broker (an approver sees them).
  // Asked for by the decision filter (FilterResult::kNeedPreview).
  std::optional<std::string> body_preview;
  // The broker's answer (the decision filter), wiped when the request ends.
  RequestDecision decision;
  bool decided = false;
  // A held request's outcome, once the exchange has waited for it.
  std::optional<HoldState> hold;
  RequestSummary& summary;  // the audit record (the proxy's part of it)

  // The body read ahead of the head's forwarding (asked for with
  // FilterResult::kNeedBody, up to body_limit decoded bytes): body_whole
  // when all of it came within the limit; otherwise the rest streams behind
  // it (screened as it goes).
  size_t body_limit = 0;
  bool body_read = false;
  bool body_whole = false;
  std::string body;
  // A body with a content coding as the upstream will read it (decoded by
  // the body screen, swapped in by the body swap).
  std::optional<http::DecodedBody> decoded_body;

  // What the rule injects (the identity filter): given with the verdict, or
  // fetched once a held request is approved.
  std::optional<Injection> injection;
  // The head and target as they go upstream where they differ from the
  // guest's (placeholders swapped, a body read whole framed by its length).
  std::optional<http::RequestHead> changed_head;
  std::optional<http::NormalisedTarget> changed_target;
  const http::RequestHead& send_head() const { return changed_head ? *changed_head : head; }
  const http::NormalisedTarget& send_target() const { return changed_target ? *changed_target : *target; }
  // The head as it goes, copied from the guest's on first use.
  http::RequestHead& head_to_change() {
    if (!changed_head) changed_head = head;
    return *changed_head;
  }

  Request(const http::RequestHead& h, const std::string& in, size_t head_length, RequestSummary& s)
      : head(h), input(in), head_bytes(head_length), summary(s) {}
  // Wipes every credential the request came to hold (the decision's, the
  // injection, swapped copies, the body), however the request ends.
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
};

// What one guest connection carries from request to request, and what the
// filters may use of the proxy.
struct Connection {
  const UpstreamDecision& facts;  // session, the SNI (or address), port, tls, local
  ProxyPolicy& policy;
  InterceptCounters& counters;
  // Responses are scrubbed of every secret the connection was given (armed
  // at its first injection or its first allowed request).
  SecretScrubber& scrubber;
  // The session's tripwires, armed at the connection's first request.
  RequestScreen& screen;
  bool session_secrets_loaded = false;
  bool tripwires_loaded = false;
  bool screen_blind = false;  // a tripwire could not be armed: every request is refused

  Connection(const UpstreamDecision& f, ProxyPolicy& p, InterceptCounters& c, SecretScrubber& sc,
             RequestScreen& rs)
      : facts(f), policy(p), counters(c), scrubber(sc), screen(rs) {}
};

// The alarm for tripwires (`labels`) found in `where` of this request
// (secret:canary, secret:misuse): headed for the broker's host, or the
// connection's own where the broker named none.
inline TripwireHit tripwire_alarm(const Request& request, const Connection& connection,
                                  std::vector<std::string> labels, std::vector<std::string> where) {
  const std::string& host = request.decision.host.empty() ? connection.facts.host : request.decision.host;
  return TripwireHit{connection.facts.session, host,
                     request.head.method,      request.target->path,
                     std::move(labels),        std::move(where)};
}

// The proxy's answer to a request it does not forward; the connection ends
// with it (nothing pipelined behind a refused request is read as one).
struct Refusal {
  int status = 403;
  std::string body;  // shown to the guest; never a secret
};

// The answer to a request that carried a credential that may not go where
// it was headed (a tripwire in its head or body).
inline constexpr std::string_view kTripwireRefusalBody =
    "zeroness: blocked by policy (a credential that may not go here)\n";

struct FilterResult {
  enum class Kind {
    kContinue,      // the next filter
    kRefuse,        // answer `refusal`, end the connection
    kServeLocally,  // the broker's own service answers (no upstream)
    kNeedPreview,   // read the body's first bytes into Request::body_preview, run again
    kHold,          // wait for Request::decision.hold_ticket's outcome into Request::hold, run again
    kNeedBody,      // read the body into Request::body (up to body_limit), set body_read, run again
  };
  Kind kind = Kind::kContinue;
  Refusal refusal;
  // Non-empty: the proxy audits the refusal itself with this error (the
  // broker never saw the request); empty: the broker already audited it.
  std::string audit_error;
  // A credential that may not go here was seen: the alarm, raised whatever
  // the verdict (secret:canary).
  std::optional<TripwireHit> alarm;

  static FilterResult go() { return {}; }
  static FilterResult of(Kind k) {
    FilterResult r;
    r.kind = k;
    return r;
  }
  // Refused by the broker (it audited the request).
  static FilterResult refused(int status, std::string body) {
    FilterResult r;
    r.kind = Kind::kRefuse;
    r.refusal = Refusal{status, std::move(body)};
    return r;
  }
  // Refused before the broker saw it: audited by the proxy with `error`.
  static FilterResult refused_here(int status, std::string body, std::string error) {
    FilterResult r = refused(status, std::move(body));
    r.audit_error = std::move(error);
    return r;
  }
};

// A filter of the request's head (everything decided before a byte goes
// upstream). Filters keep no state of their own (it is in the Request and
// the Connection), so one chain serves every connection on every thread.
class HeadFilter {
 public:
  virtual ~HeadFilter() = default;
  virtual std::string_view name() const = 0;
  virtual FilterResult on_head(Request& request, Connection& connection) const = 0;
};

}  // namespace zn::proxy::filters
