// The narrow interface between the ingress of declared ports and the broker:
// the server reports who connected to which declared port and what admission
// the first request carried; the broker says whether it is admitted and
// where the guest is. The server never sees tickets' state or sessions.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace zn::ingress {

enum class ExposureMode {
  kTicket,  // one request per connection, carrying a ticket or a binding
  kPublic,  // anyone who reaches the listener, any TCP (the operator's choice)
};

struct AdmitFacts {
  std::string session;
  uint16_t port = 0;  // the guest's declared port
  ExposureMode mode = ExposureMode::kTicket;
  sockaddr_storage client{};
  std::optional<std::string> ticket, binding;  // ticket mode: what the request carried
  // Ticket mode: the first request could not be read (malformed, too large,
  // too slow) or carried its admission ambiguously; refused whatever else.
  std::string error;
};

struct AdmitDecision {
  bool allow = false;
  int status = 403;    // when refused
  std::string reason;  // shown to the client; never a ticket
  std::string via;     // "ticket", "binding", "public"
  // Refused 429: when the client may ask again (a Retry-After field).
  std::chrono::seconds retry_after{0};
  // Allowed: connect from `source` (the gateway's address on the session's
  // TAP) to `guest` (its address and the declared port).
  sockaddr_storage source{}, guest{};
  // Allowed by a ticket: the binding to hand the client in a cookie, and
  // how long it (and this connection) may last.
  std::string set_binding;
  std::chrono::seconds binding_ttl{0};
  // When the connection is cut (its ticket's binding or binding expires);
  // the epoch: never (public mode).
  std::chrono::steady_clock::time_point until{};
};

struct ExposureSummary {
  std::string session;
  uint16_t port = 0;
  sockaddr_storage client{};
  std::string via;
  uint64_t bytes_from_client = 0, bytes_to_client = 0;
  // Ticket ports: what the client sent after its one request (a second
  // request, kept alive or pipelined), read and never forwarded.
  uint64_t bytes_dropped = 0;
  std::chrono::milliseconds duration{0};
  std::string end;  // "closed", "guest unreachable", "binding expired", ...
};

// Executor: called on the ingress server's loop; never blocks (in-memory
// lookups under short locks; audit records are posted, never committed in
// the call). Implementations are thread-safe.
class IngressPolicy {
 public:
  virtual ~IngressPolicy() = default;
  // Audits the admission or refusal itself.
  virtual AdmitDecision admit(const AdmitFacts& facts) = 0;
  virtual void on_closed(const ExposureSummary& summary) = 0;
  // Once a second while the server runs: what is gathered over time (the
  // summary of refusals past a client's budget) is written out.
  virtual void tick() {}
};

}  // namespace zn::ingress
