// Checks a minted identity the way its receiver would (an upstream, the
// lab's stand-in, the tests): the signature against a published JWKS, then
// that the token is zerod's, for this host, this method and this path, and
// live now. The format is in jwt_claims.h.
//
// The algorithm is fixed, not read from the token: a header whose "alg" is
// anything but "EdDSA" ("none", "HS256" keyed with the public key, ...) is
// refused before any key is looked at, so the token cannot choose how it is
// checked. The key comes only from the JWKS by "kid"; keys a token offers
// ("jwk", "jku", "x5u", "x5c") are never used, and "crit" is refused (no
// extension is understood).
//
// Errors are values: verify_jwt never throws on bad input and never puts the
// token, or the signature, in a message; it quotes claim and header values
// cut short, with anything unprintable as '?'.
#pragma once

#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace zn::broker {

enum class VerifyError {
  kNone,
  kMalformed,            // not three base64url parts, or too long
  kBadHeader,            // not a JSON object, no "kid", "typ" not "JWT", "crit"
  kAlgorithmNotAllowed,  // "alg" is not exactly "EdDSA"
  kUnknownKid,           // no key in the JWKS has the header's kid
  kBadKey,               // the JWKS is malformed or the kid's key is not an Ed25519 key for EdDSA
  kBadSignature,         // not 64 bytes, or does not verify
  kBadClaims,            // not a JSON object; "sub", "jti", "iat" or "exp" missing or mistyped
  kWrongIssuer,
  kWrongAudience,
  kWrongMethod,
  kWrongPath,
  kNotYetValid,      // "iat" or "nbf" later than now + leeway
  kExpired,          // "exp" is not after now
  kLifetimeTooLong,  // "exp" - "iat" longer than the expectation allows
};

std::string_view to_string(VerifyError);

// What the receiver expects: every field must match exactly.
struct JwtExpectation {
  std::string issuer;    // zerod's issuer name
  std::string audience;  // this receiver's host
  std::string method;    // the request's method
  std::string path;      // the request's normalised path (no query)
  // The longest exp - iat accepted; a token minted for longer is refused
  // even while live, so a misconfigured or stolen key cannot make
  // long-lived tokens this receiver honours.
  std::chrono::seconds max_lifetime{60};
  // How far the receiver's clock may lag zerod's: iat and nbf may be this
  // much in the future. It does not stretch exp: a token ends at its exp
  // on the receiver's clock.
  std::chrono::seconds leeway{5};
};

struct VerifyResult {
  VerifyError error = VerifyError::kNone;
  std::string message;    // why, when not ok()
  nlohmann::json claims;  // the verified claims, set exactly when ok()
  bool ok() const { return error == VerifyError::kNone; }
};

// The longest token accepted: a minted one is about 500 bytes; the bound
// keeps a hostile one from costing more than a page of decoding.
inline constexpr std::size_t kMaxTokenSize = 8192;

// Verifies token against jwks ({"keys":[...]}, as JwtMinter::jwks()) at now.
// Any thread.
VerifyResult verify_jwt(std::string_view token, const nlohmann::json& jwks, const JwtExpectation& expect,
                        std::chrono::system_clock::time_point now);

}  // namespace zn::broker
