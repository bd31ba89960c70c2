// The seal: what it signs, and that any change to it, or another key, shows.
#include "broker/audit_export/batch_seal.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "broker/audit/chain.h"

namespace zn::broker::audit_export {
namespace {

AuditRecord rec(uint64_t seq, const std::string& prev) {
  AuditRecord r;
  r.seq = seq;
  r.ts = "2026-11-29T12:00:00.123Z";
  r.event = "egress:allow";
  r.sid = "s1";
  r.detail = {{"host", "a.example"}};
  r.prev = prev;
  r.hash = audit_chain_hash(prev, r);
  return r;
}

class BatchSealTest : public ::testing::Test {
 protected:
  std::shared_ptr<const SigningKey> key = SigningKey::generate();
  BatchSealer sealer{key, "host-a"};
  std::vector<AuditRecord> records{rec(3, std::string(64, '1')), rec(5, std::string(64, '2'))};
  std::string line = sealer.seal(3, 6, std::string(64, 'a'), records, std::nullopt);
};

TEST_F(BatchSealTest, AnHonestSealChecksAndSaysWhatItCovers) {
  ASSERT_TRUE(is_seal_line(line)) << line;
  const SealCheck c = check_seal(line, key->public_key());
  ASSERT_TRUE(c.seal) << c.error;
  EXPECT_EQ(c.seal->first, 3u);
  EXPECT_EQ(c.seal->last, 6u);
  EXPECT_EQ(c.seal->count, 2u);
  EXPECT_EQ(c.seal->host, "host-a");
  EXPECT_EQ(c.seal->digest, records_digest(records));
  EXPECT_FALSE(c.seal->dropped);
}

TEST_F(BatchSealTest, EveryFieldIsSigned) {
  const nlohmann::json orig = nlohmann::json::parse(line);
  const std::vector<std::pair<std::string, nlohmann::json>> edits = {
      {"first", 2},
      {"last", 7},
      {"count", 3},
      {"host", "host-b"},
      {"hash", std::string(64, 'b')},
      {"digest", std::string(64, 'c')},
      {"dropped", {{"first", 3}, {"last", 4}, {"count", 2}}},
      {"extra", 1}};
  for (const auto& [field, value] : edits) {
    nlohmann::json j = orig;
    j[field] = value;
    const SealCheck c = check_seal(j.dump(), key->public_key());
    EXPECT_FALSE(c.seal) << field;
    EXPECT_EQ(c.error, "seal: bad signature") << field;
  }
}

TEST_F(BatchSealTest, AnotherKeysSealIsNamedAsSuch) {
  const auto other = SigningKey::generate();
  const SealCheck c = check_seal(line, other->public_key());
  EXPECT_FALSE(c.seal);
  EXPECT_NE(c.error.find("another key"), std::string::npos) << c.error;
  // And a seal made by the other key with our kid written in fails on the signature.
  BatchSealer forger(other, "host-a");
  nlohmann::json forged =
      nlohmann::json::parse(forger.seal(3, 6, std::string(64, 'a'), records, std::nullopt));
  forged["kid"] = key->kid();
  EXPECT_EQ(check_seal(forged.dump(), key->public_key()).error, "seal: bad signature");
}

TEST_F(BatchSealTest, MalformedSealsAreRefusedWithoutThrowing) {
  const nlohmann::json orig = nlohmann::json::parse(line);
  for (const char* field : {"first", "last", "hash", "digest", "sig", "kid", "count", "v"}) {
    nlohmann::json j = orig;
    j.erase(field);
    EXPECT_FALSE(check_seal(j.dump(), key->public_key()).seal) << field;
  }
  for (const std::string& bad :
       {std::string(""), std::string("{"), std::string("[]"), line.substr(0, line.size() / 2),
        std::string(R"({"zn":"audit-seal","v":1,"first":-1})")})
    EXPECT_FALSE(check_seal(bad, key->public_key()).seal) << bad;
  nlohmann::json reversed = orig;
  reversed["first"] = 9;  // first > last
  EXPECT_EQ(check_seal(reversed.dump(), key->public_key()).error, "seal: malformed");
}

TEST_F(BatchSealTest, ADroppedRangeIsSignedAndMustLieInsideTheSeal) {
  const std::string with_drop = sealer.seal(3, 9, std::string(64, 'a'), records, DroppedRange{7, 9});
  const SealCheck c = check_seal(with_drop, key->public_key());
  ASSERT_TRUE(c.seal) << c.error;
  ASSERT_TRUE(c.seal->dropped);
  EXPECT_EQ(c.seal->dropped->count(), 3u);
  const std::string outside = sealer.seal(3, 9, std::string(64, 'a'), records, DroppedRange{8, 12});
  EXPECT_EQ(check_seal(outside, key->public_key()).error, "seal: malformed dropped range");
}

TEST_F(BatchSealTest, TheDigestDependsOnOrderAndContent) {
  std::vector<AuditRecord> swapped{records[1], records[0]};
  EXPECT_NE(records_digest(records), records_digest(swapped));
  std::vector<AuditRecord> fewer{records[0]};
  EXPECT_NE(records_digest(records), records_digest(fewer));
}

TEST(PublicKeyHex, RoundTripsAndRefusesAnythingElse) {
  const auto key = SigningKey::generate();
  const std::string hex = public_key_hex(key->public_key());
  ASSERT_EQ(hex.size(), 64u);
  EXPECT_EQ(parse_public_key_hex(hex), key->public_key());
  EXPECT_FALSE(parse_public_key_hex(hex.substr(1)));
  EXPECT_FALSE(parse_public_key_hex(hex + "0"));
  EXPECT_FALSE(parse_public_key_hex(std::string(64, 'g')));
}

}  // namespace
}  // namespace zn::broker::audit_export
