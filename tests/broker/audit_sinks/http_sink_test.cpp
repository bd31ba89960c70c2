// The HTTP sink against a real receiver (http_receiver.py, a child process):
// the three shapes' bodies and headers as sent, the token in its header and
// in no error, Datadog's request caps, Retry-After, timeouts and HTTPS
// verification.
#include <time.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "batches.h"
#include "broker/audit_sinks/http_sink.h"
#include "broker/audit_sinks/sink_factory.h"
#include "http_receiver.h"
#include "support/temp_dir.h"
#include "token_file.h"

namespace zn::broker::audit_sinks {
namespace {

using audit_export::ExportBatch;
using audit_export::SinkContext;
using audit_export::SinkError;
using nlohmann::json;
using test::HttpReceiver;
using test::make_batch;
using Clock = std::chrono::steady_clock;

constexpr const char* kToken = "zn-T0ken-5ecret-9f8e7d6c";

// RFC 3339 with milliseconds to HEC's "time", computed apart from the sink.
std::string hec_time_of(const std::string& ts) {
  tm t{};
  int ms = 0;
  std::sscanf(ts.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour,
              &t.tm_min, &t.tm_sec, &ms);
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld.%03d", static_cast<long long>(::timegm(&t)), ms);
  return buf;
}

std::string joined_with_newlines(const ExportBatch& batch) {
  std::string out;
  for (const auto& line : batch.lines) out += line + "\n";
  return out + batch.seal_line + "\n";
}

class HttpSinkTest : public ::testing::Test {
 protected:
  // A sink built from its JSON config, as zerod builds it.
  std::unique_ptr<audit_export::AuditSink> sink(json config) {
    config["type"] = "http";
    return make_network_sink(config, "$.audit_sinks[0]", context);
  }
  std::string token_file() { return test::write_token_file(dir.file("token"), kToken); }

  zn::test::TempDir dir;
  SinkContext context{"zn-host", ""};
  HttpReceiver receiver{dir.file("http")};
};

TEST_F(HttpSinkTest, JsonLinesPostsEachLineThenTheSeal) {
  const ExportBatch batch = make_batch(1, 4);
  sink({{"url", receiver.url("/audit?source=zn")}, {"shape", "json_lines"}})->deliver(batch);

  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].path, "/audit?source=zn");
  EXPECT_EQ(requests[0].header("Content-Type"), "application/x-ndjson");
  EXPECT_EQ(requests[0].header("Authorization"), std::nullopt);
  EXPECT_EQ(requests[0].header("Expect"), std::nullopt);
  EXPECT_EQ(requests[0].body, joined_with_newlines(batch));
}

TEST_F(HttpSinkTest, JsonLinesSendsABearerTokenWhenGivenOne) {
  const ExportBatch batch = make_batch(1, 2);
  auto s = sink({{"url", receiver.url("/")}, {"shape", "json_lines"}, {"token_file", token_file()}});
  s->deliver(batch);
  s->deliver(make_batch(3, 1));  // kept alive between batches

  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].header("Authorization"), std::string("Bearer ") + kToken);
  EXPECT_EQ(requests[0].body, joined_with_newlines(batch));
}

TEST_F(HttpSinkTest, SplunkHecPostsEventObjectsWithTheToken) {
  const ExportBatch batch = make_batch(1, 3);
  sink({{"url", receiver.url("/services/collector/event")},
        {"shape", "splunk_hec"},
        {"token_file", token_file()}})
      ->deliver(batch);

  std::string expected;
  const auto event = [&](const std::string& ts, const std::string& line) {
    expected +=
        "{\"time\":" + hec_time_of(ts) +
        ",\"host\":\"zn-host\",\"source\":\"zerod\",\"sourcetype\":\"zeroness:audit\",\"event\":" + line +
        "}\n";
  };
  for (size_t i = 0; i < batch.lines.size(); ++i) event(batch.records[i].ts, batch.lines[i]);
  event(json::parse(batch.seal_line)["ts"], batch.seal_line);

  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].path, "/services/collector/event");
  EXPECT_EQ(requests[0].header("Authorization"), std::string("Splunk ") + kToken);
  EXPECT_EQ(requests[0].header("Content-Type"), "application/json");
  EXPECT_EQ(requests[0].body, expected);
  EXPECT_EQ(hec_time_of("2026-11-29T12:00:01.123Z"), "1795953601.123");  // the helper itself
}

