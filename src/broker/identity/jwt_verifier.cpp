#include "broker/identity/jwt_verifier.h"

#include <sodium.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

#include "broker/identity/base64url.h"
#include "broker/identity/jwk.h"
#include "broker/identity/jwt_claims.h"

namespace zn::broker {
namespace {

VerifyResult failure(VerifyError error, std::string message) { return {error, std::move(message), {}}; }

// A value from the token, fit to quote in a message: cut short, anything
// unprintable as '?'. Claims and header values are not the credential (the
// signature is); the token itself is never quoted.
std::string quote_value(std::string_view s) {
  constexpr std::size_t kMax = 64;
  std::string out(s.substr(0, kMax));
  std::replace_if(
      out.begin(), out.end(), [](char c) { return c < 0x20 || c > 0x7e; }, '?');
  return "\"" + out + (s.size() > kMax ? "...\"" : "\"");
}

// A JSON value as it may be quoted: strings as themselves, anything else by
// its type, so a message never dumps an attacker's whole object.
std::string quote_json(const nlohmann::json& v) {
  return v.is_string() ? quote_value(v.get_ref<const std::string&>()) : std::string("a ") + v.type_name();
}

// Decodes a base64url part and parses it as a JSON object; nullopt if it is
// not one. Never throws (parse with allow_exceptions = false).
std::optional<nlohmann::json> decode_object(std::string_view part) {
  auto bytes = base64url_decode(part);
  if (!bytes) return std::nullopt;
  nlohmann::json value = nlohmann::json::parse(*bytes, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return std::nullopt;  // a parse error is "discarded", not an object
  return value;
}

const std::string* string_member(const nlohmann::json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

// A NumericDate we accept: a JSON integer in [0, 2^63). Non-negative, so
// exp - iat cannot overflow.
std::optional<std::int64_t> numeric_date(const nlohmann::json& claims, const char* name) {
  auto it = claims.find(name);
  if (it == claims.end()) return std::nullopt;
  if (it->is_number_unsigned()) {
    const auto v = it->get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  if (it->is_number_integer()) {
    const auto v = it->get<std::int64_t>();
    if (v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

// Checks a string claim equals what the receiver expects.
std::optional<VerifyResult> mismatch(const nlohmann::json& claims, const char* name,
                                     std::string_view expected, VerifyError error) {
  auto it = claims.find(name);
  if (it == claims.end()) return failure(error, std::string("no \"") + name + "\" claim");
  if (!it->is_string() || it->get_ref<const std::string&>() != expected)
    return failure(
        error, std::string("\"") + name + "\" is " + quote_json(*it) + ", expected " + quote_value(expected));
  return std::nullopt;
}

std::optional<VerifyResult> check_claims(const nlohmann::json& claims, const JwtExpectation& expect,
                                         std::chrono::system_clock::time_point now) {
  if (auto m = mismatch(claims, jwt_claims::kIssuer, expect.issuer, VerifyError::kWrongIssuer)) return m;
  // "aud" may be an array in general JWTs (RFC 7519 section 4.1.3); ours is
  // one host, and an array would make one token good at several.
  if (auto m = mismatch(claims, jwt_claims::kAudience, expect.audience, VerifyError::kWrongAudience))
    return m;
  if (auto m = mismatch(claims, jwt_claims::kMethod, expect.method, VerifyError::kWrongMethod)) return m;
  if (auto m = mismatch(claims, jwt_claims::kPath, expect.path, VerifyError::kWrongPath)) return m;
  for (const char* name : {jwt_claims::kSubject, jwt_claims::kTokenId}) {
    const std::string* value = string_member(claims, name);
    if (value == nullptr || value->empty())
      return failure(VerifyError::kBadClaims, std::string("no \"") + name + "\" string claim");
  }

  const auto issued_at = numeric_date(claims, jwt_claims::kIssuedAt);
  const auto expiry = numeric_date(claims, jwt_claims::kExpiry);
  if (!issued_at || !expiry)
    return failure(VerifyError::kBadClaims, "\"iat\" and \"exp\" must be non-negative integer NumericDates");
  std::optional<std::int64_t> not_before;
  if (claims.contains(jwt_claims::kNotBefore)) {
    not_before = numeric_date(claims, jwt_claims::kNotBefore);
    if (!not_before)
      return failure(VerifyError::kBadClaims, "\"nbf\" is not a non-negative integer NumericDate");
  }
  if (*expiry <= *issued_at) return failure(VerifyError::kBadClaims, "\"exp\" is not after \"iat\"");
  if (*expiry - *issued_at > expect.max_lifetime.count())
    return failure(VerifyError::kLifetimeTooLong,
                   "lives " + std::to_string(*expiry - *issued_at) + " s, longer than the " +
                       std::to_string(expect.max_lifetime.count()) + " s allowed");

  // Whole seconds: for integer NumericDates, exp > floor(now) is exp > now.
  const std::int64_t now_s = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch()).count();
  const std::int64_t latest_start = now_s + expect.leeway.count();
  if (*issued_at > latest_start)
    return failure(VerifyError::kNotYetValid,
                   "issued " + std::to_string(*issued_at - now_s) + " s in the future");
  if (not_before && *not_before > latest_start)
    return failure(VerifyError::kNotYetValid,
                   "not valid for another " + std::to_string(*not_before - now_s) + " s");
  if (*expiry <= now_s)
    return failure(VerifyError::kExpired, "expired " + std::to_string(now_s - *expiry) + " s ago");
  return std::nullopt;
}

}  // namespace

std::string_view to_string(VerifyError e) {
  switch (e) {
    case VerifyError::kNone:
      return "none";
    case VerifyError::kMalformed:
      return "malformed";
    case VerifyError::kBadHeader:
      return "bad_header";
    case VerifyError::kAlgorithmNotAllowed:
      return "algorithm_not_allowed";
    case VerifyError::kUnknownKid:
      return "unknown_kid";
    case VerifyError::kBadKey:
      return "bad_key";
    case VerifyError::kBadSignature:
      return "bad_signature";
    case VerifyError::kBadClaims:
      return "bad_claims";
    case VerifyError::kWrongIssuer:
      return "wrong_issuer";
    case VerifyError::kWrongAudience:
      return "wrong_audience";
    case VerifyError::kWrongMethod:
      return "wrong_method";
    case VerifyError::kWrongPath:
      return "wrong_path";
    case VerifyError::kNotYetValid:
      return "not_yet_valid";
    case VerifyError::kExpired:
      return "expired";
    case VerifyError::kLifetimeTooLong:
      return "lifetime_too_long";
  }
  return "unknown";
}

VerifyResult verify_jwt(std::string_view token, const nlohmann::json& jwks, const JwtExpectation& expect,
                        std::chrono::system_clock::time_point now) {
  if (token.size() > kMaxTokenSize)
    return failure(VerifyError::kMalformed, "longer than " + std::to_string(kMaxTokenSize) + " bytes");
  const std::size_t first_dot = token.find('.');
  const std::size_t second_dot =
      first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
  if (second_dot == std::string_view::npos || token.find('.', second_dot + 1) != std::string_view::npos)
    return failure(VerifyError::kMalformed, "not three dot-separated parts");
  const std::string_view signing_input = token.substr(0, second_dot);
  const std::string_view header_part = token.substr(0, first_dot);
  const std::string_view payload_part = token.substr(first_dot + 1, second_dot - first_dot - 1);
  const std::string_view signature_part = token.substr(second_dot + 1);

  // The header first, and "alg" before anything else in it: the algorithm
  // is ours to fix, never the token's to choose.
  const auto header = decode_object(header_part);
  if (!header) return failure(VerifyError::kBadHeader, "the header is not a base64url JSON object");
  auto alg = header->find("alg");
  if (alg == header->end())
    return failure(VerifyError::kAlgorithmNotAllowed, "no \"alg\"; only \"EdDSA\" is accepted");
  if (!alg->is_string() || alg->get_ref<const std::string&>() != jwt_claims::kAlgorithm)
    return failure(VerifyError::kAlgorithmNotAllowed,
                   "\"alg\" is " + quote_json(*alg) + "; only \"EdDSA\" is accepted");
  if (header->contains("crit"))
    return failure(VerifyError::kBadHeader, "\"crit\" names extensions this verifier does not understand");
  if (auto typ = header->find("typ");
      typ != header->end() && !(typ->is_string() && typ->get_ref<const std::string&>() == jwt_claims::kType))
    return failure(VerifyError::kBadHeader, "\"typ\" is " + quote_json(*typ) + ", not \"JWT\"");
  const std::string* kid = string_member(*header, "kid");
  if (kid == nullptr) return failure(VerifyError::kBadHeader, "no \"kid\" string");

  const KeyLookup key = find_ed25519_key(jwks, *kid);
  if (!key.ok())
    return failure(key.error == KeyLookupError::kUnknownKid ? VerifyError::kUnknownKid : VerifyError::kBadKey,
                   "kid " + quote_value(*kid) + ": " + key.message);

  const auto signature = base64url_decode(signature_part);
  if (!signature || signature->size() != crypto_sign_BYTES)
    return failure(VerifyError::kBadSignature, "the signature is not 64 bytes of base64url");
  // libsodium must be started before use; once per process, thread-safe.
  static const bool sodium_ready = sodium_init() >= 0;
  if (!sodium_ready) return failure(VerifyError::kBadSignature, "libsodium could not start");
  if (crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(signature->data()),
                                  reinterpret_cast<const unsigned char*>(signing_input.data()),
                                  signing_input.size(), key.public_key.data()) != 0)
    return failure(VerifyError::kBadSignature,
                   "the signature does not verify under kid " + quote_value(*kid));

  // Only signed bytes are read from here on.
  auto claims = decode_object(payload_part);
  if (!claims) return failure(VerifyError::kBadClaims, "the payload is not a base64url JSON object");
  if (auto problem = check_claims(*claims, expect, now)) return std::move(*problem);
  return {VerifyError::kNone, {}, std::move(*claims)};
}

}  // namespace zn::broker
