// What the sinks put on the wire, without a receiver: RFC 5424 messages and
// the HTTP shapes' bodies.
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "batches.h"
#include "broker/audit_sinks/http_sink.h"
#include "broker/audit_sinks/syslog_sink.h"

namespace zn::broker::audit_sinks {
namespace {

using nlohmann::json;
using test::make_batch;

TEST(SyslogMessage, IsAnRfc5424MessageWithTheLineAsMsg) {
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(syslog_message(16, 6, "2026-11-29T12:00:00.123Z", "zn-host", "zerod", "egress", R"({"a":"é"})"),
            "<134>1 2026-11-29T12:00:00.123Z zn-host zerod " + pid + R"( egress - {"a":"é"})");
  EXPECT_EQ(syslog_message(23, 5, "", "", "zerod", "audit-seal", "{}"),
            "<189>1 - - zerod " + pid + " audit-seal - {}");
}

TEST(SyslogMessage, HeaderFieldsAreMadeToFitRfc5424) {
  const std::string message =
      syslog_message(0, 0, "2026-11-29T12:00:00.123Z", "my host\nname", "zerod", std::string(40, 'm'), "x");
  EXPECT_EQ(message, "<0>1 2026-11-29T12:00:00.123Z my_host_name zerod " + std::to_string(::getpid()) + " " +
                         std::string(32, 'm') + " - x");
}

TEST(HttpRequestBodies, JsonLinesAreTheLinesAndTheSealEachEndingInANewline) {
  const auto batch = make_batch(1, 2);
  const auto requests = http_request_bodies(HttpShape::kJsonLines, batch, "zn-host");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].content_type, "application/x-ndjson");
  EXPECT_EQ(requests[0].body, batch.lines[0] + "\n" + batch.lines[1] + "\n" + batch.seal_line + "\n");
  EXPECT_EQ(requests[0].entries, 3u);
}

TEST(HttpRequestBodies, SplunkEventsCarryTheRecordTimeAndTheLineAsJson) {
  const auto batch = make_batch(61, 1);  // 2026-11-29T12:01:01.123Z
  const auto requests = http_request_bodies(HttpShape::kSplunkHec, batch, "zn-host");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(
      requests[0].body,
      R"({"time":1795953661.123,"host":"zn-host","source":"zerod","sourcetype":"zeroness:audit","event":)" +
          batch.lines[0] +
          "}\n"
          R"({"time":1795957200.456,"host":"zn-host","source":"zerod","sourcetype":"zeroness:audit","event":)" +
          batch.seal_line + "}\n");
}

TEST(HttpRequestBodies, ASealWithoutItsOwnTimeIsStampedNow) {
  auto batch = make_batch(1, 0);
  batch.seal_line = R"({"zn":"audit-seal","first_seq":1,"last_seq":0})";
  const auto before = std::chrono::system_clock::now();
  const auto requests = http_request_bodies(HttpShape::kSplunkHec, batch, "zn-host");
  const double time = json::parse(requests.at(0).body)["time"];
  const double now = std::chrono::duration<double>(before.time_since_epoch()).count();
  EXPECT_NEAR(time, now, 5.0);
  EXPECT_EQ(json::parse(requests.at(0).body)["event"], json::parse(batch.seal_line));
}

TEST(HttpRequestBodies, DatadogEntriesTagTheCategory) {
  const auto batch = make_batch(1, 1);  // seq 1: dns:answer
  const auto requests = http_request_bodies(HttpShape::kDatadog, batch, "zn-host");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].content_type, "application/json");
  const auto entry = [](const std::string& category, const std::string& line) {
    return nlohmann::ordered_json{{"ddsource", "zeroness"},
                                  {"service", "zerod"},
                                  {"hostname", "zn-host"},
                                  {"ddtags", "category:" + category},
                                  {"message", line}}
        .dump();
  };
  EXPECT_EQ(requests[0].body,
            "[" + entry("dns", batch.lines[0]) + "," + entry("audit-seal", batch.seal_line) + "]");
}

TEST(HttpRequestBodies, DatadogRequestsStayUnderBothCaps) {
  const auto batch = make_batch(1, 1500, 6000);  // 1501 entries of ~6 kB: the byte cap first
  const auto requests = http_request_bodies(HttpShape::kDatadog, batch, "zn-host");
  size_t entries = 0;
  for (const auto& r : requests) {
    EXPECT_LE(r.body.size(), kDatadogMaxBytes);
    EXPECT_LE(r.entries, kDatadogMaxEntries);
    EXPECT_EQ(json::parse(r.body).size(), r.entries);
    entries += r.entries;
  }
  EXPECT_EQ(entries, 1501u);
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_LT(requests[0].entries, kDatadogMaxEntries);
  EXPECT_GT(requests[0].body.size() + 6500, kDatadogMaxBytes) << "filled up to the byte cap";
}

}  // namespace
}  // namespace zn::broker::audit_sinks