TEST_F(HttpSinkTest, DatadogPostsAnArrayOfEntriesWithTheApiKey) {
  receiver.answer({{"status", 202}});  // what Datadog answers
  const ExportBatch batch = make_batch(1, 3);
  sink({{"url", receiver.url("/api/v2/logs")}, {"shape", "datadog"}, {"token_file", token_file()}})
      ->deliver(batch);

  json expected = json::array();
  const auto entry = [&](const std::string& category, const std::string& line) {
    expected.push_back({{"ddsource", "zeroness"},
                        {"service", "zerod"},
                        {"hostname", "zn-host"},
                        {"ddtags", "category:" + category},
                        {"message", line}});
  };
  for (size_t i = 0; i < batch.lines.size(); ++i)
    entry(audit_export::event_category(batch.records[i].event), batch.lines[i]);
  entry("audit-seal", batch.seal_line);

  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].header("DD-API-KEY"), kToken);
  EXPECT_EQ(requests[0].header("Authorization"), std::nullopt);
  EXPECT_EQ(requests[0].header("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(requests[0].body), expected);
}

// The messages of every entry of every request, in order, and each request's entry count.
std::pair<std::vector<std::string>, std::vector<size_t>> datadog_messages(
    const std::vector<test::ReceivedRequest>& requests) {
  std::vector<std::string> messages;
  std::vector<size_t> counts;
  for (const auto& request : requests) {
    const json entries = json::parse(request.body);
    counts.push_back(entries.size());
    for (const auto& e : entries) messages.push_back(e["message"]);
  }
  return {messages, counts};
}

TEST_F(HttpSinkTest, DatadogSplitsABatchAtAThousandEntries) {
  const ExportBatch batch = make_batch(1, 2500);
  sink({{"url", receiver.url("/api/v2/logs")}, {"shape", "datadog"}, {"token_file", token_file()}})
      ->deliver(batch);

  const auto [messages, counts] = datadog_messages(receiver.requests());
  EXPECT_EQ(counts, (std::vector<size_t>{1000, 1000, 501}));
  std::vector<std::string> expected = batch.lines;
  expected.push_back(batch.seal_line);
  EXPECT_EQ(messages, expected);
}

TEST_F(HttpSinkTest, DatadogSplitsABatchAtFiveMegabytes) {
  const ExportBatch batch = make_batch(1, 120, 100 * 1000);  // about 12 MB
  sink({{"url", receiver.url("/api/v2/logs")}, {"shape", "datadog"}, {"token_file", token_file()}})
      ->deliver(batch);

  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const auto& request : requests) EXPECT_LE(request.body.size(), kDatadogMaxBytes);
  const auto [messages, counts] = datadog_messages(requests);
  std::vector<std::string> expected = batch.lines;
  expected.push_back(batch.seal_line);
  EXPECT_EQ(messages, expected);
}

TEST_F(HttpSinkTest, ABusyReceiversRetryAfterIsPassedOn) {
  auto s = sink({{"url", receiver.url("/")}, {"shape", "json_lines"}});
  const ExportBatch batch = make_batch(1, 2);
  const auto retry_after = [&]() -> std::optional<std::chrono::milliseconds> {
    try {
      s->deliver(batch);
    } catch (const SinkError& e) {
      return e.retry_after.value_or(std::chrono::milliseconds(-1));
    }
    return std::nullopt;
  };
  receiver.answer({{"status", 503}, {"retry_after", "7"}});
  EXPECT_EQ(retry_after(), std::chrono::milliseconds(7000));
  receiver.answer({{"status", 429}, {"retry_after", "2"}});
  EXPECT_EQ(retry_after(), std::chrono::milliseconds(2000));
  receiver.answer({{"status", 503}});
  EXPECT_EQ(retry_after(), std::chrono::milliseconds(-1)) << "no Retry-After: the exporter's own backoff";
  receiver.answer({{"status", 500}, {"retry_after", "7"}});
  EXPECT_EQ(retry_after(), std::chrono::milliseconds(-1)) << "Retry-After only counts on 429 and 503";
  receiver.answer({{"status", 200}});
  EXPECT_EQ(retry_after(), std::nullopt) << "the receiver is back: the same sink delivers";
  EXPECT_EQ(receiver.requests().size(), 5u);
}

