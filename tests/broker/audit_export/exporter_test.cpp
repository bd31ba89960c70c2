// The exporter over a real audit store: order, retries, restarts, filters,
// the spool bound, and the verifier's verdict on what a sink received.
#include "broker/audit_export/exporter.h"

#include <thread>

#include <gtest/gtest.h>

#include "export_fixture.h"
#include "test_sinks.h"

namespace zn::broker::audit_export::test {
namespace {

using namespace std::chrono_literals;

class ExporterTest : public ExportFixture {
 protected:
  std::unique_ptr<AuditExporter> start(SinkTape& tape, ExportSettings s = {},
                                       std::vector<DroppedRange>* drops = nullptr) {
    return std::make_unique<AuditExporter>(options(std::move(s)), std::make_unique<TapeSink>(tape), sealer,
                                           [drops](const std::string&, const DroppedRange& r) {
                                             if (drops) drops->push_back(r);
                                           });
  }
  static std::vector<uint64_t> seqs(const std::vector<std::string>& lines) {
    std::vector<uint64_t> out;
    for (const std::string& l : lines)
      if (!is_seal_line(l)) out.push_back(nlohmann::json::parse(l)["seq"].get<uint64_t>());
    return out;
  }
};

TEST_F(ExporterTest, EveryRecordArrivesInOrderSealedAndVerifies) {
  SinkTape tape;
  ExportSettings s;
  s.batch_max = 7;
  auto exp = start(tape, s);
  append(40);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  std::vector<uint64_t> want(40);
  for (uint64_t i = 0; i < 40; ++i) want[i] = i + 1;
  EXPECT_EQ(seqs(lines), want);
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const ExportVerifyResult r = verify_lines(lines, v);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 40u);
  EXPECT_GE(r.seals, 6u);  // batches of at most 7
  EXPECT_EQ(exp->stats().delivered_records, 40u);
}

TEST_F(ExporterTest, ANewSinkStartsAtTheHeadNotAtTheBeginning) {
  append(5);
  SinkTape tape;
  auto exp = start(tape);
  append(3);
  ASSERT_TRUE(exp->drain(10s));
  EXPECT_EQ(seqs(tape.snapshot()), (std::vector<uint64_t>{6, 7, 8}));
}

TEST_F(ExporterTest, FailedDeliveriesAreRetriedAndNothingIsLostOrDuplicated) {
  SinkTape tape;
  auto exp = start(tape);
  tape.fail_next = 3;
  append(10);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  EXPECT_EQ(seqs(lines).size(), 10u);
  EXPECT_GE(tape.attempts.load(), 4);
  EXPECT_EQ(exp->stats().failures, 3u);
  EXPECT_TRUE(verify_lines(lines).ok);
}

TEST_F(ExporterTest, ARestartResumesFromTheCursorInOrder) {
  SinkTape tape;
  {
    auto exp = start(tape);
    append(6);
    ASSERT_TRUE(exp->drain(10s));
  }
  append(6);  // while no exporter runs
  auto exp = start(tape);
  append(3);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  std::vector<uint64_t> want(15);
  for (uint64_t i = 0; i < 15; ++i) want[i] = i + 1;
  EXPECT_EQ(seqs(lines), want);
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const auto r = verify_lines(lines, v);
  EXPECT_TRUE(r.ok) << r.reason;
}

TEST_F(ExporterTest, ASinkDownDuringARestartLosesNothingThatFitInItsSpool) {
  SinkTape tape;
  ExportSettings s;
  s.spool_max_records = 100;
  {
    auto exp = start(tape, s);
    append(4);
    ASSERT_TRUE(exp->drain(10s));
    tape.down = true;
    append(20);
    std::this_thread::sleep_for(200ms);  // some failed attempts
  }
  append(20);
  tape.down = false;
  auto exp = start(tape, s);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  EXPECT_EQ(seqs(lines).size(), 44u);
  EXPECT_EQ(exp->stats().dropped_records, 0u);
  EXPECT_TRUE(verify_lines(lines).ok);
}

TEST_F(ExporterTest, PastTheSpoolBoundTheOldestAreDroppedReportedAndDeclared) {
  SinkTape tape;
  ExportSettings s;
  s.spool_max_records = 10;
  std::vector<DroppedRange> drops;
  {
    auto exp = start(tape, s);
    append(2);
    ASSERT_TRUE(exp->drain(10s));
  }
  append(30);  // seqs 3..32 while the exporter is away: 20 past the bound
  tape.down = true;
  auto exp = start(tape, s, &drops);
  for (int i = 0; i < 200 && exp->stats().dropped_records == 0; ++i) std::this_thread::sleep_for(20ms);
  tape.down = false;
  ASSERT_TRUE(exp->drain(10s));
  EXPECT_EQ(exp->stats().dropped_records, 20u);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].first, 3u);
  EXPECT_EQ(drops[0].last, 22u);
  const auto lines = tape.snapshot();
  EXPECT_EQ(seqs(lines).size(), 12u);  // 2 before, the 10 newest
  const ExportVerifyResult r = verify_lines(lines);
  EXPECT_TRUE(r.ok) << r.reason;
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_EQ(r.dropped[0].first, 3u);
  EXPECT_EQ(r.dropped[0].last, 22u);
  auto strict = verify_options();
  strict.strict = true;
  EXPECT_FALSE(verify_lines(lines, strict).ok);
}

