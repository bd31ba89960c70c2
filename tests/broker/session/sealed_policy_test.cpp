// Session policies at rest: resource values sealed per session and field,
// nothing of a value left in the JSON, a wrong or missing key refused (never
// an empty store), plaintext from before sealing taken and flagged, rotation.
#include "broker/session/sealed_policy.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "broker/policy/parser.h"
#include "support/secret_encodings.h"

namespace zn::broker {
namespace {

using ::zn::test::encodings_of;

constexpr const char* kToken = "sk_live_sealed_policy_7c1e99aa";

std::string policy_with(const std::string& token, const std::string& extra = "") {
  return R"({"policy":{"allow":[{"host":"api.stripe.com","identity":"cap:stripe"}]},)"
         R"("resources":{"stripe":{"accessToken":")" +
         token + R"(","account":"acct_1")" + extra + "}}}";
}

std::string reveal(const Policy& p, const std::string& resource, const std::string& field) {
  return p.resources.at(resource).fields.at(field).reveal([](std::string_view v) { return std::string(v); });
}

class SealedPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_GE(sodium_init(), 0); }
  OpenedPolicy open(std::string_view id, const std::string& sealed, const HostKey* other = nullptr) {
    std::vector<const HostKey*> keys{&key_};
    if (other) keys.push_back(other);
    return open_sealed_policy(keys, id, sealed);
  }
  HostKey key_ = HostKey::generate();
};

TEST_F(SealedPolicyTest, NoValueIsLeftInTheSealedJsonAndItOpensBack) {
  const std::string sealed = seal_policy_json(key_, "user-1", policy_with(kToken));
  for (const std::string& e : encodings_of(kToken)) EXPECT_EQ(sealed.find(e), std::string::npos) << e;
  EXPECT_EQ(sealed.find("acct_1"), std::string::npos);
  EXPECT_NE(sealed.find("\"znsealed:v1:" + key_.id() + ":"), std::string::npos) << sealed;
  // The rest of the policy is as it was.
  EXPECT_NE(sealed.find("api.stripe.com"), std::string::npos);
  OpenedPolicy p = open("user-1", sealed);
  EXPECT_FALSE(p.had_plaintext);
  EXPECT_FALSE(p.had_other_key);
  EXPECT_EQ(reveal(p.policy, "stripe", "accessToken"), kToken);
  EXPECT_EQ(reveal(p.policy, "stripe", "account"), "acct_1");
  ASSERT_EQ(p.policy.allow.size(), 1u);
  EXPECT_EQ(*p.policy.allow[0].identity, "stripe");
}

TEST_F(SealedPolicyTest, SealingTwiceGivesUnrelatedEnvelopes) {
  EXPECT_NE(seal_policy_json(key_, "user-1", policy_with(kToken)),
            seal_policy_json(key_, "user-1", policy_with(kToken)));
}

TEST_F(SealedPolicyTest, AnotherKeyIsARefusalNamingBothKeys) {
  const HostKey other = HostKey::generate();
  const std::string sealed = seal_policy_json(other, "user-1", policy_with(kToken));
  try {
    open("user-1", sealed);
    FAIL() << "opened under the wrong key";
  } catch (const SealedStateError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(other.id()), std::string::npos) << what;
    EXPECT_NE(what.find(key_.id()), std::string::npos) << what;
    EXPECT_NE(what.find("user-1"), std::string::npos) << what;
    EXPECT_NE(what.find("resources.stripe."), std::string::npos) << what;
    EXPECT_EQ(what.find(kToken), std::string::npos);
  }
}

TEST_F(SealedPolicyTest, AnEnvelopeMovedToAnotherSessionOrFieldDoesNotOpen) {
  const std::string sealed = seal_policy_json(key_, "user-1", policy_with(kToken));
  EXPECT_THROW(open("user-2", sealed), SealedStateError);
  // Swap the two fields' envelopes: each is bound to its own field.
  nlohmann::json doc = nlohmann::json::parse(sealed);
  auto& fields = doc["resources"]["stripe"];
  std::swap(fields["accessToken"], fields["account"]);
  EXPECT_THROW(open("user-1", doc.dump()), SealedStateError);
  // A control: the unswapped document opens for its own session.
  EXPECT_NO_THROW(open("user-1", sealed));
}

