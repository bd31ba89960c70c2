// AuditLog behaviour: chaining, restart, queries, the JSON line, redaction,
// concurrency and rejection of malformed events.
#include <sys/stat.h>

#include <atomic>
#include <regex>
#include <set>
#include <thread>

#include "support/audit_fixtures.h"

namespace zn::broker {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using test::ev;

class AuditLogTest : public ::testing::Test {
 protected:
  AuditLogOptions opts() {
    return {db, [this] { return clock.now(); }, sink.fn()};
  }

  test::TempDir dir;
  std::string db = dir.file("audit.db");
  test::FakeClock clock;
  test::CapturingSink sink;
};

TEST_F(AuditLogTest, ChainOfAppendsVerifies) {
  AuditLog log(opts());
  std::vector<AuditRecord> recs;
  for (int i = 0; i < 6; ++i) {
    recs.push_back(log.append(ev("egress:allow", "user-1", json{{"i", i}})));
    clock.advance(1ms);
  }
  EXPECT_EQ(recs[0].prev, std::string(64, '0'));
  for (size_t i = 0; i < recs.size(); ++i) {
    EXPECT_EQ(recs[i].seq, i + 1);
    EXPECT_EQ(recs[i].hash, sha256_hex(recs[i].prev + recs[i].canonical_payload()));
    if (i) {
      EXPECT_EQ(recs[i].prev, recs[i - 1].hash);
    }
  }
  auto r = log.verify();
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 6u);
  // What was stored is what append returned.
  auto stored = log.query({});
  ASSERT_EQ(stored.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(stored[i].hash, recs[i].hash);
    EXPECT_EQ(stored[i].detail, recs[i].detail);
    EXPECT_EQ(stored[i].ts, recs[i].ts);
  }
}

TEST_F(AuditLogTest, EmptyLogVerifies) {
  AuditLog log(opts());
  auto r = log.verify();
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.records, 0u);
}

TEST_F(AuditLogTest, StoreIsWalWithFullSync) {
  AuditLog log(opts());
  log.append(ev("session:create", "user-1"));
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT name FROM sqlite_master WHERE type='index' ORDER BY name", -1, &s,
                               nullptr),
            SQLITE_OK);
  std::set<std::string> idx;
  while (sqlite3_step(s) == SQLITE_ROW) idx.insert(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  sqlite3_finalize(s);
  sqlite3_close(h);
  EXPECT_TRUE(idx.count("audit_sid_ts"));
  EXPECT_TRUE(idx.count("audit_event_ts"));
}

TEST_F(AuditLogTest, ReopenContinuesTheChain) {
  std::string last_hash;
  {
    AuditLog a(opts());
    a.append(ev("session:create", "user-1"));
    last_hash = a.append(ev("egress:allow", "user-1", json{{"host", "a.example"}})).hash;
  }
  {
    AuditLog b(opts());
    auto r3 = b.append(ev("egress:deny", "user-1", json{{"host", "b.example"}}));
    EXPECT_EQ(r3.seq, 3u);
    EXPECT_EQ(r3.prev, last_hash);
    b.append(ev("session:delete", "user-1"));
    auto v = b.verify();
    EXPECT_TRUE(v.ok) << v.reason;
    EXPECT_EQ(v.records, 4u);
  }
  auto v = AuditLog::verify_file(db);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 4u);
}

TEST_F(AuditLogTest, TwoLogsOnOneFileKeepOneChain) {
  // Two writers (e.g. an old and a new zerod overlapping) interleave: each
  // append reads the head inside its own transaction.
  AuditLog a(opts()), b(opts());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(a.append(ev("dns:allow", "a")).seq, 2u * i + 1);
    EXPECT_EQ(b.append(ev("dns:deny", "b")).seq, 2u * i + 2);
  }
  auto v = AuditLog::verify_file(db);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 10u);
}

