#include "userspace/tls/ticket_keys.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace zn::proxy {
namespace {

// The context's ring, freed with the context.
void free_ring(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<TicketKeys*>(ptr); }

int ring_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, free_ring);
  return index;
}

int ticket_callback(SSL* ssl, unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH],
                    EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int enc) {
  TicketKeys* ring = ticket_keys_of(SSL_get_SSL_CTX(ssl));
  if (!ring) return -1;
  const int r = ring->on_ticket(name, iv, cipher, mac, enc);
  // TLS 1.3: a fresh ticket after every resumption, whatever the key. A
  // ticket is then used once (RFC 8446 C.4: a reused ticket links the
  // guest's connections), and the ticket is the flight that acknowledges
  // the guest's Finished at once; without it a client with Nagle on waited
  // for the kernel's delayed ACK before sending its request (~40 ms).
  if (enc == 0 && r == 1 && SSL_version(ssl) >= TLS1_3_VERSION) return 2;
  return r;
}

// The HMAC of a ticket: SHA-256 under the key's own MAC key.
bool init_mac(EVP_MAC_CTX* mac, const std::array<unsigned char, 32>& key) {
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  return EVP_MAC_init(mac, key.data(), key.size(), params) == 1;
}

}  // namespace

TicketKeys::TicketKeys(std::chrono::seconds rotation) : rotation_(rotation) {
  if (rotation_.count() <= 0) throw std::invalid_argument("ticket key rotation must be positive");
  const std::lock_guard lock(mu_);
  rotate_locked(Clock::now());
}

TicketKeys::~TicketKeys() {
  OPENSSL_cleanse(&current_, sizeof current_);
  OPENSSL_cleanse(&previous_, sizeof previous_);
}

void TicketKeys::rotate() {
  const std::lock_guard lock(mu_);
  rotate_locked(Clock::now());
}

void TicketKeys::rotate_locked(Clock::time_point now) {
  Key next;
  // OpenSSL's DRBG: user space, never blocks once seeded (it was, to make
  // the deployment CA's leaves). Should it fail, the new current key is an
  // invalid one: no ticket is issued until a rotation succeeds, and the old
  // keys age out (full handshakes, never a weak key).
  next.valid = RAND_bytes(next.name.data(), static_cast<int>(next.name.size())) == 1 &&
               RAND_bytes(next.aes.data(), static_cast<int>(next.aes.size())) == 1 &&
               RAND_bytes(next.hmac.data(), static_cast<int>(next.hmac.size())) == 1;
  if (!next.valid) ERR_clear_error();
  next.made = now;
  OPENSSL_cleanse(&previous_, sizeof previous_);
  previous_ = current_;
  current_ = next.valid ? next : Key{};
  OPENSSL_cleanse(&next, sizeof next);
}

int TicketKeys::on_ticket(unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH], EVP_CIPHER_CTX* cipher,
                          EVP_MAC_CTX* mac, int enc) {
  const Clock::time_point now = Clock::now();
  const std::lock_guard lock(mu_);
  if (!current_.valid || now - current_.made >= rotation_) rotate_locked(now);
  if (enc == 1) {
    if (!current_.valid) return 0;  // no ticket this time
    if (RAND_bytes(iv, 16) != 1) {
      ERR_clear_error();
      return 0;
    }
    std::memcpy(name, current_.name.data(), current_.name.size());
    if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, current_.aes.data(), iv) != 1 ||
        !init_mac(mac, current_.hmac))
      return -1;
    return 1;
  }
  for (const Key* key : {&current_, &previous_}) {
    if (!key->valid || std::memcmp(name, key->name.data(), key->name.size()) != 0) continue;
    // The previous key decrypts for one rotation after it stopped
    // encrypting, no longer.
    if (key == &previous_ && now - key->made >= 2 * rotation_) return 0;
    if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key->aes.data(), iv) != 1 ||
        !init_mac(mac, key->hmac))
      return -1;
    return key == &current_ ? 1 : 2;
  }
  return 0;
}

void enable_guest_resumption(SSL_CTX* ctx, const GuestResumption& settings) {
  auto ring = std::make_unique<TicketKeys>(settings.rotation);
  if (SSL_CTX_set_ex_data(ctx, ring_index(), ring.get()) != 1)
    throw std::runtime_error("tls: attaching the ticket keys");
  ring.release();  // the context frees it (free_ring)
  SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
  if (SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_callback) != 1)
    throw std::runtime_error("tls: ticket key callback");
  SSL_CTX_set_num_tickets(ctx, 1);
  SSL_CTX_set_max_early_data(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  SSL_CTX_sess_set_cache_size(ctx, static_cast<long>(settings.cache_entries));
  SSL_CTX_set_timeout(ctx, static_cast<long>(settings.rotation.count()));
}

TicketKeys* ticket_keys_of(SSL_CTX* ctx) {
  return static_cast<TicketKeys*>(SSL_CTX_get_ex_data(ctx, ring_index()));
}

void bind_guest_session(SSL* ssl, std::string_view session, std::string_view host) {
  // The context a session is resumed in: SHA-256 of both, each ended by a
  // NUL (neither holds one), so ("ab","c") and ("a","bc") differ.
  static constexpr std::string_view kDomain = "zeroness/guest-tls-session/v1";
  std::string bound;
  bound.reserve(kDomain.size() + session.size() + host.size() + 3);
  bound.append(kDomain).push_back('\0');
  bound.append(session).push_back('\0');
  bound.append(host).push_back('\0');
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  static_assert(32 <= SSL_MAX_SID_CTX_LENGTH);
  if (EVP_Digest(bound.data(), bound.size(), digest, &length, EVP_sha256(), nullptr) != 1 || length != 32 ||
      SSL_set_session_id_context(ssl, digest, length) != 1) {
    ERR_clear_error();
    throw std::runtime_error("tls: binding the session context");
  }
}

}  // namespace zn::proxy
