#include "broker/secrets/sealer.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <string>
#include <vector>

#include "support/secret_encodings.h"

namespace zn::broker {
namespace {

constexpr std::string_view kSealedValue = "sk_live_51HqLyjWDarjtT1zdp7dc";
constexpr std::string_view kContext = "session/s1/resource/stripe/accessToken";

std::string revealed(const Secret& s) {
  return s.reveal([](std::string_view v) { return std::string(v); });
}

class SealerTest : public ::testing::Test {
 protected:
  // Checks the failure and that its message gives nothing away.
  void expect_failure(const Unsealed& u, UnsealError error) {
    EXPECT_FALSE(u.ok());
    EXPECT_EQ(u.error, error) << to_string(u.error) << ": " << u.message;
    EXPECT_FALSE(u.value.has_value());
    EXPECT_FALSE(u.message.empty());
    EXPECT_EQ(u.message.find(kSealedValue), std::string::npos) << u.message;
  }
  HostKey key_ = HostKey::generate();
  HostKey other_ = HostKey::generate();
};

TEST_F(SealerTest, RoundTrip) {
  std::string envelope = seal(key_, kSealedValue, kContext);
  Unsealed u = unseal(key_, envelope, kContext);
  ASSERT_TRUE(u.ok()) << u.message;
  EXPECT_EQ(revealed(*u.value), kSealedValue);
  EXPECT_TRUE(u.value->equals(kSealedValue));
  Unsealed again = unseal(key_, seal(key_, *u.value, kContext), kContext);  // sealing a Secret
  ASSERT_TRUE(again.ok()) << again.message;
  EXPECT_TRUE(again.value->equals(kSealedValue));
  Unsealed empty = unseal(key_, seal(key_, "", kContext), kContext);
  ASSERT_TRUE(empty.ok()) << empty.message;
  EXPECT_TRUE(empty.value->empty());
}

TEST_F(SealerTest, TheEnvelopeNamesItsKeyAndHidesTheValue) {
  std::string envelope = seal(key_, kSealedValue, kContext);
  EXPECT_EQ(envelope.rfind("znsealed:v1:" + key_.id() + ":", 0), 0u) << envelope;
  EXPECT_EQ(envelope.find('\n'), std::string::npos);
  for (const std::string& form : zn::test::encodings_of(std::string(kSealedValue)))
    EXPECT_EQ(envelope.find(form), std::string::npos) << form;
  EXPECT_EQ(envelope.find("sk_live"), std::string::npos);
}

TEST_F(SealerTest, TwoSealsOfOneValueDiffer) {
  std::string a = seal(key_, kSealedValue, kContext), b = seal(key_, kSealedValue, kContext);
  EXPECT_NE(a, b);
  EXPECT_TRUE(unseal(key_, a, kContext).ok());
  EXPECT_TRUE(unseal(key_, b, kContext).ok());
}

TEST_F(SealerTest, EveryTamperedCharacterFailsAuthentication) {
  const std::string envelope = seal(key_, kSealedValue, kContext);
  const std::size_t payload = envelope.rfind(':') + 1;
  // The last character also carries padding bits that must be zero, so
  // changing it is malformed base64: covered by the garbage test.
  for (std::size_t i = payload; i + 1 < envelope.size(); ++i) {
    std::string bad = envelope;
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    expect_failure(unseal(key_, bad, kContext), UnsealError::kAuthenticationFailed);
  }
}

TEST_F(SealerTest, AnotherContextFailsAuthentication) {
  const std::string envelope = seal(key_, kSealedValue, kContext);
  Unsealed u = unseal(key_, envelope, "session/s2/resource/stripe/accessToken");
  expect_failure(u, UnsealError::kAuthenticationFailed);
  EXPECT_NE(u.message.find("session/s2"), std::string::npos) << u.message;
  expect_failure(unseal(key_, envelope, ""), UnsealError::kAuthenticationFailed);
  EXPECT_TRUE(unseal(key_, envelope, kContext).ok());  // the positive control
}

TEST_F(SealerTest, ATruncatedEnvelopeIsRefused) {
  const std::string envelope = seal(key_, kSealedValue, kContext);
  // Cut inside the header.
  expect_failure(unseal(key_, envelope.substr(0, 12), kContext), UnsealError::kNotAnEnvelope);
  expect_failure(unseal(key_, envelope.substr(0, 20), kContext), UnsealError::kNotAnEnvelope);
  // Cut to fewer bytes than a nonce and a tag.
  const std::size_t payload = envelope.rfind(':') + 1;
  expect_failure(unseal(key_, envelope.substr(0, payload + 40), kContext), UnsealError::kNotAnEnvelope);
  expect_failure(unseal(key_, envelope.substr(0, payload), kContext), UnsealError::kNotAnEnvelope);
  // Cut by whole base64 quanta: well-formed, but the tag no longer matches.
  expect_failure(unseal(key_, envelope.substr(0, envelope.size() - 4), kContext),
                 UnsealError::kAuthenticationFailed);
}

TEST_F(SealerTest, GarbageIsNotAnEnvelope) {
  const std::string header = "znsealed:v1:" + key_.id() + ":";
  expect_failure(unseal(key_, header + "!!!!not*base64", kContext), UnsealError::kNotAnEnvelope);
  expect_failure(unseal(key_, header + std::string(80, 'A') + "==", kContext), UnsealError::kNotAnEnvelope);
  std::string envelope = seal(key_, kSealedValue, kContext);
  envelope.back() = envelope.back() == '_' ? '-' : '_';  // nonzero padding bits
  EXPECT_FALSE(unseal(key_, envelope, kContext).ok());
  expect_failure(unseal(key_, kSealedValue, kContext), UnsealError::kNotAnEnvelope);  // a plaintext value
  expect_failure(unseal(key_, "", kContext), UnsealError::kNotAnEnvelope);
  expect_failure(unseal(key_, "znsealed:v1:XYZ:AAAA", kContext), UnsealError::kNotAnEnvelope);
}

TEST_F(SealerTest, AnotherVersionIsNamed) {
  std::string envelope = seal(key_, kSealedValue, kContext);
  envelope.replace(envelope.find(":v1:"), 4, ":v2:");
  Unsealed u = unseal(key_, envelope, kContext);
  expect_failure(u, UnsealError::kUnknownVersion);
  EXPECT_NE(u.message.find("'v2'"), std::string::npos) << u.message;
}

TEST_F(SealerTest, AnotherKeyIsNamedNotCalledCorruption) {
  const std::string envelope = seal(other_, kSealedValue, kContext);
  Unsealed u = unseal(key_, envelope, kContext);
  expect_failure(u, UnsealError::kWrongKey);
  EXPECT_NE(u.message.find(other_.id()), std::string::npos) << u.message;
  EXPECT_NE(u.message.find(key_.id()), std::string::npos) << u.message;
  // The key id in the header is bound too: claiming this host's key does
  // not make another key's envelope open.
  std::string relabelled = envelope;
  relabelled.replace(relabelled.find(other_.id()), 16, key_.id());
  expect_failure(unseal(key_, relabelled, kContext), UnsealError::kAuthenticationFailed);
}

TEST_F(SealerTest, ResealMovesAValueToTheNewKey) {
  const std::string old_envelope = seal(key_, kSealedValue, kContext);
  Resealed r = reseal(key_, other_, old_envelope, kContext);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.envelope.rfind("znsealed:v1:" + other_.id() + ":", 0), 0u);
  Unsealed u = unseal(other_, r.envelope, kContext);
  ASSERT_TRUE(u.ok()) << u.message;
  EXPECT_TRUE(u.value->equals(kSealedValue));
  expect_failure(unseal(key_, r.envelope, kContext), UnsealError::kWrongKey);

  // A rotation resumed after a crash: already under the new key, kept as is.
  Resealed again = reseal(key_, other_, r.envelope, kContext);
  ASSERT_TRUE(again.ok()) << again.message;
  EXPECT_EQ(again.envelope, r.envelope);

  // Nothing is resealed that does not open.
  Resealed bad = reseal(key_, other_, old_envelope, "session/s2/resource/stripe/accessToken");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.error, UnsealError::kAuthenticationFailed);
  EXPECT_TRUE(bad.envelope.empty());
  HostKey third = HostKey::generate();
  EXPECT_EQ(reseal(third, other_, old_envelope, kContext).error, UnsealError::kWrongKey);
}

}  // namespace
}  // namespace zn::broker