TEST_F(SealedPolicyTest, ATamperedEnvelopeIsARefusal) {
  std::string sealed = seal_policy_json(key_, "user-1", policy_with(kToken));
  const size_t at = sealed.find("znsealed:v1:");
  ASSERT_NE(at, std::string::npos);
  const size_t payload = sealed.find(':', at + 12 + 16) + 5;  // a byte inside the ciphertext
  sealed[payload] = sealed[payload] == 'A' ? 'B' : 'A';
  EXPECT_THROW(open("user-1", sealed), SealedStateError);
}

TEST_F(SealedPolicyTest, PlaintextFromBeforeSealingOpensAndIsFlagged) {
  OpenedPolicy p = open("user-1", policy_with(kToken));
  EXPECT_TRUE(p.had_plaintext);
  EXPECT_EQ(reveal(p.policy, "stripe", "accessToken"), kToken);
  // Resealed under the key, the plaintext is gone.
  const std::string sealed = reseal_policy_json(key_, key_, "user-1", policy_with(kToken));
  EXPECT_EQ(sealed.find(kToken), std::string::npos);
  EXPECT_FALSE(open("user-1", sealed).had_plaintext);
}

TEST_F(SealedPolicyTest, RotationResealsUnderTheNewKeyOnly) {
  const HostKey next = HostKey::generate();
  const std::string old_sealed = seal_policy_json(key_, "user-1", policy_with(kToken));
  const std::string resealed = reseal_policy_json(key_, next, "user-1", old_sealed);
  EXPECT_EQ(resealed.find(key_.id()), std::string::npos);
  EXPECT_NE(resealed.find(next.id()), std::string::npos);
  for (const std::string& e : encodings_of(kToken)) EXPECT_EQ(resealed.find(e), std::string::npos) << e;
  // Only the new key opens it; with both (an interrupted rotation) it opens
  // and says so.
  EXPECT_THROW(open("user-1", resealed), SealedStateError);
  OpenedPolicy p = open("user-1", resealed, &next);
  EXPECT_TRUE(p.had_other_key);
  EXPECT_EQ(reveal(p.policy, "stripe", "accessToken"), kToken);
  // Resealing again (a rotation resumed after a crash) keeps what is done.
  EXPECT_EQ(reseal_policy_json(key_, next, "user-1", resealed), resealed);
}

TEST_F(SealedPolicyTest, APolicyWithoutResourcesIsUnchangedInMeaning) {
  const std::string plain = R"({"policy":{"allow":[{"host":"api.github.com"}]}})";
  const std::string sealed = seal_policy_json(key_, "user-1", plain);
  EXPECT_EQ(nlohmann::json::parse(sealed), nlohmann::json::parse(plain));
  EXPECT_EQ(open("user-1", sealed).policy.allow.size(), 1u);
}

TEST(ParsePolicyReader, ARefusedValueIsAPolicyErrorAtItsPathWithoutTheValue) {
  const SecretReader refuse = [](const std::string&, const std::string&, const std::string&) -> Secret {
    throw std::runtime_error("does not open");
  };
  try {
    parse_policy(policy_with(kToken), refuse);
    FAIL() << "accepted";
  } catch (const PolicyError& e) {
    EXPECT_EQ(e.path(), "$.resources.stripe.accessToken");
    EXPECT_EQ(std::string(e.what()).find(kToken), std::string::npos) << e.what();
  }
}

TEST(ParsePolicyReader, TheOpenedValueMayNotExceedTheSecretLimit) {
  PolicyLimits limits;
  limits.max_secret_bytes = 8;
  const SecretReader longer = [](const std::string&, const std::string&, const std::string&) {
    return Secret(std::string(9, 'x'));
  };
  EXPECT_THROW(parse_policy(policy_with("short"), longer, limits), PolicyError);
  const SecretReader fits = [](const std::string&, const std::string&, const std::string&) {
    return Secret(std::string(8, 'x'));
  };
  EXPECT_NO_THROW(parse_policy(policy_with("short"), fits, limits));
}

}  // namespace
}  // namespace zn::broker
