// Resumption of guest-facing TLS sessions (the proxy is the server): a new
// guest connection that presents a session it was given skips the leaf's
// signature and the certificate, the cost that dominates a full handshake.
//
// Two ways, as a guest's TLS stack may use either: stateless tickets (TLS
// 1.3, and TLS 1.2 clients that send the ticket extension), encrypted under
// keys this ring makes and rotates; and TLS 1.2 session ids, kept in
// OpenSSL's server cache, bounded. What a session may be resumed for is
// bound by bind_guest_session: the sandbox session and the name it was made
// for. A guest cannot resume another sandbox's session, nor one for another
// name; a ticket older than two rotations, or made before the process
// started, is not honoured (a full handshake follows, never a failure).
// Early data (0-RTT) stays off: a replayed request would reach the policy
// twice.
#pragma once

#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>

namespace zn::proxy {

struct GuestResumption {
  // A ticket key encrypts new tickets for this long, then only decrypts
  // them (re-issuing a ticket under the current key) for as long again.
  // Sessions, ticket or cached, live as long as one rotation.
  std::chrono::seconds rotation{3600};
  // Sessions the server cache keeps for TLS 1.2 clients without tickets.
  size_t cache_entries = 16384;
};

// The ticket keys of one guest-facing context. Thread-safe: OpenSSL calls
// it from every loop that runs a handshake.
class TicketKeys {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TicketKeys(std::chrono::seconds rotation);
  ~TicketKeys();
  TicketKeys(const TicketKeys&) = delete;
  TicketKeys& operator=(const TicketKeys&) = delete;

  // Makes a new key current now (the current one becomes the previous,
  // the previous is forgotten). Called by the ring itself once a rotation
  // has passed; by tests to see a rotation happen.
  void rotate();

  // OpenSSL's ticket key callback (SSL_CTX_set_tlsext_ticket_key_evp_cb):
  // enc = 1 encrypts a new ticket under the current key; enc = 0 finds the
  // key named by a ticket: 1 (current), 2 (previous: re-issue), 0 (unknown
  // or expired: a full handshake).
  int on_ticket(unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH], EVP_CIPHER_CTX* cipher,
                EVP_MAC_CTX* mac, int enc);

 private:
  struct Key {
    std::array<unsigned char, 16> name{};
    std::array<unsigned char, 32> aes{};
    std::array<unsigned char, 32> hmac{};
    Clock::time_point made{};
    bool valid = false;
  };
  void rotate_locked(Clock::time_point now);

  const std::chrono::seconds rotation_;
  std::mutex mu_;
  Key current_;
  Key previous_;
};

// Turns resumption on for a guest-facing server context: the ring (owned by
// the context, freed with it), the server cache, one ticket per handshake,
// no early data. Throws std::runtime_error.
void enable_guest_resumption(SSL_CTX* ctx, const GuestResumption& settings = {});

// The ring of a context enable_guest_resumption set up; nullptr otherwise.
TicketKeys* ticket_keys_of(SSL_CTX* ctx);

// Before the handshake of one guest connection: its sessions resume only on
// a connection of the same sandbox `session` for the same `host` (the SNI
// the decision was made for). Without it a resumption is refused.
void bind_guest_session(SSL* ssl, std::string_view session, std::string_view host);

}  // namespace zn::proxy
