#include "broker/exposure/ticket_book.h"

#include <sodium.h>

#include <stdexcept>

#include "broker/session/random_token.h"

namespace zn::broker {
namespace {

// 32 base32 characters: 160 bits.
constexpr size_t kTokenChars = 32;
constexpr std::string_view kTicketPrefix = "znt_";
constexpr std::string_view kBindingPrefix = "znb_";
constexpr std::chrono::seconds kPruneEvery{5};
// How long an expired ticket or binding is still known as expired (rather
// than unknown) for the audit's reasons; then it goes.
constexpr std::chrono::minutes kRememberExpired{10};

std::string digest(const std::string& token) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(token.data()), token.size());
  char hex[sizeof(h) * 2 + 1];
  sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
  return hex;
}

}  // namespace

std::string_view ticket_verdict_name(TicketVerdict v) {
  switch (v) {
    case TicketVerdict::kOk:
      return "ok";
    case TicketVerdict::kUnknown:
      return "unknown_ticket";
    case TicketVerdict::kUsed:
      return "ticket_used";
    case TicketVerdict::kExpired:
      return "ticket_expired";
    case TicketVerdict::kWrongPort:
      return "ticket_wrong_port";
  }
  return "unknown_ticket";
}

TicketBook::TicketBook() : TicketBook(Limits{}, [] { return std::chrono::steady_clock::now(); }) {}

TicketBook::TicketBook(Limits limits, Clock clock) : limits_(limits), clock_(std::move(clock)) {
  if (sodium_init() < 0) throw std::runtime_error("libsodium did not initialise");
}

void TicketBook::prune_locked(std::chrono::steady_clock::time_point now) {
  if (now - last_prune_ < kPruneEvery) return;
  last_prune_ = now;
  // A used or expired ticket is kept a while, so a replay or a late use is
  // told apart from a guess in the audit; then it reads as unknown.
  std::erase_if(tickets_, [&](const auto& kv) { return kv.second.expires + kRememberExpired <= now; });
  std::erase_if(bindings_, [&](const auto& kv) { return kv.second.expires + kRememberExpired <= now; });
}

MintedTicket TicketBook::mint(const std::string& session, uint16_t port, std::chrono::seconds ttl) {
  const auto now = clock_();
  std::string token = random_token(kTicketPrefix, kTokenChars);
  std::lock_guard lock(mu_);
  last_prune_ = {};
  prune_locked(now);
  size_t mine = 0;
  for (const auto& [h, t] : tickets_)
    if (t.session == session && t.expires > now) ++mine;
  if (mine >= limits_.max_outstanding_per_session)
    throw std::runtime_error("session '" + session + "' has " + std::to_string(mine) +
                             " outstanding tickets (the most allowed)");
  tickets_[digest(token)] = Ticket{session, port, now + ttl, false};
  return MintedTicket{std::move(token), std::chrono::system_clock::now() + ttl};
}

TicketVerdict TicketBook::redeem(const std::string& session, uint16_t port, const std::string& ticket) {
  const auto now = clock_();
  const std::string h = digest(ticket);
  std::lock_guard lock(mu_);
  prune_locked(now);
  auto it = tickets_.find(h);
  // Another session's ticket reads as one never minted: nothing about other
  // tenants is learnt by trying theirs.
  if (it == tickets_.end() || it->second.session != session) return TicketVerdict::kUnknown;
  if (it->second.expires <= now) return TicketVerdict::kExpired;
  if (it->second.used) return TicketVerdict::kUsed;
  it->second.used = true;
  return it->second.port == port ? TicketVerdict::kOk : TicketVerdict::kWrongPort;
}

std::string TicketBook::bind(const std::string& session, uint16_t port, const std::string& client,
                             std::chrono::seconds ttl) {
  const auto now = clock_();
  std::string token = random_token(kBindingPrefix, kTokenChars);
  std::lock_guard lock(mu_);
  prune_locked(now);
  size_t mine = 0;
  for (const auto& [h, b] : bindings_)
    if (b.session == session && b.expires > now) ++mine;
  // The oldest goes first: a client that lost its cookie gets a new ticket.
  if (mine >= limits_.max_bindings_per_session) {
    auto oldest = bindings_.end();
    for (auto it = bindings_.begin(); it != bindings_.end(); ++it)
      if (it->second.session == session && it->second.expires > now &&
          (oldest == bindings_.end() || it->second.expires < oldest->second.expires))
        oldest = it;
    if (oldest != bindings_.end()) bindings_.erase(oldest);
  }
  bindings_[digest(token)] = Binding{session, port, client, now + ttl};
  return token;
}

TicketBook::BindingVerdict TicketBook::check_binding(const std::string& session, uint16_t port,
                                                     const std::string& binding, const std::string& client,
                                                     std::chrono::steady_clock::time_point* until) {
  const auto now = clock_();
  const std::string h = digest(binding);
  std::lock_guard lock(mu_);
  prune_locked(now);
  auto it = bindings_.find(h);
  if (it == bindings_.end() || it->second.session != session || it->second.port != port)
    return BindingVerdict::kUnknown;
  if (it->second.expires <= now) return BindingVerdict::kExpired;
  if (it->second.client != client) return BindingVerdict::kOtherClient;
  if (until) *until = it->second.expires;
  return BindingVerdict::kOk;
}

void TicketBook::forget(const std::string& session, uint16_t port) {
  std::lock_guard lock(mu_);
  std::erase_if(tickets_,
                [&](const auto& kv) { return kv.second.session == session && kv.second.port == port; });
  std::erase_if(bindings_,
                [&](const auto& kv) { return kv.second.session == session && kv.second.port == port; });
}

void TicketBook::forget_session(const std::string& session) {
  std::lock_guard lock(mu_);
  std::erase_if(tickets_, [&](const auto& kv) { return kv.second.session == session; });
  std::erase_if(bindings_, [&](const auto& kv) { return kv.second.session == session; });
}

size_t TicketBook::outstanding(const std::string& session) const {
  const auto now = clock_();
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [h, t] : tickets_)
    if (t.session == session && !t.used && t.expires > now) ++n;
  return n;
}

}  // namespace zn::broker