TEST_F(ExporterTest, AFilterTakesOnlyItsEventsAndSessionsAndTheRangeStillChains) {
  SinkTape tape;
  ExportSettings s;
  s.filter.events = {"dns:"};
  s.filter.sessions = {"s2"};
  auto exp = start(tape, s);
  append(20);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  for (uint64_t q : seqs(lines)) EXPECT_EQ(q % 2, 0u) << q;  // dns:deny records are the even seqs
  EXPECT_EQ(seqs(lines).size(), 10u);
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const auto r = verify_lines(lines, v);
  EXPECT_TRUE(r.ok) << r.reason;
}

TEST_F(ExporterTest, ASinkWhoseFilterTakesNothingStillGetsSealsForAnchors) {
  SinkTape tape;
  ExportSettings s;
  s.filter.events = {"command:run"};
  s.idle_seal = 100ms;
  auto exp = start(tape, s);
  append(5);
  for (int i = 0; i < 200 && tape.snapshot().empty(); ++i) std::this_thread::sleep_for(20ms);
  const auto lines = tape.snapshot();
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_TRUE(is_seal_line(lines[0]));
  auto v = verify_options();
  v.anchor = parse_export_anchor(head_anchor());
  const auto r = verify_lines(lines, v);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.last_seq, 5u);
}

TEST_F(ExporterTest, OcsfLinesCarryTheNativeRecordAndVerify) {
  SinkTape tape;
  ExportSettings s;
  s.format = ExportFormat::kOcsf;
  auto exp = start(tape, s);
  append(4);
  ASSERT_TRUE(exp->drain(10s));
  const auto lines = tape.snapshot();
  const auto http = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(http["class_uid"], 4002);
  EXPECT_EQ(http["activity_id"], 3);  // GET
  EXPECT_EQ(http["http_request"]["url"]["hostname"], "api.example");
  EXPECT_EQ(http["unmapped"]["zn"]["seq"], 1);
  const auto dns = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(dns["class_uid"], 4003);
  EXPECT_EQ(dns["disposition_id"], 2);
  EXPECT_EQ(dns["query"]["hostname"], "n1.example");
  EXPECT_TRUE(verify_lines(lines).ok);
  // A field outside the native record is derived from it: changing one shows.
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"disposition_id", 1}, {"severity_id", 5}, {"class_uid", 4001}, {"extra", true}}) {
    auto edited = lines;
    nlohmann::json j = nlohmann::json::parse(edited[1]);
    j[field] = value;
    edited[1] = j.dump();
    const auto r = verify_lines(edited);
    EXPECT_FALSE(r.ok) << field;
    EXPECT_NE(r.reason.find("OCSF"), std::string::npos) << r.reason;
  }
  auto other_host = lines;
  nlohmann::json j = nlohmann::json::parse(other_host[0]);
  j["device"]["hostname"] = "host-b";
  other_host[0] = j.dump();
  EXPECT_FALSE(verify_lines(other_host).ok);
}

}  // namespace
}  // namespace zn::broker::audit_export::test
