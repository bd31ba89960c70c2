// Tamper detection: a chain is written through AuditLog, then edited behind
// its back with the raw SQLite C API, then verified.
#include "support/audit_fixtures.h"

namespace zn::broker {
namespace {

using nlohmann::json;
using test::ev;
using test::raw_sql;

class AuditTamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AuditLog log(opts());
    for (int i = 1; i <= 5; ++i) {
      log.append(ev(i % 2 ? "egress:allow" : "egress:deny", "user-" + std::to_string(i % 2),
                    json{{"host", "h" + std::to_string(i) + ".example.com"}, {"n", i}}));
      clock.advance(std::chrono::milliseconds(10));
    }
    auto r = log.verify();
    ASSERT_TRUE(r.ok) << r.reason;
    ASSERT_EQ(r.records, 5u);
  }
  AuditLogOptions opts() {
    return {db, [this] { return clock.now(); }, [](const std::string&) {}};
  }
  void expect_bad_at(uint64_t seq, const std::string& reason_part) {
    for (auto r : {AuditLog::verify_file(db), AuditLog(opts()).verify()}) {
      EXPECT_FALSE(r.ok);
      ASSERT_TRUE(r.first_bad_seq.has_value());
      EXPECT_EQ(*r.first_bad_seq, seq) << r.reason;
      EXPECT_NE(r.reason.find(reason_part), std::string::npos) << r.reason;
      EXPECT_EQ(r.records, seq - 1);
    }
  }

  test::TempDir dir;
  std::string db = dir.file("audit.db");
  test::FakeClock clock;
};

TEST_F(AuditTamperTest, UntouchedChainVerifiesReadOnly) {
  auto r = AuditLog::verify_file(db);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 5u);
  EXPECT_FALSE(r.first_bad_seq);
  EXPECT_TRUE(r.reason.empty());
}

TEST_F(AuditTamperTest, EditedDetailDetectedAtThatSeq) {
  raw_sql(db, R"(UPDATE audit SET detail='{"host":"evil.example.com","n":3}' WHERE seq=3)");
  expect_bad_at(3, "hash mismatch");
}

TEST_F(AuditTamperTest, EditedEventDetected) {
  raw_sql(db, "UPDATE audit SET event='egress:allow' WHERE seq=4");
  expect_bad_at(4, "hash mismatch");
}

TEST_F(AuditTamperTest, EditedSidDetected) {
  raw_sql(db, "UPDATE audit SET sid='user-9' WHERE seq=2");
  expect_bad_at(2, "hash mismatch");
}

TEST_F(AuditTamperTest, EditedTimestampDetected) {
  raw_sql(db, "UPDATE audit SET ts='2026-11-29T11:00:00.000Z' WHERE seq=5");
  expect_bad_at(5, "hash mismatch");
}

TEST_F(AuditTamperTest, EditedDetailWithRecomputedHashBreaksNextLink) {
  // The tamperer recomputes record 2's hash; record 3's prev no longer matches.
  AuditRecord r2 = AuditLog(opts()).query({.sid = "user-0", .limit = 1}).at(0);
  ASSERT_EQ(r2.seq, 2u);
  r2.detail["host"] = "evil.example.com";
  const std::string forged = audit_chain_hash(r2.prev, r2);
  raw_sql(db, "UPDATE audit SET detail='" + r2.detail.dump() + "', hash='" + forged + "' WHERE seq=2");
  expect_bad_at(3, "prev link");
}

TEST_F(AuditTamperTest, DeletedMiddleRecordDetected) {
  raw_sql(db, "DELETE FROM audit WHERE seq=3");
  expect_bad_at(3, "seq gap");
}

TEST_F(AuditTamperTest, DeletedFirstRecordDetected) {
  raw_sql(db, "DELETE FROM audit WHERE seq=1");
  expect_bad_at(1, "seq gap");
}

TEST_F(AuditTamperTest, SwappedDetailsDetected) {
  raw_sql(db,
          "UPDATE audit SET detail = CASE seq WHEN 2 THEN (SELECT detail FROM audit WHERE seq=4) "
          "ELSE (SELECT detail FROM audit WHERE seq=2) END WHERE seq IN (2,4)");
  expect_bad_at(2, "hash mismatch");
}

TEST_F(AuditTamperTest, ReorderedRecordsDetected) {
  // Swap records 2 and 3 wholesale (their seq numbers exchanged).
  raw_sql(db,
          "UPDATE audit SET seq=-2 WHERE seq=2; UPDATE audit SET seq=2 WHERE seq=3; "
          "UPDATE audit SET seq=3 WHERE seq=-2;");
  expect_bad_at(2, "prev link");
}

TEST_F(AuditTamperTest, PrevLinkTamperingDetected) {
  raw_sql(db, "UPDATE audit SET prev='" + std::string(64, 'f') + "' WHERE seq=4");
  expect_bad_at(4, "prev link");
}

TEST_F(AuditTamperTest, GenesisPrevTamperingDetected) {
  raw_sql(db, "UPDATE audit SET prev='" + std::string(63, '0') + "1' WHERE seq=1");
  expect_bad_at(1, "prev link");
}

TEST_F(AuditTamperTest, InsertedForgedRecordDetected) {
  // Shift 3..5 up by one and insert a well-formed record 3 chained onto 2:
  // the forgery itself verifies, the record after it cannot.
  std::vector<AuditRecord> all = AuditLog(opts()).query({});
  ASSERT_EQ(all.size(), 5u);
  raw_sql(
      db,
      "UPDATE audit SET seq = seq + 100 WHERE seq >= 3; UPDATE audit SET seq = seq - 99 WHERE seq >= 100;");
  AuditRecord f;
  f.seq = 3;
  f.ts = all[1].ts;
  f.event = "egress:allow";
  f.sid = "user-1";
  f.detail = json{{"host", "forged.example.com"}};
  f.prev = all[1].hash;
  f.hash = audit_chain_hash(f.prev, f);
  raw_sql(db, "INSERT INTO audit VALUES(3,'" + f.ts + "','" + f.event + "','" + f.sid + "','" +
                  f.detail.dump() + "','" + f.prev + "','" + f.hash + "')");
  expect_bad_at(4, "");
}

TEST_F(AuditTamperTest, AppendedForgedRecordWithBadLinkDetected) {
  AuditRecord f;
  f.seq = 6;
  f.ts = "2026-11-29T13:00:00.000Z";
  f.event = "egress:allow";
  f.sid = "user-1";
  f.detail = json::object();
  f.prev = std::string(64, '0');
  f.hash = audit_chain_hash(f.prev, f);
  raw_sql(db, "INSERT INTO audit VALUES(6,'" + f.ts + "','" + f.event + "','" + f.sid + "','{}','" + f.prev +
                  "','" + f.hash + "')");
  expect_bad_at(6, "prev link");
}

TEST_F(AuditTamperTest, GarbageDetailDetected) {
  raw_sql(db, "UPDATE audit SET detail='not json' WHERE seq=2");
  expect_bad_at(2, "not valid JSON");
  // Query still works and shows the row rather than failing.
  auto rows = AuditLog(opts()).query({});
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[1].detail, json("not json"));
}

TEST_F(AuditTamperTest, RestartedLogDoesNotHideTampering) {
  raw_sql(db, "UPDATE audit SET detail='{}' WHERE seq=2");
  {
    AuditLog log(opts());
    log.append(ev("session:delete", "user-1"));
  }
  expect_bad_at(2, "hash mismatch");
}

}  // namespace
}  // namespace zn::broker
