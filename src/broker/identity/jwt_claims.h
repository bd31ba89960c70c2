// The minted identity's format, shared by the minter and the verifier.
//
//   header  {"alg":"EdDSA","kid":<JWK thumbprint of the key>,"typ":"JWT"}
//   claims  {"iss": the issuer (zerod),          "sub": the session id,
//            "aud": the upstream host (one string, never an array),
//            "zn_method": the request's method,  "zn_path": its normalised path,
//            "iat", "nbf" (= iat), "exp" (NumericDate seconds),
//            "jti": 128 random bits, base64url}
//
// The binding claims are private names (RFC 7519 section 4.3) with our
// prefix rather than DPoP's "htm"/"htu" (RFC 9449): DPoP's "htu" is the whole
// URI of a proof made by a key the client holds, ours is a bearer token whose
// host is already "aud" and whose path is the proxy's normalised path (no
// query: the policy matches paths, and the query is the guest's). Reusing
// DPoP's names with another meaning would let a DPoP-aware receiver misread
// them; the prefix says whose claims these are.
#pragma once

#include <string_view>

namespace zn::broker::jwt_claims {

inline constexpr std::string_view kAlgorithm = "EdDSA";
inline constexpr std::string_view kType = "JWT";

inline constexpr const char* kIssuer = "iss";
inline constexpr const char* kSubject = "sub";
inline constexpr const char* kAudience = "aud";
inline constexpr const char* kMethod = "zn_method";
inline constexpr const char* kPath = "zn_path";
inline constexpr const char* kIssuedAt = "iat";
inline constexpr const char* kNotBefore = "nbf";
inline constexpr const char* kExpiry = "exp";
inline constexpr const char* kTokenId = "jti";

}  // namespace zn::broker::jwt_claims