TEST_F(AuditLogTest, QueryBySidEventAndTime) {
  AuditLog log(opts());
  // t0+0: user-1 session:create, t0+1s: user-1 egress:allow, t0+2s: user-2 egress:deny,
  // t0+3s: user-1 dns:deny, t0+4s: user-2 egress:rate_limited, t0+5s: user-1 egress:deny
  const std::pair<const char*, const char*> plan[] = {
      {"session:create", "user-1"}, {"egress:allow", "user-1"},        {"egress:deny", "user-2"},
      {"dns:deny", "user-1"},       {"egress:rate_limited", "user-2"}, {"egress:deny", "user-1"}};
  for (auto [e, s] : plan) {
    log.append(ev(e, s));
    clock.advance(1s);
  }
  auto seqs = [](const std::vector<AuditRecord>& v) {
    std::vector<uint64_t> out;
    for (auto& r : v) out.push_back(r.seq);
    return out;
  };
  using V = std::vector<uint64_t>;
  EXPECT_EQ(seqs(log.query({})), (V{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(seqs(log.query({.sid = "user-1"})), (V{1, 2, 4, 6}));
  EXPECT_EQ(seqs(log.query({.sid = "user-3"})), V{});
  EXPECT_EQ(seqs(log.query({.event = "egress:"})), (V{2, 3, 5, 6}));
  EXPECT_EQ(seqs(log.query({.event = "egress:deny"})), (V{3, 6}));
  EXPECT_EQ(seqs(log.query({.sid = "user-1", .event = "egress:"})), (V{2, 6}));
  const auto t0 = test::FakeClock::base();
  EXPECT_EQ(seqs(log.query({.since = t0 + 2s})), (V{3, 4, 5, 6}));
  EXPECT_EQ(seqs(log.query({.until = t0 + 2s})), (V{1, 2}));
  EXPECT_EQ(seqs(log.query({.since = t0 + 1s, .until = t0 + 4s})), (V{2, 3, 4}));
  EXPECT_EQ(seqs(log.query({.sid = "user-2", .event = "egress:", .since = t0 + 3s})), (V{5}));
  EXPECT_EQ(seqs(log.query({.limit = 2})), (V{1, 2}));
  EXPECT_EQ(seqs(log.query({.event = "egress:", .limit = 3})), (V{2, 3, 5}));

  EXPECT_THROW(log.query({.limit = 0}), std::invalid_argument);
  EXPECT_THROW(log.query({.limit = AuditQuery::kMaxLimit + 1}), std::invalid_argument);
  EXPECT_NO_THROW(log.query({.limit = AuditQuery::kMaxLimit}));
  EXPECT_THROW(log.query({.event = "egres"}), std::invalid_argument);
  EXPECT_THROW(log.query({.event = "bogus:"}), std::invalid_argument);
  // Values are bound, never spliced into SQL.
  EXPECT_EQ(log.query({.sid = "x' OR '1'='1"}).size(), 0u);
}

TEST_F(AuditLogTest, JsonLineShape) {
  AuditLog log(opts());
  log.append(ev("egress:deny", "user-1",
                json{{"host", "api.stripe.com"}, {"reason", "default deny"}, {"dst", "198.18.0.11:443"}}));
  clock.advance(1500ms);
  log.append(ev("dns:deny", "user-1", json{{"name", "x.evil"}}));
  ASSERT_EQ(sink.lines.size(), 2u);
  const std::regex ts_re(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$)");
  const std::regex hex_re("^[0-9a-f]{64}$");
  std::string prev_hash = std::string(64, '0');
  for (size_t i = 0; i < 2; ++i) {
    const std::string& line = sink.lines[i];
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_EQ(line.rfind(R"({"zn":"audit","seq":)" + std::to_string(i + 1) + R"(,"ts":")", 0), 0u) << line;
    json j = json::parse(line);
    EXPECT_EQ(j.size(), 8u);
    EXPECT_EQ(j["zn"], "audit");
    EXPECT_EQ(j["seq"], i + 1);
    EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(), ts_re));
    EXPECT_TRUE(std::regex_match(j["prev"].get<std::string>(), hex_re));
    EXPECT_TRUE(std::regex_match(j["hash"].get<std::string>(), hex_re));
    EXPECT_EQ(j["prev"], prev_hash);
    EXPECT_EQ(j["sid"], "user-1");
    EXPECT_TRUE(j["detail"].is_object());
    prev_hash = j["hash"];
    // Key order as DESIGN.md, then the chain fields.
    size_t p = 0;
    for (const char* k :
         {"\"zn\"", "\"seq\"", "\"ts\"", "\"event\"", "\"sid\"", "\"detail\"", "\"prev\"", "\"hash\""}) {
      size_t q = line.find(k, p);
      ASSERT_NE(q, std::string::npos) << k;
      p = q;
    }
  }
  json first = json::parse(sink.lines[0]);
  EXPECT_EQ(first["ts"], "2026-11-29T12:00:00.123Z");
  EXPECT_EQ(first["event"], "egress:deny");
  EXPECT_EQ(first["detail"]["host"], "api.stripe.com");
  EXPECT_EQ(first["detail"]["reason"], "default deny");
  EXPECT_EQ(first["detail"]["dst"], "198.18.0.11:443");
  json second = json::parse(sink.lines[1]);
  EXPECT_EQ(second["ts"], "2026-11-29T12:00:01.623Z");
  EXPECT_EQ(second["event"], "dns:deny");
  // The line carries what is stored, hash included: the journal is a second copy of the chain.
  EXPECT_EQ(second["hash"], log.query({}).at(1).hash);
}

TEST_F(AuditLogTest, DefaultSinkWritesToStdout) {
  AuditLog log({db, [this] { return clock.now(); }, nullptr});
  ::testing::internal::CaptureStdout();
  log.append(ev("command:run", "user-1", json{{"cmd", "ls"}}));
  std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_EQ(json::parse(out)["event"], "command:run");
}

TEST_F(AuditLogTest, ThrowingSinkDoesNotLoseTheRecord) {
  AuditLog log(
      {db, [this] { return clock.now(); }, [](const std::string&) { throw std::runtime_error("x"); }});
  EXPECT_NO_THROW(log.append(ev("session:create", "user-1")));
  EXPECT_EQ(log.query({}).size(), 1u);
  EXPECT_TRUE(log.verify().ok);
}

TEST_F(AuditLogTest, SecretsAreRedactedEverywhere) {
  const std::string token = "ghp_S3cr3tT0kenValue0123456789";
  const std::string token2 = "sk_live_abcdefgh";
  {
    AuditLog log(opts());
    EXPECT_TRUE(log.add_secret(token));
    EXPECT_TRUE(log.add_secret(token2));
    EXPECT_FALSE(log.add_secret("short"));
    EXPECT_FALSE(log.add_secret("1234567"));
    json detail = {{"request",
                    {{"headers", json::array({"Authorization: Bearer " + token, "Accept: */*"})},
                     {"url", "https://api.example.com/?key=" + token2 + "&x=" + token2}}},
                   {"key-" + token, "value"},
                   {"nested", {{"deeper", {{"list", json::array({json::array({token}), 42, nullptr})}}}}},
                   {"host", "api.example.com"}};
    auto rec = log.append(ev("egress:allow", "user-1", detail));
    EXPECT_EQ(rec.detail["request"]["headers"][0], "Authorization: Bearer [redacted]");
    EXPECT_EQ(rec.detail["request"]["headers"][1], "Accept: */*");
    EXPECT_EQ(rec.detail["request"]["url"], "https://api.example.com/?key=[redacted]&x=[redacted]");
    EXPECT_EQ(rec.detail["key-[redacted]"], "value");
    EXPECT_EQ(rec.detail["nested"]["deeper"]["list"][0][0], "[redacted]");
    EXPECT_EQ(rec.detail["host"], "api.example.com");
    EXPECT_TRUE(log.verify().ok);

    ASSERT_EQ(sink.lines.size(), 1u);
    for (const auto& s : {token, token2}) {
      EXPECT_EQ(sink.lines[0].find(s), std::string::npos);
      for (const auto& r : log.query({})) EXPECT_EQ(r.json_line().find(s), std::string::npos);
      // Whatever files SQLite has on disk right now (db, -wal, -shm).
      for (const auto& f : std::filesystem::directory_iterator(dir.path())) {
        std::string bytes = test::read_bytes(f.path());
        EXPECT_EQ(bytes.find(s), std::string::npos) << f.path();
        EXPECT_EQ(bytes.find(s.substr(0, 8)), std::string::npos) << f.path();
      }
    }
    // Sanity: the search does find what is in the files.
    bool found_host = false;
    for (const auto& f : std::filesystem::directory_iterator(dir.path()))
      found_host |= test::read_bytes(f.path()).find("api.example.com") != std::string::npos;
    EXPECT_TRUE(found_host);
  }
  // After close (checkpointed into the main file).
  std::string bytes = test::read_bytes(db);
  EXPECT_NE(bytes.find("api.example.com"), std::string::npos);
  EXPECT_EQ(bytes.find(token), std::string::npos);
  EXPECT_EQ(bytes.find(token2), std::string::npos);
}

TEST_F(AuditLogTest, OverlappingSecretsLeaveNoFragment) {
  AuditLog log(opts());
  ASSERT_TRUE(log.add_secret("AAAABBBBCCCC"));
  ASSERT_TRUE(log.add_secret("CCCCDDDDEEEE"));
  auto rec = log.append(ev("resource:read", "s", json{{"v", "xAAAABBBBCCCCDDDDEEEEy"}}));
  EXPECT_EQ(rec.detail["v"], "x[redacted]y");
}

TEST_F(AuditLogTest, SecretInSidIsRedactedToo) {
  AuditLog log(opts());
  ASSERT_TRUE(log.add_secret("tok-0123456789"));
  auto rec = log.append(ev("session:create", "user-tok-0123456789"));
  EXPECT_EQ(rec.sid, "user-[redacted]");
}

TEST_F(AuditLogTest, ConcurrentAppendsFormAGapFreeChain) {
  AuditLog log(opts());
  constexpr int kThreads = 4, kPer = 100;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPer; ++i) {
        // Commits are grouped; each caller still gets its own record back.
        AuditRecord r = log.append(ev("packet:deny", "user-" + std::to_string(t), json{{"i", i}}));
        EXPECT_EQ(r.sid, "user-" + std::to_string(t));
        EXPECT_EQ(r.detail["i"], i);
      }
    });
  for (auto& t : ts) t.join();
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, static_cast<uint64_t>(kThreads * kPer));
  auto all = log.query({});
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kPer));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].seq, i + 1);
  // Lines reach the sink in chain order.
  ASSERT_EQ(sink.lines.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(json::parse(sink.lines[i])["seq"], i + 1);
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(log.query({.sid = "user-" + std::to_string(t)}).size(), static_cast<size_t>(kPer));
}

