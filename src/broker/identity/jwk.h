// Ed25519 public keys as JWKs (RFC 7517, "OKP" keys of RFC 8037) and key
// sets: what zerod publishes and what a verifier reads back.
//
// A key's id is its JWK thumbprint (RFC 7638: SHA-256 of the canonical
// {"crv","kty","x"} members, base64url): derived from the public key alone,
// so it is stable across restarts and publications, needs no counter, and any
// receiver can recompute it to check a published kid names its key.
#pragma once

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace zn::broker {

inline constexpr std::size_t kEd25519PublicKeySize = 32;
using Ed25519PublicKey = std::array<unsigned char, kEd25519PublicKeySize>;

// The RFC 7638 thumbprint of the Ed25519 key: 43 base64url characters.
std::string jwk_thumbprint(const Ed25519PublicKey& public_key);

// {"kty":"OKP","crv":"Ed25519","x":...,"kid":kid,"alg":"EdDSA","use":"sig"}:
// public members only. "alg" and "use" pin the key to EdDSA signatures, so
// a verifier that honours them cannot be talked into another algorithm.
nlohmann::json ed25519_jwk(const Ed25519PublicKey& public_key, std::string_view kid);

enum class KeyLookupError {
  kNone,
  kMalformedKeySet,  // not {"keys":[...]}
  kUnknownKid,       // no key has the kid
  kUnusableKey,      // the key with the kid is not an Ed25519 key for EdDSA signatures
};

struct KeyLookup {
  Ed25519PublicKey public_key{};  // meaningful exactly when ok()
  KeyLookupError error = KeyLookupError::kNone;
  std::string message;  // why, when not ok(); never key material, never the kid (the caller names it)
  bool ok() const { return error == KeyLookupError::kNone; }
};

// The Ed25519 public key whose "kid" is kid in a JWKS ({"keys":[...]}). A key
// with that kid but another kty or crv, an "alg" other than "EdDSA", a "use"
// other than "sig", or an "x" that is not 32 bytes is unusable, not skipped.
// Never throws on bad input.
KeyLookup find_ed25519_key(const nlohmann::json& jwks, std::string_view kid);

}  // namespace zn::broker
