// The minted identity (issue 12): a token verifies with the published JWKS
// and only for the audience, method and path it was minted for, only while
// live, only as EdDSA under a published kid; rotation keeps tokens in flight
// valid until they expire; minting is safe from many threads while a
// rotation runs; no secret key byte is ever published or quoted.
#include <gtest/gtest.h>
#include <sodium.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "broker/identity/base64url.h"
#include "broker/identity/jwk.h"
#include "broker/identity/jwt_minter.h"
#include "broker/identity/jwt_verifier.h"
#include "broker/identity/signing_key.h"
#include "support/secret_encodings.h"

namespace zn::broker {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using TimePoint = std::chrono::system_clock::time_point;
using Seed = std::array<unsigned char, SigningKey::kSeedSize>;

constexpr std::string_view kIssuer = "zeroness://broker.test";
constexpr std::string_view kSession = "s-7f3a";
constexpr std::string_view kHost = "api.example.com";
constexpr std::string_view kMethod = "POST";
constexpr std::string_view kPath = "/v1/charges";

// A quarter second past a whole second, so the tests see iat rounded down.
const TimePoint kStart = TimePoint(1'800'000'000s) + 250ms;

MintRequest request() { return {kSession, kHost, kMethod, kPath}; }

JwtExpectation expectation() {
  return {std::string(kIssuer), std::string(kHost), std::string(kMethod), std::string(kPath)};
}

std::span<const unsigned char> bytes_of(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

std::vector<std::string> parts_of(const std::string& token) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = token.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(token.substr(start, dot - start));
  parts.push_back(token.substr(start));
  return parts;
}

json decoded(const std::string& part) { return json::parse(base64url_decode(part).value()); }

// A token made by hand: header and claims as given, signed by key (EdDSA).
std::string sign_token(const json& header, const json& claims, const SigningKey& key) {
  std::string input = base64url_encode(header.dump()) + "." + base64url_encode(claims.dump());
  return input + "." + base64url_encode(key.sign(input));
}

class JwtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    minter_ = std::make_unique<JwtMinter>(std::string(kIssuer), options());
  }

  // The fake clock, and keys from seeds the test keeps so it can look for
  // them where they must not be.
  JwtMinterOptions options() {
    JwtMinterOptions o;
    o.clock = [this] { return TimePoint(TimePoint::duration(now_.load())); };
    o.make_key = [this] {
      Seed seed{};
      randombytes_buf(seed.data(), seed.size());
      std::lock_guard lock(seeds_mu_);
      seeds_.push_back(seed);
      return SigningKey::from_seed(seed);
    };
    return o;
  }

  TimePoint now() const { return TimePoint(TimePoint::duration(now_.load())); }
  void set_now(TimePoint t) { now_.store(t.time_since_epoch().count()); }
  void advance(std::chrono::seconds s) { set_now(now() + s); }

  std::string mint() {
    MintResult minted = minter_->mint(request());
    EXPECT_TRUE(minted.ok()) << minted.message;
    return minted.token;
  }

  VerifyResult verify(const std::string& token, const JwtExpectation& expect = expectation()) {
    return verify_jwt(token, minter_->jwks(), expect, now());
  }

  // Every encoding of every secret key the minter was given.
  std::vector<std::string> secret_spellings() {
    std::lock_guard lock(seeds_mu_);
    std::vector<std::string> out;
    for (const Seed& s : seeds_)
      for (std::string& e :
           zn::test::encodings_of(std::string(reinterpret_cast<const char*>(s.data()), s.size())))
        out.push_back(std::move(e));
    return out;
  }

  void expect_no_secret_in(const std::string& text) {
    for (const std::string& s : secret_spellings()) EXPECT_EQ(text.find(s), std::string::npos);
  }

  // The failure, and that its message gives nothing away: no token, no
  // signature, no secret key.
  void expect_failure(const VerifyResult& r, VerifyError error, const std::string& token) {
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.error, error) << to_string(r.error) << ": " << r.message;
    EXPECT_FALSE(r.message.empty());
    EXPECT_TRUE(r.claims.is_null());
    if (!token.empty()) {
      EXPECT_EQ(r.message.find(token), std::string::npos);
    }
    const auto parts = parts_of(token);
    if (parts.size() == 3 && parts[2].size() > 8) {
      EXPECT_EQ(r.message.find(parts[2]), std::string::npos);
    }
    expect_no_secret_in(r.message);
  }

  std::shared_ptr<const SigningKey> key_of_seed(std::size_t i) {
    std::lock_guard lock(seeds_mu_);
    return SigningKey::from_seed(seeds_.at(i));
  }

  std::atomic<TimePoint::rep> now_{kStart.time_since_epoch().count()};
  std::mutex seeds_mu_;
  std::vector<Seed> seeds_;  // in the order the minter asked for keys
  std::unique_ptr<JwtMinter> minter_;
};

