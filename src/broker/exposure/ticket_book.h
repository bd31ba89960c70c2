// One-time tickets for declared ports, and the bindings they turn into
// (issue 14). A ticket admits one request to one (session, port) before it
// expires, once; redeeming it binds that client (its address and a fresh
// cookie) for a bounded time. Only hashes are kept (SHA-256 of the token),
// in memory: a zerod restart ends every ticket and binding (fail closed).
// Thread-safe; every call is an in-memory lookup under a short lock, so the
// ingress loop may call it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace zn::broker {

struct MintedTicket {
  std::string ticket;  // shown once to the operator; never stored or logged
  std::chrono::system_clock::time_point expires;
};

enum class TicketVerdict {
  kOk,
  kUnknown,  // never minted (or long gone), malformed, another tenant's
  kUsed,     // redeemed before: a replay
  kExpired,
  kWrongPort,  // minted for another port of the same session
};
std::string_view ticket_verdict_name(TicketVerdict);

class TicketBook {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  struct Limits {
    // Unexpired, used or not (a used one stays until its expiry so a replay
    // is known as one).
    size_t max_outstanding_per_session = 1024;
    size_t max_bindings_per_session = 4096;
  };
  TicketBook();
  TicketBook(Limits limits, Clock clock);

  // Throws std::runtime_error when the session has too many outstanding.
  MintedTicket mint(const std::string& session, uint16_t port, std::chrono::seconds ttl);
  // Consumes the ticket on kOk (and on a wrong port: a ticket is tried once).
  TicketVerdict redeem(const std::string& session, uint16_t port, const std::string& ticket);
  // A fresh binding for `client` (an address, no port), valid for `ttl`.
  std::string bind(const std::string& session, uint16_t port, const std::string& client,
                   std::chrono::seconds ttl);
  enum class BindingVerdict { kOk, kUnknown, kExpired, kOtherClient };
  // kOk: the binding's expiry in *until.
  BindingVerdict check_binding(const std::string& session, uint16_t port, const std::string& binding,
                               const std::string& client, std::chrono::steady_clock::time_point* until);
  // Everything of a port (unexposed) or a session (deleted).
  void forget(const std::string& session, uint16_t port);
  void forget_session(const std::string& session);
  size_t outstanding(const std::string& session) const;

 private:
  struct Ticket {
    std::string session;
    uint16_t port = 0;
    std::chrono::steady_clock::time_point expires;
    bool used = false;
  };
  struct Binding {
    std::string session;
    uint16_t port = 0;
    std::string client;
    std::chrono::steady_clock::time_point expires;
  };
  void prune_locked(std::chrono::steady_clock::time_point now);

  Limits limits_;
  Clock clock_;
  mutable std::mutex mu_;
  std::map<std::string, Ticket> tickets_;    // by SHA-256 of the token (hex)
  std::map<std::string, Binding> bindings_;  // by SHA-256 of the token (hex)
  std::chrono::steady_clock::time_point last_prune_{};
};

}  // namespace zn::broker