// More appenders waiting than one commit takes (the batch is 256): a writer
// whose own record was not in the batch it committed must not return before
// its record is durable. The first commit of each round is held in the sink
// until every other appender is queued behind it; which waiter then becomes
// the next writer is up to the scheduler, so several rounds make the old
// behaviour (returning a record never committed) all but certain to show.
TEST_F(AuditLogTest, MoreConcurrentAppendersThanABatchEachGetTheirOwnDurableRecord) {
  constexpr int kThreads = 600, kRounds = 5;
  std::atomic<int> started{0};
  std::atomic<bool> hold_first{true};
  AuditLogOptions o = opts();
  auto inner = o.sink;
  o.sink = [&, inner](const std::string& line) {
    if (hold_first.exchange(false)) {
      for (int i = 0; i < 500 && started.load() < kThreads; ++i) std::this_thread::sleep_for(10ms);
      std::this_thread::sleep_for(300ms);  // the last starters reach the queue
    }
    inner(line);
  };
  AuditLog log(o);
  std::set<uint64_t> seqs;
  for (int round = 0; round < kRounds; ++round) {
    started = 0;
    hold_first = true;
    std::vector<std::thread> ts;
    std::vector<AuditRecord> got(kThreads);
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([&, t] {
        started++;
        got[t] = log.append(ev("packet:deny", "user-1", json{{"t", t}}));
      });
    for (auto& t : ts) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_NE(got[t].seq, 0u) << "round " << round << ": append " << t
                                << " returned before its record was committed";
      EXPECT_EQ(got[t].detail["t"], t);
      seqs.insert(got[t].seq);
    }
  }
  EXPECT_EQ(seqs.size(), static_cast<size_t>(kThreads * kRounds));
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, static_cast<uint64_t>(kThreads * kRounds));
}

