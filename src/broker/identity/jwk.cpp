#include "broker/identity/jwk.h"

#include <sodium.h>

#include <cstring>
#include <optional>

#include "broker/identity/base64url.h"

namespace zn::broker {
namespace {

static_assert(kEd25519PublicKeySize == crypto_sign_PUBLICKEYBYTES);

// Whether member `name` of the object jwk is absent or the string `value`:
// optional JWK members that, when present, must say what we expect.
bool absent_or(const nlohmann::json& jwk, const char* name, std::string_view value) {
  auto it = jwk.find(name);
  return it == jwk.end() || (it->is_string() && it->get_ref<const std::string&>() == value);
}

bool is_string_member(const nlohmann::json& jwk, const char* name, std::string_view value) {
  auto it = jwk.find(name);
  return it != jwk.end() && it->is_string() && it->get_ref<const std::string&>() == value;
}

}  // namespace

std::string jwk_thumbprint(const Ed25519PublicKey& public_key) {
  // RFC 7638 section 3.2: the required members only, sorted, no whitespace.
  const std::string canonical =
      R"({"crv":"Ed25519","kty":"OKP","x":")" + base64url_encode(public_key) + R"("})";
  std::array<unsigned char, crypto_hash_sha256_BYTES> digest{};
  crypto_hash_sha256(digest.data(), reinterpret_cast<const unsigned char*>(canonical.data()),
                     canonical.size());
  return base64url_encode(digest);
}

nlohmann::json ed25519_jwk(const Ed25519PublicKey& public_key, std::string_view kid) {
  return nlohmann::json{{"kty", "OKP"}, {"crv", "Ed25519"}, {"x", base64url_encode(public_key)},
                        {"kid", kid},   {"alg", "EdDSA"},   {"use", "sig"}};
}

KeyLookup find_ed25519_key(const nlohmann::json& jwks, std::string_view kid) {
  // find() on a value that is not an object answers end(): no throw.
  auto keys = jwks.find("keys");
  if (keys == jwks.end() || !keys->is_array())
    return {{}, KeyLookupError::kMalformedKeySet, "the key set has no \"keys\" array"};
  for (const auto& jwk : *keys) {
    if (!jwk.is_object() || !is_string_member(jwk, "kid", kid)) continue;
    // The first key with the kid decides: a second one with the same kid
    // is never tried, so which key verifies does not depend on the token.
    if (!is_string_member(jwk, "kty", "OKP") || !is_string_member(jwk, "crv", "Ed25519") ||
        !absent_or(jwk, "alg", "EdDSA") || !absent_or(jwk, "use", "sig"))
      return {{}, KeyLookupError::kUnusableKey, "the key is not an Ed25519 key for EdDSA signatures"};
    auto x = jwk.find("x");
    std::optional<std::string> bytes;
    if (x != jwk.end() && x->is_string()) bytes = base64url_decode(x->get_ref<const std::string&>());
    if (!bytes || bytes->size() != kEd25519PublicKeySize)
      return {{}, KeyLookupError::kUnusableKey, "the key has no 32-byte \"x\""};
    KeyLookup found;
    std::memcpy(found.public_key.data(), bytes->data(), found.public_key.size());
    return found;
  }
  return {{}, KeyLookupError::kUnknownKid, "no key with this kid in the key set"};
}

}  // namespace zn::broker