// RFC 8037 appendix A: the key (A.1), its thumbprint (A.3) and the EdDSA
// signature of the example JWS (A.4), so our kid and signatures are the
// standard ones any JOSE library computes.
TEST(JwtSigningKey, MatchesTheRfc8037Vectors) {
  const auto seed = base64url_decode("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A").value();
  const auto key = SigningKey::from_seed(bytes_of(seed));
  EXPECT_EQ(base64url_encode(key->public_key()), "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
  EXPECT_EQ(key->kid(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
  EXPECT_EQ(base64url_encode(key->sign("eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc")),
            "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg");
  const json jwk = key->jwk();
  EXPECT_EQ(jwk,
            json::parse(R"({"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
                                 "kid":"kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k","alg":"EdDSA","use":"sig"})"));
  EXPECT_THROW(SigningKey::from_seed(bytes_of(seed).first(31)), std::invalid_argument);
}

TEST(JwtBase64url, DecodesOnlyTheCanonicalUnpaddedSpelling) {
  EXPECT_EQ(base64url_decode("QQ"), "A");
  EXPECT_EQ(base64url_decode(""), "");
  EXPECT_EQ(base64url_decode("_-8"), "\xff\xef");
  EXPECT_EQ(base64url_encode(std::string_view("\xff\xef")), "_-8");
  EXPECT_FALSE(base64url_decode("QR"));     // the same byte with a non-zero unused bit
  EXPECT_FALSE(base64url_decode("QQ=="));   // padding
  EXPECT_FALSE(base64url_decode("/+8"));    // the standard alphabet
  EXPECT_FALSE(base64url_decode("Q Q"));    // whitespace
  EXPECT_FALSE(base64url_decode("QUJDR"));  // a length no encoding has
}

TEST_F(JwtTest, AMintedTokenVerifiesAgainstTheJwksWithItsClaims) {
  const std::string token = mint();
  const VerifyResult r = verify(token);
  ASSERT_TRUE(r.ok()) << r.message;

  const auto parts = parts_of(token);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(decoded(parts[0]), (json{{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", minter_->current_kid()}}));
  const json& c = r.claims;
  EXPECT_EQ(c, decoded(parts[1]));
  auto text = [&](const char* name) { return c.at(name).get<std::string>(); };
  EXPECT_EQ(text("iss"), kIssuer);
  EXPECT_EQ(text("sub"), kSession);
  EXPECT_EQ(text("aud"), kHost);
  EXPECT_EQ(text("zn_method"), kMethod);
  EXPECT_EQ(text("zn_path"), kPath);
  EXPECT_EQ(c.at("iat").get<std::int64_t>(), 1'800'000'000);  // rounded down
  EXPECT_EQ(c.at("nbf"), c.at("iat"));
  EXPECT_EQ(c.at("exp").get<std::int64_t>(), 1'800'000'060);
  EXPECT_EQ(base64url_decode(text("jti")).value().size(), 16u);
  EXPECT_EQ(c.size(), 9u);
  expect_no_secret_in(token);
}

TEST_F(JwtTest, FailsForAnotherAudienceMethodOrPath) {
  const std::string token = mint();
  ASSERT_TRUE(verify(token).ok());  // the positive control

  JwtExpectation other_host = expectation();
  other_host.audience = "evil.example.net";
  expect_failure(verify(token, other_host), VerifyError::kWrongAudience, token);
  JwtExpectation other_method = expectation();
  other_method.method = "GET";
  expect_failure(verify(token, other_method), VerifyError::kWrongMethod, token);
  JwtExpectation lower_case = expectation();
  lower_case.method = "post";
  expect_failure(verify(token, lower_case), VerifyError::kWrongMethod, token);
  JwtExpectation other_path = expectation();
  other_path.path = "/v1/refunds";
  expect_failure(verify(token, other_path), VerifyError::kWrongPath, token);
  JwtExpectation prefix_path = expectation();
  prefix_path.path = "/v1";
  expect_failure(verify(token, prefix_path), VerifyError::kWrongPath, token);
  JwtExpectation other_issuer = expectation();
  other_issuer.issuer = "zeroness://elsewhere";
  expect_failure(verify(token, other_issuer), VerifyError::kWrongIssuer, token);
}

TEST_F(JwtTest, FailsOnceExpired) {
  const std::string token = mint();
  advance(59s);  // kStart + 59 s: iat + 59.25 s
  EXPECT_TRUE(verify(token).ok());
  advance(1s);  // past exp = iat + 60 s
  expect_failure(verify(token), VerifyError::kExpired, token);
}

TEST_F(JwtTest, FailsBeforeItsIssueTimeBeyondTheLeeway) {
  const std::string token = mint();
  set_now(kStart - 5s);  // the receiver's clock 5 s behind: within the leeway
  EXPECT_TRUE(verify(token).ok());
  set_now(kStart - 6s);
  expect_failure(verify(token), VerifyError::kNotYetValid, token);

  // Each of iat and nbf alone holds the token back: one without nbf, one
  // whose nbf is later than its iat.
  set_now(kStart);
  const auto key = key_of_seed(0);
  const json header = {{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", key->kid()}};
  json claims = decoded(parts_of(token)[1]);
  claims.erase("nbf");
  EXPECT_TRUE(verify(sign_token(header, claims, *key)).ok());
  claims["iat"] = claims["iat"].get<std::int64_t>() + 6;
  const std::string early_iat = sign_token(header, claims, *key);
  expect_failure(verify(early_iat), VerifyError::kNotYetValid, early_iat);
  claims["iat"] = claims["iat"].get<std::int64_t>() - 6;
  claims["nbf"] = claims["iat"].get<std::int64_t>() + 6;
  const std::string early_nbf = sign_token(header, claims, *key);
  expect_failure(verify(early_nbf), VerifyError::kNotYetValid, early_nbf);
}

TEST_F(JwtTest, ALongerConfiguredLifetimeIsMintedAndBoundedByTheReceiver) {
  JwtMinterOptions o = options();
  o.token_lifetime = 300s;
  minter_ = std::make_unique<JwtMinter>(std::string(kIssuer), o);
  const std::string token = mint();
  JwtExpectation expect = expectation();
  expect_failure(verify(token, expect), VerifyError::kLifetimeTooLong, token);  // receiver allows 60 s
  expect.max_lifetime = 300s;
  const VerifyResult r = verify(token, expect);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.claims["exp"].get<std::int64_t>() - r.claims["iat"].get<std::int64_t>(), 300);
}

TEST_F(JwtTest, RefusesOptionsOutOfRange) {
  auto with = [&](std::chrono::seconds token, std::chrono::seconds key) {
    JwtMinterOptions o = options();
    o.token_lifetime = token;
    o.key_lifetime = key;
    return o;
  };
  EXPECT_THROW(JwtMinter("", options()), std::invalid_argument);
  EXPECT_THROW(JwtMinter("i", with(0s, 1h)), std::invalid_argument);
  EXPECT_THROW(JwtMinter("i", with(3601s, 2h)), std::invalid_argument);
  EXPECT_THROW(JwtMinter("i", with(60s, 59s)), std::invalid_argument);
  EXPECT_NO_THROW(JwtMinter("i", with(1s, 1s)));
  EXPECT_NO_THROW(JwtMinter("i", with(3600s, 3600s)));
}

TEST_F(JwtTest, RefusesToMintForAnIncompleteRequestWithoutQuotingIt) {
  const std::string bad_utf8 = "s-\xc3\x28-secretish";
  for (MintRequest r :
       {MintRequest{"", kHost, kMethod, kPath}, MintRequest{kSession, "", kMethod, kPath},
        MintRequest{kSession, kHost, "", kPath}, MintRequest{kSession, kHost, "GE T", kPath},
        MintRequest{kSession, kHost, kMethod, ""}, MintRequest{kSession, kHost, kMethod, "v1"},
        MintRequest{bad_utf8, kHost, kMethod, kPath}}) {
    const MintResult m = minter_->mint(r);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.error, MintError::kInvalidRequest);
    EXPECT_TRUE(m.token.empty());
    EXPECT_FALSE(m.message.empty());
    EXPECT_EQ(m.message.find("secretish"), std::string::npos) << m.message;
  }
  EXPECT_TRUE(minter_->mint(request()).ok());
}

TEST_F(JwtTest, AnyAlteredCharacterFails) {
  const std::string token = mint();
  ASSERT_TRUE(verify(token).ok());
  constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '.') continue;
    std::string altered = token;
    // The next character of the alphabet: flips the low bit of the 6 this
    // character carries, or moves to another character where that wraps.
    altered[i] = kAlphabet[(kAlphabet.find(token[i]) + 1) % kAlphabet.size()];
    const VerifyResult r = verify(altered);
    EXPECT_FALSE(r.ok()) << "character " << i << " altered still verifies";
    expect_no_secret_in(r.message);
  }
}

TEST_F(JwtTest, AFlippedSignatureOrPayloadByteFails) {
  const std::string token = mint();
  auto parts = parts_of(token);

  std::string signature = base64url_decode(parts[2]).value();
  signature[10] ^= 0x01;
  const std::string bad_signature = parts[0] + "." + parts[1] + "." + base64url_encode(signature);
  expect_failure(verify(bad_signature), VerifyError::kBadSignature, bad_signature);

  // The payload still a valid claim set, only for another path.
  std::string payload = base64url_decode(parts[1]).value();
  const std::size_t at = payload.find("/v1/charges");
  ASSERT_NE(at, std::string::npos);
  payload[at + 4] ^= 0x01;  // "/v1/bharges"
  const std::string bad_payload = parts[0] + "." + base64url_encode(payload) + "." + parts[2];
  expect_failure(verify(bad_payload), VerifyError::kBadSignature, bad_payload);
}

TEST_F(JwtTest, RefusesEveryAlgorithmButEdDSA) {
  const std::string token = mint();
  const auto parts = parts_of(token);
  const json claims = decoded(parts[1]);
  const std::string kid = minter_->current_kid();

  // "none": no signature at all, the claims exactly as minted.
  const std::string none =
      base64url_encode(json{{"alg", "none"}, {"typ", "JWT"}, {"kid", kid}}.dump()) + "." + parts[1] + ".";
  expect_failure(verify(none), VerifyError::kAlgorithmNotAllowed, none);

  // HS256 keyed with the public key as published: the classic confusion of
  // a verifier that lets the token pick the algorithm.
  const json jwk = minter_->jwks()["keys"][0];
  ASSERT_EQ(jwk.at("kid").get<std::string>(), kid);
  const std::string x = jwk.at("x").get<std::string>();
  const std::string input =
      base64url_encode(json{{"alg", "HS256"}, {"typ", "JWT"}, {"kid", kid}}.dump()) + "." + parts[1];
  for (const std::string& hmac_key : {x, base64url_decode(x).value()}) {
    std::array<unsigned char, crypto_auth_hmacsha256_BYTES> mac{};
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(hmac_key.data()),
                                hmac_key.size());
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(input.data()), input.size());
    crypto_auth_hmacsha256_final(&st, mac.data());
    const std::string hs256 = input + "." + base64url_encode(mac);
    expect_failure(verify(hs256), VerifyError::kAlgorithmNotAllowed, hs256);
  }

  // Near misses and no alg, each signed by the real key: only the exact
  // string passes.
  const auto key = key_of_seed(0);
  ASSERT_EQ(key->kid(), kid);
  EXPECT_TRUE(verify(sign_token({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", kid}}, claims, *key)).ok());
  for (const json& alg :
       {json("eddsa"), json("EdDSA "), json("Ed25519"), json("ES256"), json::array({"EdDSA"})}) {
    const std::string t = sign_token({{"alg", alg}, {"typ", "JWT"}, {"kid", kid}}, claims, *key);
    expect_failure(verify(t), VerifyError::kAlgorithmNotAllowed, t);
  }
  const std::string no_alg = sign_token({{"typ", "JWT"}, {"kid", kid}}, claims, *key);
  expect_failure(verify(no_alg), VerifyError::kAlgorithmNotAllowed, no_alg);
  const std::string crit =
      sign_token({{"alg", "EdDSA"}, {"kid", kid}, {"crit", {"b64"}}, {"b64", false}}, claims, *key);
  expect_failure(verify(crit), VerifyError::kBadHeader, crit);
}

TEST_F(JwtTest, RefusesAnUnknownKid) {
  const std::string token = mint();
  const json claims = decoded(parts_of(token)[1]);
  const auto key = key_of_seed(0);
  const std::string renamed =
      sign_token({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", "not-a-key"}}, claims, *key);
  expect_failure(verify(renamed), VerifyError::kUnknownKid, renamed);

  // A whole other issuer's keys, same issuer name: its tokens name kids
  // this JWKS does not have.
  JwtMinter stranger{std::string(kIssuer), options()};
  const std::string foreign = stranger.mint(request()).token;
  ASSERT_TRUE(verify_jwt(foreign, stranger.jwks(), expectation(), now()).ok());
  expect_failure(verify(foreign), VerifyError::kUnknownKid, foreign);

  // The right kid on a key set whose key for it is not an EdDSA key.
  json jwks = minter_->jwks();
  jwks["keys"][0]["alg"] = "RS256";
  expect_failure(verify_jwt(token, jwks, expectation(), now()), VerifyError::kBadKey, token);
  expect_failure(verify_jwt(token, json::array(), expectation(), now()), VerifyError::kBadKey, token);
}

TEST_F(JwtTest, AudienceIsOneStringNeverAList) {
  const std::string token = mint();
  json claims = decoded(parts_of(token)[1]);
  claims["aud"] = json::array({kHost, "evil.example.net"});
  const auto key = key_of_seed(0);
  const std::string listed =
      sign_token({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", key->kid()}}, claims, *key);
  expect_failure(verify(listed), VerifyError::kWrongAudience, listed);
}

TEST_F(JwtTest, GarbageNeverThrowsAndNeverVerifies) {
  const std::string token = mint();
  for (std::size_t n = 0; n < token.size(); ++n) {
    const VerifyResult r = verify(token.substr(0, n));
    EXPECT_FALSE(r.ok()) << "a " << n << "-character prefix verifies";
  }
  for (const std::string& bad : {std::string("."), std::string(".."), std::string("a.b.c"),
                                 std::string("a.b.c.d"), token + ".x", std::string(kMaxTokenSize + 1, 'A')}) {
    EXPECT_FALSE(verify(bad).ok());
  }
  const auto key = key_of_seed(0);
  const json header = {{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", key->kid()}};
  const json claims = decoded(parts_of(token)[1]);
  // Claims that are not an object, and each required claim missing or mistyped.
  std::string input = base64url_encode(header.dump()) + "." + base64url_encode("[1,2]");
  const std::string array_claims = input + "." + base64url_encode(key->sign(input));
  expect_failure(verify(array_claims), VerifyError::kBadClaims, array_claims);
  for (const char* name : {"sub", "jti", "iat", "exp"}) {
    json missing = claims;
    missing.erase(name);
    const std::string t = sign_token(header, missing, *key);
    expect_failure(verify(t), VerifyError::kBadClaims, t);
    json mistyped = claims;
    mistyped[name] = 1.5;
    const std::string u = sign_token(header, mistyped, *key);
    expect_failure(verify(u), VerifyError::kBadClaims, u);
  }
  json negative = claims;
  negative["iat"] = -1;
  const std::string t = sign_token(header, negative, *key);
  expect_failure(verify(t), VerifyError::kBadClaims, t);
}

// Rotation: the next key is published before it signs, the retired one
// stays while any token it signed is live, then goes.
TEST_F(JwtTest, RotationKeepsTokensInFlightUntilTheyExpire) {
  const std::string old_kid = minter_->current_kid();
  const std::string before_rotation = mint();
  const json jwks_before = minter_->jwks();
  ASSERT_EQ(jwks_before["keys"].size(), 2u);  // current and next

  advance(10s);
  minter_->rotate();
  const std::string new_kid = minter_->current_kid();
  EXPECT_NE(new_kid, old_kid);
  const std::string after_rotation = mint();
  EXPECT_EQ(decoded(parts_of(after_rotation)[0]).at("kid").get<std::string>(), new_kid);
  // Pre-published: a receiver holding the set fetched before the rotation
  // already knows the new key.
  EXPECT_TRUE(verify_jwt(after_rotation, jwks_before, expectation(), now()).ok());
  EXPECT_EQ(minter_->jwks()["keys"].size(), 3u);  // current, next, retired

  // The old token verifies against the live key set every second it lives.
  const TimePoint retired_at = now();
  for (TimePoint t = retired_at; t < kStart + 60s; t += 1s) {
    set_now(t);
    const VerifyResult r = verify_jwt(before_rotation, minter_->jwks(), expectation(), t);
    EXPECT_TRUE(r.ok()) << "at +" << (t - kStart) / 1s << " s: " << r.message;
  }
  // Kept until retired_at + the token lifetime, dropped after.
  set_now(retired_at + 60s);
  EXPECT_EQ(minter_->jwks()["keys"].size(), 3u);
  set_now(retired_at + 61s);
  const json jwks_after = minter_->jwks();
  EXPECT_EQ(jwks_after["keys"].size(), 2u);
  for (const json& k : jwks_after["keys"]) EXPECT_NE(k.at("kid").get<std::string>(), old_kid);
  // Even at a time its claims would pass, the old token has no key now.
  expect_failure(verify_jwt(before_rotation, jwks_after, expectation(), kStart + 1s),
                 VerifyError::kUnknownKid, before_rotation);
  minter_->prune();
  EXPECT_EQ(minter_->jwks(), jwks_after);
  EXPECT_TRUE(verify(mint()).ok());
}

TEST_F(JwtTest, RotatesWhenTheKeyLifetimeIsUp) {
  JwtMinterOptions o = options();
  o.key_lifetime = 120s;
  minter_ = std::make_unique<JwtMinter>(std::string(kIssuer), o);
  const std::string first = minter_->current_kid();
  advance(119s);
  EXPECT_FALSE(minter_->rotate_if_due());
  EXPECT_EQ(minter_->current_kid(), first);
  advance(1s);
  EXPECT_TRUE(minter_->rotate_if_due());
  EXPECT_NE(minter_->current_kid(), first);
  EXPECT_FALSE(minter_->rotate_if_due());  // the new key's lifetime starts now
}

TEST_F(JwtTest, TokenIdsAreUnique) {
  std::set<std::string> ids;
  constexpr int kTokens = 5000;
  for (int i = 0; i < kTokens; ++i) ids.insert(decoded(parts_of(mint())[1])["jti"].get<std::string>());
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kTokens));
}

TEST_F(JwtTest, NoSecretKeyIsEverPublished) {
  for (int i = 0; i < 3; ++i) minter_->rotate();
  const json jwks = minter_->jwks();
  ASSERT_EQ(jwks["keys"].size(), 5u);
  for (const json& k : jwks["keys"]) {
    EXPECT_FALSE(k.contains("d"));
    EXPECT_EQ(k.size(), 6u);  // kty crv x kid alg use
  }
  // every key made so far is looked for, in each of encodings_of's six spellings
  ASSERT_EQ(secret_spellings().size(), zn::test::encodings_of("k").size() * 5u);
  expect_no_secret_in(jwks.dump());
}

// Minting on several threads while another rotates: every token verifies
// against the final key set (nothing retires: the clock stands still) and
// every jti differs. Each minter mints before the first rotation and after
// the last, so every thread signs with at least two keys. Its own suite, so
// the TSan run can name it alone.
using JwtMinterConcurrency = JwtTest;

TEST_F(JwtMinterConcurrency, MintingIsSafeWhileAnotherThreadRotates) {
  constexpr int kMinters = 4;
  constexpr int kRotations = 20;
  constexpr int kPerMinter = 200;
  std::latch started(kMinters);
  std::atomic<bool> rotated_all{false};
  std::vector<std::vector<std::string>> tokens(kMinters);
  std::vector<std::thread> threads;
  for (int m = 0; m < kMinters; ++m) {
    threads.emplace_back([&, m] {
      auto mint_one = [&] {
        MintResult r = minter_->mint(request());
        if (r.ok()) tokens[m].push_back(std::move(r.token));
      };
      mint_one();
      started.count_down();
      for (int i = 0; i < kPerMinter || !rotated_all.load(); ++i) mint_one();
      mint_one();
    });
  }
  threads.emplace_back([&] {
    started.wait();
    for (int i = 0; i < kRotations; ++i) {
      minter_->rotate();
      (void)minter_->jwks();
    }
    rotated_all.store(true);
  });
  for (auto& t : threads) t.join();

  const json jwks = minter_->jwks();
  ASSERT_EQ(jwks["keys"].size(), static_cast<std::size_t>(kRotations + 2));
  std::set<std::string> ids;
  std::size_t total = 0;
  for (const auto& mine : tokens) {
    ASSERT_GE(mine.size(), static_cast<std::size_t>(kPerMinter + 2));
    std::set<std::string> kids;
    for (const std::string& token : mine) {
      const VerifyResult r = verify_jwt(token, jwks, expectation(), now());
      ASSERT_TRUE(r.ok()) << r.message;
      ids.insert(r.claims["jti"].get<std::string>());
      kids.insert(decoded(parts_of(token)[0])["kid"].get<std::string>());
    }
    EXPECT_GE(kids.size(), 2u);
    total += mine.size();
  }
  EXPECT_EQ(ids.size(), total);
}

}  // namespace
}  // namespace zn::broker