TEST_F(AuditLogTest, MalformedEventsWriteNothing) {
  AuditLog log(opts());
  const AuditEvent bad[] = {
      ev("egress:maybe", "user-1"),
      ev("", "user-1"),
      ev("egress:allow", std::string(129, 'x')),
      ev("egress:allow", "user\n1"),
      ev("egress:allow", "user\x01"),
      ev("egress:allow", "user-1", json::array({1, 2})),
      ev("egress:allow", "user-1", json("string")),
      ev("egress:allow", "user-1", json()),
      ev("egress:allow", "user-1", json{{"host", "bad\xFE"}}),
  };
  for (const auto& b : bad) EXPECT_THROW(log.append(b), std::invalid_argument) << b.event;
  EXPECT_TRUE(sink.lines.empty());
  EXPECT_TRUE(log.query({}).empty());
  EXPECT_EQ(log.verify().records, 0u);
  // A good event afterwards is seq 1 with the genesis prev.
  auto r = log.append(ev("egress:allow", "user-1"));
  EXPECT_EQ(r.seq, 1u);
  EXPECT_EQ(r.prev, std::string(64, '0'));
  EXPECT_EQ(sink.lines.size(), 1u);
}

TEST_F(AuditLogTest, VerifyFileIsReadOnly) {
  {
    AuditLog log(opts());
    log.append(ev("session:create", "user-1"));
    // While the writer has it open (WAL: a reader does not block it).
    auto v = AuditLog::verify_file(db);
    EXPECT_TRUE(v.ok) << v.reason;
    EXPECT_EQ(v.records, 1u);
    log.append(ev("session:delete", "user-1"));
  }
  struct stat before {};
  ASSERT_EQ(::stat(db.c_str(), &before), 0);
  auto v = AuditLog::verify_file(db);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 2u);
  struct stat after {};
  ASSERT_EQ(::stat(db.c_str(), &after), 0);
  EXPECT_EQ(before.st_size, after.st_size);
  EXPECT_EQ(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);

  const std::string missing = dir.file("missing.db");
  EXPECT_THROW(AuditLog::verify_file(missing), std::runtime_error);
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(AuditLogTest, VerifyFileOnNonAuditFileThrows) {
  const std::string other = dir.file("other.db");
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "CREATE TABLE t(x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  EXPECT_THROW(AuditLog::verify_file(other), std::runtime_error);
  const std::string text = dir.file("text.db");
  std::ofstream(text) << "not a database at all, just some text that is long enough";
  EXPECT_THROW(AuditLog::verify_file(text), std::runtime_error);
}

}  // namespace
}  // namespace zn::broker
