// One Ed25519 signing key: the secret half in guarded pages (GuardedBytes:
// never in ordinary memory, never printed, wiped when the last holder drops
// it), the public half and its kid in the open.
//
// Making one (generate) is key generation: a control-plane step, never done
// on the minting path. Signing reads the guarded pages for one call (two
// mprotects, ~1 us) and may run on any thread at once.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "broker/identity/jwk.h"
#include "broker/secrets/guarded_bytes.h"

namespace zn::broker {

class SigningKey {
 public:
  static constexpr std::size_t kSeedSize = 32;       // crypto_sign_SEEDBYTES
  static constexpr std::size_t kSignatureSize = 64;  // crypto_sign_BYTES
  using Signature = std::array<unsigned char, kSignatureSize>;

  // A new key from the kernel's CSPRNG. Throws std::runtime_error only if
  // libsodium cannot start or guarded pages cannot be had.
  static std::shared_ptr<const SigningKey> generate();

  // The key derived from a 32-byte seed (RFC 8032's private key), for
  // known-answer tests; throws std::invalid_argument on another size. The
  // caller's copy of the seed is the caller's to wipe.
  static std::shared_ptr<const SigningKey> from_seed(std::span<const unsigned char> seed);

  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  const Ed25519PublicKey& public_key() const { return public_key_; }
  // The JWK thumbprint of the public key (jwk.h).
  const std::string& kid() const { return kid_; }
  // The public JWK, for a JWKS.
  nlohmann::json jwk() const { return ed25519_jwk(public_key_, kid_); }

  // The detached Ed25519 signature of message. Any thread.
  Signature sign(std::string_view message) const;

 private:
  SigningKey(std::unique_ptr<const GuardedBytes> secret, const Ed25519PublicKey& public_key);
  // Runs make(public_key, secret_key) with the secret key's guarded pages
  // writable, so the secret never exists in ordinary memory.
  template <class Make>
  static std::shared_ptr<const SigningKey> make(Make&& make_pair);

  // libsodium's 64-byte secret key: the seed followed by the public key.
  std::unique_ptr<const GuardedBytes> secret_;
  Ed25519PublicKey public_key_;
  std::string kid_;
};

}  // namespace zn::broker
