// Retention on a real audit store: the oldest records go by count and by
// age, in chunks, the store keeps a checkpoint signed by the audit key, the
// chain still verifies from it, and a cut nobody signed fails.
#include "broker/daemon/audit_retention.h"

#include <gtest/gtest.h>

#include "broker/audit_export/batch_seal.h"
#include "broker/policy/parser.h"
#include "support/audit_fixtures.h"

namespace zn::broker {
namespace {

using test::CapturingSink;
using test::ev;
using test::TempDir;

class AuditRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AuditLogOptions o;
    o.db_path = dir.file("audit.db");
    o.sink = quiet.fn();
    o.clock = [this] {
      return old_clock ? test::FakeClock::base() - std::chrono::hours(24 * 30)
                       : std::chrono::system_clock::now();
    };
    log = std::make_unique<AuditLog>(std::move(o));
  }
  void append(int n) {
    for (int i = 0; i < n; ++i)
      log->append(ev("dns:deny", "s1", {{"name", "n" + std::to_string(i) + ".example"}}));
  }
  AuditVerifyResult verify() {
    log->flush();
    return AuditLog::verify_file(dir.file("audit.db"));
  }

  TempDir dir;
  CapturingSink quiet;
  std::atomic<bool> old_clock{false};
  std::unique_ptr<AuditLog> log;
  std::shared_ptr<const SigningKey> key = SigningKey::generate();
};

TEST_F(AuditRetentionTest, ByCountTheOldestGoAndTheChainVerifiesFromASignedCheckpoint) {
  append(100);
  ASSERT_TRUE(verify().ok);  // positive control before the cut
  AuditRetentionOptions o;
  o.max_records = 30;
  o.chunk = 16;  // several transactions
  o.background = false;
  AuditRetention retention(o, *log, key);
  EXPECT_EQ(retention.run_once(), 70u);
  const AuditVerifyResult v = verify();
  ASSERT_TRUE(v.ok) << v.reason;
  ASSERT_TRUE(v.checkpoint_seq);
  EXPECT_EQ(*v.checkpoint_seq, 70u);
  const auto cp = log->checkpoint();
  ASSERT_TRUE(cp);
  EXPECT_TRUE(audit_export::audit_checkpoint_signed_by(*cp, key->public_key()));
  EXPECT_FALSE(audit_export::audit_checkpoint_signed_by(*cp, SigningKey::generate()->public_key()));
  // The pass was audited.
  AuditQuery q;
  q.event = "audit:pruned";
  const auto pruned = log->query(q);
  ASSERT_EQ(pruned.size(), 1u);
  EXPECT_EQ(pruned[0].detail["count"], 70);
  EXPECT_EQ(pruned[0].detail["through"], 70);
}

TEST_F(AuditRetentionTest, ByAgeOnlyOldRecordsGo) {
  old_clock = true;
  append(20);
  old_clock = false;
  append(5);
  AuditRetentionOptions o;
  o.max_age = std::chrono::hours(24);
  o.background = false;
  AuditRetention retention(o, *log, key);
  EXPECT_EQ(retention.run_once(), 20u);
  const AuditVerifyResult v = verify();
  ASSERT_TRUE(v.ok) << v.reason;
  ASSERT_TRUE(v.checkpoint_seq);
  EXPECT_EQ(*v.checkpoint_seq, 20u);
  EXPECT_GE(v.records, 5u);
}

TEST_F(AuditRetentionTest, ACutNobodySignedFails) {
  append(40);
  AuditRetentionOptions o;
  o.max_records = 30;
  o.background = false;
  AuditRetention(o, *log, key).run_once();
  ASSERT_TRUE(verify().ok);
  // Deleting more records by hand breaks the chain at the checkpoint...
  log->flush();
  test::raw_sql(dir.file("audit.db"), "DELETE FROM audit WHERE seq <= 12");
  EXPECT_FALSE(verify().ok);
  // ...and moving the checkpoint along with them leaves a signature that no longer matches.
  test::raw_sql(dir.file("audit.db"),
                "UPDATE audit_checkpoint SET seq = 12, hash = (SELECT prev FROM audit WHERE seq = 13)");
  const AuditVerifyResult v = verify();
  ASSERT_TRUE(v.ok) << v.reason;  // the chain alone cannot tell...
  const auto cp = log->checkpoint();
  ASSERT_TRUE(cp);
  EXPECT_FALSE(audit_export::audit_checkpoint_signed_by(*cp, key->public_key()));  // ...the signature does
}

TEST_F(AuditRetentionTest, WithoutLimitsNothingIsCut) {
  append(10);
  AuditRetention retention(AuditRetentionOptions{}, *log, key);
  EXPECT_EQ(retention.run_once(), 0u);
  const AuditVerifyResult v = verify();
  EXPECT_TRUE(v.ok);
  EXPECT_FALSE(v.checkpoint_seq);
}

TEST(AuditRetentionConfig, FieldsAreChecked) {
  const auto o = parse_audit_retention({{"max_age_days", 30}, {"max_records", 1000}});
  EXPECT_EQ(o.max_age, std::chrono::hours(24 * 30));
  EXPECT_EQ(o.max_records, 1000u);
  for (const nlohmann::json& bad :
       {nlohmann::json::object(), nlohmann::json({{"max_age_days", 0}}),
        nlohmann::json({{"max_records", -1}}), nlohmann::json({{"keep", 1}}), nlohmann::json(5)})
    EXPECT_THROW(parse_audit_retention(bad), PolicyError) << bad.dump();
}

}  // namespace
}  // namespace zn::broker
