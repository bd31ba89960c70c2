#include "broker/identity/signing_key.h"

#include <sodium.h>

#include <stdexcept>

namespace zn::broker {
namespace {

static_assert(SigningKey::kSeedSize == crypto_sign_SEEDBYTES);
static_assert(SigningKey::kSignatureSize == crypto_sign_BYTES);

}  // namespace

SigningKey::SigningKey(std::unique_ptr<const GuardedBytes> secret, const Ed25519PublicKey& public_key)
    : secret_(std::move(secret)), public_key_(public_key), kid_(jwk_thumbprint(public_key)) {}

// GuardedBytes starts libsodium before the fill runs.
template <class Make>
std::shared_ptr<const SigningKey> SigningKey::make(Make&& make_pair) {
  Ed25519PublicKey public_key{};
  auto secret = std::make_unique<const GuardedBytes>(
      crypto_sign_SECRETKEYBYTES, GuardedBytes::Fill{},
      [&](std::span<unsigned char> out) { make_pair(public_key.data(), out.data()); });
  return std::shared_ptr<const SigningKey>(new SigningKey(std::move(secret), public_key));
}

std::shared_ptr<const SigningKey> SigningKey::generate() {
  return make([](unsigned char* pk, unsigned char* sk) { crypto_sign_keypair(pk, sk); });
}

std::shared_ptr<const SigningKey> SigningKey::from_seed(std::span<const unsigned char> seed) {
  if (seed.size() != kSeedSize)
    throw std::invalid_argument("an Ed25519 seed is " + std::to_string(kSeedSize) + " bytes, not " +
                                std::to_string(seed.size()));
  return make([&](unsigned char* pk, unsigned char* sk) { crypto_sign_seed_keypair(pk, sk, seed.data()); });
}

SigningKey::Signature SigningKey::sign(std::string_view message) const {
  Signature signature{};
  secret_->with_bytes([&](std::span<const unsigned char> sk) {
    // Cannot fail for a well-formed secret key, which ours always is.
    crypto_sign_detached(signature.data(), nullptr, reinterpret_cast<const unsigned char*>(message.data()),
                         message.size(), sk.data());
  });
  return signature;
}

}  // namespace zn::broker