TEST_F(HttpSinkTest, ARejectedBatchFailsWithTheStatusAndNeverTheToken) {
  // The receiver echoes the request's headers, token included, in its answer.
  receiver.answer({{"status", 400}, {"body", "invalid event"}, {"echo_headers", true}});
  auto s = sink({{"url", receiver.url("/services/collector/event?channel=x")},
                 {"shape", "splunk_hec"},
                 {"token_file", token_file()}});
  try {
    s->deliver(make_batch(1, 2));
    ADD_FAILURE() << "a 400 counted as delivered";
  } catch (const SinkError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("HTTP 400: invalid event"), std::string::npos) << what;
    EXPECT_EQ(what.find(kToken), std::string::npos) << what;
    EXPECT_NE(what.find("Splunk <redacted>"), std::string::npos) << what;
    EXPECT_EQ(what.find("channel=x"), std::string::npos) << "no query string in messages: " << what;
    EXPECT_FALSE(e.retry_after.has_value());
  }
  ASSERT_EQ(receiver.requests().size(), 1u);
  EXPECT_EQ(receiver.requests()[0].header("Authorization"), std::string("Splunk ") + kToken);

  receiver.answer({{"status", 502}, {"body", std::string(5000, 'z')}});
  try {
    s->deliver(make_batch(1, 2));
    ADD_FAILURE() << "a 502 counted as delivered";
  } catch (const SinkError& e) {
    EXPECT_LT(std::string(e.what()).size(), 320u) << "at most ~200 bytes of the answer";
  }
}

TEST_F(HttpSinkTest, AHangingReceiverTimesOut) {
  receiver.answer({{"hang", 30}});
  auto s = sink(
      {{"url", receiver.url("/")}, {"shape", "datadog"}, {"token_file", token_file()}, {"timeout_ms", 1000}});
  const auto start = Clock::now();
  try {
    s->deliver(make_batch(1, 2));
    ADD_FAILURE() << "no answer counted as delivered";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("imeout"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find(kToken), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(), 2500);
}

TEST_F(HttpSinkTest, NothingListeningIsASinkError) {
  auto s = sink({{"url", "http://127.0.0.1:1/"}, {"shape", "json_lines"}});
  EXPECT_THROW(s->deliver(make_batch(1, 1)), SinkError);
}

class HttpsSinkTest : public ::testing::Test {
 protected:
  zn::test::TempDir dir;
  test::TestPki pki = test::make_test_pki(dir.path().string(), "a");
  HttpReceiver receiver{dir.file("https"), pki};
  SinkContext context{"zn-host", ""};
};

TEST_F(HttpsSinkTest, VerifiesTheReceiverAgainstTheCaFile) {
  const ExportBatch batch = make_batch(1, 3);
  const json config = {{"type", "http"},
                       {"url", receiver.url("/in", true)},
                       {"shape", "json_lines"},
                       {"ca_file", pki.ca_cert}};
  make_network_sink(config, "$.audit_sinks[0]", context)->deliver(batch);
  const auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].body, joined_with_newlines(batch));
}

TEST_F(HttpsSinkTest, RefusesACertificateFromAnotherCa) {
  const test::TestPki other = test::make_test_pki(dir.path().string(), "b");
  const json config = {{"type", "http"},
                       {"url", receiver.url("/in", true)},
                       {"shape", "json_lines"},
                       {"ca_file", other.ca_cert}};
  auto s = make_network_sink(config, "$.audit_sinks[0]", context);
  try {
    s->deliver(make_batch(1, 1));
    ADD_FAILURE() << "accepted a certificate from another CA";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(receiver.requests().empty());
}

}  // namespace
}  // namespace zn::broker::audit_sinks
