#include <gtest/gtest.h>
#include <sodium.h>

#include "userspace/command/envelope.h"
#include "userspace/command/replay_cache.h"

namespace zn::command {
namespace {

using namespace std::chrono_literals;

struct Keypair {
  PublicKey pk{};
  std::array<unsigned char, crypto_sign_SECRETKEYBYTES> sk{};
  Keypair() {
    EXPECT_GE(sodium_init(), 0);
    crypto_sign_keypair(pk.data(), sk.data());
  }
  Signer signer() const {
    return [this](std::string_view m) {
      Signature s;
      crypto_sign_detached(s.data(), nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(),
                           sk.data());
      return s;
    };
  }
};

class EnvelopeTest : public ::testing::Test {
 protected:
  Keypair zerod, other;
  VerifyLimits limits;
  const std::chrono::system_clock::time_point now = std::chrono::system_clock::now();

  std::string seal(const std::string& body = R"({"argv":["id"]})", CommandType type = CommandType::kExec,
                   const std::string& session = "user-1", std::chrono::system_clock::duration skew = 0s) {
    return seal_envelope(type, session, body, now + skew, zerod.signer());
  }
  // The whole agent-side check, as it runs it.
  Rejection verify(std::string_view bytes, ReplayCache& cache, const PublicKey* key = nullptr) {
    EnvelopeHeader h;
    size_t header_size = 0;
    Rejection r = parse_and_verify_header(bytes, key ? *key : zerod.pk, limits, h, &header_size);
    if (r != Rejection::kNone) return r;
    r = verify_body(h, bytes.substr(header_size));
    if (r != Rejection::kNone) return r;
    return cache.admit(h, "user-1", now, limits.window);
  }
};

TEST_F(EnvelopeTest, AnHonestEnvelopeIsAcceptedOnceAndSaysWhatWasSigned) {
  ReplayCache cache;
  const std::string e = seal("hello", CommandType::kPut);
  EnvelopeHeader h;
  size_t header_size = 0;
  ASSERT_EQ(parse_and_verify_header(e, zerod.pk, limits, h, &header_size), Rejection::kNone);
  EXPECT_EQ(h.type, CommandType::kPut);
  EXPECT_EQ(h.session, "user-1");
  EXPECT_EQ(h.body_length, 5u);
  EXPECT_EQ(e.substr(header_size), "hello");
  EXPECT_EQ(verify(e, cache), Rejection::kNone);
  EXPECT_EQ(verify(e, cache), Rejection::kReplayed);
  // Two seals of the same command differ (fresh nonce): both run.
  EXPECT_EQ(verify(seal(), cache), Rejection::kNone);
  EXPECT_EQ(verify(seal(), cache), Rejection::kNone);
}

TEST_F(EnvelopeTest, ATamperedBodyIsRefused) {
  ReplayCache cache;
  std::string e = seal(R"({"argv":["id"]})");
  e.back() ^= 1;
  EXPECT_EQ(verify(e, cache), Rejection::kBadBodyHash);
  EXPECT_EQ(verify(seal("abc") + "d", cache), Rejection::kBadBodyHash);  // a byte appended
}

TEST_F(EnvelopeTest, EveryHeaderByteIsSigned) {
  const std::string e = seal();
  EnvelopeHeader h;
  size_t header_size = 0;
  ASSERT_EQ(parse_and_verify_header(e, zerod.pk, limits, h, &header_size), Rejection::kNone);
  for (size_t i = 0; i < header_size; ++i) {
    std::string t = e;
    t[i] ^= 0x01;
    const Rejection r = parse_and_verify_header(t, zerod.pk, limits, h, nullptr);
    EXPECT_NE(r, Rejection::kNone) << "byte " << i;
    // The magic and version are read before the signature; the rest fail it
    // (or are out of bounds, which is refused first).
    if (i >= 8 && i < header_size) {
      EXPECT_TRUE(r == Rejection::kBadSignature || r == Rejection::kTruncated)
          << "byte " << i << ": " << rejection_name(r);
    }
  }
}

TEST_F(EnvelopeTest, AnotherKeyIsRefused) {
  ReplayCache cache;
  EXPECT_EQ(verify(seal_envelope(CommandType::kPing, "user-1", "", now, other.signer()), cache),
            Rejection::kBadSignature);
  EXPECT_EQ(verify(seal(), cache, &other.pk), Rejection::kBadSignature);
}

TEST_F(EnvelopeTest, AnotherSessionsEnvelopeIsRefused) {
  ReplayCache cache;
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-2"), cache), Rejection::kWrongSession);
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-1x"), cache), Rejection::kWrongSession);
}

TEST_F(EnvelopeTest, FreshnessIsAWindowBothWays) {
  ReplayCache cache;
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-1", -31s), cache), Rejection::kStale);
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-1", 31s), cache), Rejection::kFuture);
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-1", -29s), cache), Rejection::kNone);
  EXPECT_EQ(verify(seal("{}", CommandType::kExec, "user-1", 29s), cache), Rejection::kNone);
}

TEST_F(EnvelopeTest, EveryTruncationIsRefused) {
  ReplayCache cache;
  const std::string e = seal("0123456789");
  for (size_t n = 0; n < e.size(); ++n) {
    const Rejection r = verify(e.substr(0, n), cache);
    EXPECT_TRUE(r == Rejection::kTruncated) << n << ": " << rejection_name(r);
  }
}

TEST_F(EnvelopeTest, OversizedBodiesAreRefusedBeforeTheyAreRead) {
  limits.max_body = 8;
  limits.max_put_body = 16;
  EnvelopeHeader h;
  EXPECT_EQ(parse_and_verify_header(seal("123456789"), zerod.pk, limits, h, nullptr), Rejection::kOversized);
  EXPECT_EQ(parse_and_verify_header(seal("123456789", CommandType::kPut), zerod.pk, limits, h, nullptr),
            Rejection::kNone);
  EXPECT_EQ(
      parse_and_verify_header(seal(std::string(17, 'x'), CommandType::kPut), zerod.pk, limits, h, nullptr),
      Rejection::kOversized);
  // The header alone says so: the body need not even be there.
  const std::string e = seal("123456789");
  EXPECT_EQ(parse_and_verify_header(e.substr(0, e.size() - 9), zerod.pk, limits, h, nullptr),
            Rejection::kOversized);
}

TEST_F(EnvelopeTest, NotAnEnvelope) {
  ReplayCache cache;
  EXPECT_EQ(verify("GET / HTTP/1.1\r\n\r\n", cache), Rejection::kBadMagic);
  std::string v2 = seal();
  v2[4] = 2;
  EXPECT_EQ(verify(v2, cache), Rejection::kBadMagic);
  std::string type = seal();
  type[5] = 9;
  EXPECT_EQ(verify(type, cache), Rejection::kMalformed);
  std::string session = seal();
  session[6] = 0;
  session[7] = 0;
  EXPECT_EQ(verify(session, cache), Rejection::kMalformed);
  session[7] = 65;
  EXPECT_EQ(verify(session, cache), Rejection::kMalformed);
}

TEST_F(EnvelopeTest, AFullReplayCacheRefusesRatherThanForgets) {
  ReplayCache cache(2);
  EXPECT_EQ(verify(seal(), cache), Rejection::kNone);
  EXPECT_EQ(verify(seal(), cache), Rejection::kNone);
  EXPECT_EQ(verify(seal(), cache), Rejection::kReplayCacheFull);
  EXPECT_EQ(cache.size(), 2u);
  // Once the remembered ones are out of the window, room again.
  ReplayCache aging(1);
  EnvelopeHeader h;
  size_t hs = 0;
  const std::string old = seal("{}", CommandType::kExec, "user-1", -20s);
  ASSERT_EQ(parse_and_verify_header(old, zerod.pk, limits, h, &hs), Rejection::kNone);
  EXPECT_EQ(aging.admit(h, "user-1", now, limits.window), Rejection::kNone);
  ASSERT_EQ(parse_and_verify_header(seal(), zerod.pk, limits, h, &hs), Rejection::kNone);
  EXPECT_EQ(aging.admit(h, "user-1", now, limits.window), Rejection::kReplayCacheFull);
  EXPECT_EQ(aging.admit(h, "user-1", now + 15s, limits.window), Rejection::kNone);
}

}  // namespace
}  // namespace zn::command
