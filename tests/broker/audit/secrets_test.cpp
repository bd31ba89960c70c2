// AuditSecrets: each session's records redacted with its own secrets and the
// daemon-wide ones, records of no session with every secret, a session's
// values replaced on update and forgotten on delete.
#include "broker/audit/secrets.h"

#include <gtest/gtest.h>

#include <string>

namespace zn::broker {
namespace {

const std::string kA = "sk_live_session_a_0001", kB = "sk_live_session_b_0002",
                  kGlobal = "daemon-wide-secret-0003";

std::string redacted(const AuditSecrets& secrets, const std::string& sid, const std::string& text) {
  return secrets.for_record(sid)->redact(text);
}

TEST(AuditSecrets, ASessionsRecordsAreRedactedWithItsOwnSecretsAndTheDaemonWideOnes) {
  AuditSecrets secrets;
  ASSERT_TRUE(secrets.add(kGlobal));
  EXPECT_EQ(secrets.set_session("a", {kA}), 1u);
  EXPECT_EQ(secrets.set_session("b", {kB}), 1u);
  EXPECT_EQ(redacted(secrets, "a", "x " + kA + " " + kGlobal), "x [redacted] [redacted]");
  // One session's scan holds only its own values: the other session's is
  // not its to redact (and costs its records nothing).
  EXPECT_EQ(secrets.for_record("a")->size(), 2u);
  EXPECT_EQ(redacted(secrets, "b", "x " + kB), "x [redacted]");
  // A daemon-wide value added later reaches the sessions already there.
  const std::string later = "added-after-the-sessions";
  ASSERT_TRUE(secrets.add(later));
  EXPECT_EQ(redacted(secrets, "a", later), "[redacted]");
  EXPECT_EQ(secrets.count(), 4u);
}

TEST(AuditSecrets, ARecordOfNoSessionOrAnUnknownOneIsRedactedWithEverySecret) {
  AuditSecrets secrets;
  ASSERT_TRUE(secrets.add(kGlobal));
  secrets.set_session("a", {kA});
  secrets.set_session("b", {kB});
  for (const std::string sid : {"", "not-a-session"})
    EXPECT_EQ(redacted(secrets, sid, kA + "," + kB + "," + kGlobal), "[redacted],[redacted],[redacted]")
        << sid;
  // The merged set follows a change made after it was first built.
  const std::string c = "sk_live_session_c_0004";
  secrets.set_session("c", {c});
  EXPECT_EQ(redacted(secrets, "", c), "[redacted]");
  secrets.forget_session("a");
  EXPECT_EQ(redacted(secrets, "", kA), kA);
}

TEST(AuditSecrets, AnUpdateReplacesTheSessionsValuesAndADeleteForgetsThem) {
  AuditSecrets secrets;
  EXPECT_EQ(secrets.set_session("a", {kA, "short", "sk_live_second_value"}),
            2u);  // "short" cannot be matched
  EXPECT_EQ(secrets.count(), 2u);
  const auto before = secrets.for_record("a");
  const std::string next = "sk_live_rotated_0005";
  secrets.set_session("a", {next});
  EXPECT_EQ(secrets.count(), 1u);
  EXPECT_EQ(redacted(secrets, "a", kA + " " + next), kA + " [redacted]");
  // A snapshot taken before (a record posted then) keeps what it had.
  EXPECT_EQ(before->redact(kA), "[redacted]");
  secrets.forget_session("a");
  EXPECT_EQ(secrets.count(), 0u);
  EXPECT_EQ(redacted(secrets, "a", next), next);
  secrets.forget_session("a");  // twice: nothing
  EXPECT_EQ(secrets.count(), 0u);
}

}  // namespace
}  // namespace zn::broker
