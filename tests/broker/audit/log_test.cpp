// AuditLog behaviour: chaining, restart, queries, the JSON line, redaction,
// concurrency, rejection of malformed events, and the writer thread: post()
// never waiting on a commit, the queue's limits, failed commits retried, the
// destructor draining.
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

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

// More appenders waiting than one commit takes (the batch is 512): an append
// whose record was not in the batch just committed must not return before its
// record is durable. The first commit of each round is held in the sink until
// every other appender is queued behind it, so each round needs two batches.
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

// ---- The writer thread -----------------------------------------------------

// Waits for what a test expects of the writer (a count reached); false if it
// never comes.
template <class Pred>
bool eventually(Pred done) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Holds the writer inside before_commit while closed, and tells when it got
// there: a commit stuck on the disk, for as long as the test needs.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;
  int arrived = 0;
  void close() {
    std::lock_guard lk(mu);
    closed = true;
  }
  void open() {
    std::lock_guard lk(mu);
    closed = false;
    cv.notify_all();
  }
  void pass() {
    std::unique_lock lk(mu);
    ++arrived;
    cv.notify_all();
    cv.wait(lk, [&] { return !closed; });
  }
  bool wait_arrived(int n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, 20s, [&] { return arrived >= n; });
  }
};

TEST_F(AuditLogTest, PostReturnsWhileACommitIsStuck) {
  Gate gate;
  gate.close();
  AuditLogOptions o = opts();
  o.before_commit = [&] { gate.pass(); };
  AuditLog log(o);
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 0}})));
  ASSERT_TRUE(gate.wait_arrived(1));  // the writer is in a commit, and stays there
  // Every post returns while the commit is held: the gate stays closed
  // until after the loop, so a post that waited for the commit would never
  // return (the test would hang, then fail by its timeout). No wall-clock
  // bound: under TSan beside other tests 1,000 posts took 317 ms, and a
  // speed bound here failed without any post waiting.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", i}})));
  AuditLogStats st = log.stats();
  EXPECT_EQ(st.queued, 1001u);
  EXPECT_EQ(st.committed, 0u);
  EXPECT_TRUE(log.admits());
  const auto held = std::chrono::steady_clock::now() - t0;  // the stuck commit lasted at least this
  gate.open();

  ASSERT_TRUE(eventually([&] { return log.stats().committed == 1001; }));
  st = log.stats();
  EXPECT_EQ(st.queued, 0u);
  EXPECT_GE(st.batches, 3u);  // the held one, then 1000 in batches of at most 512
  EXPECT_EQ(st.failed_commits, 0u);
  EXPECT_GE(st.max_commit_latency, std::chrono::duration_cast<std::chrono::microseconds>(held));
  auto all = log.query({.limit = 2000});
  ASSERT_EQ(all.size(), 1001u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    EXPECT_EQ(all[i].detail["i"], i);
  }
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 1001u);
  std::lock_guard lk(sink.mu);
  ASSERT_EQ(sink.lines.size(), 1001u);
  for (size_t i = 0; i < sink.lines.size(); ++i) EXPECT_EQ(json::parse(sink.lines[i])["seq"], i + 1);
}

// Group commit (AuditLogOptions::gather): a record after a quiet spell is
// committed at once; records that keep coming right after a commit gather
// into one transaction. The control: without gather, the same two records
// are two transactions.
TEST_F(AuditLogTest, RecordsThatKeepComingGatherAndALoneOneIsCommittedAtOnce) {
  for (const bool gather : {true, false}) {
    SCOPED_TRACE(gather ? "gather" : "no gather");
    test::TempDir d;
    AuditLogOptions o = opts();
    o.db_path = d.file("audit.db");
    o.gather = gather ? std::chrono::microseconds(400ms) : std::chrono::microseconds(0);
    AuditLog log(o);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 0}})));
    ASSERT_TRUE(log.flush());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 300ms);  // not held for the gather
    const uint64_t before = log.stats().batches;
    ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 1}})));
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 2}})));
    ASSERT_TRUE(eventually([&] { return log.stats().committed == 3; }));
    EXPECT_EQ(log.stats().batches - before, gather ? 1u : 2u);
  }
}

// Whoever waits on the queue ends a gather at once: an append() (a control
// call that returns its own record) and a flush() are never held for it,
// and take what gathered before them into the same commit. The control: a
// post() alone, right after a commit, stays gathered.
TEST_F(AuditLogTest, AnAppendOrFlushEndsAGatherAtOnce) {
  test::TempDir d;
  AuditLogOptions o = opts();
  o.db_path = d.file("audit.db");
  o.gather = std::chrono::microseconds(3s);
  AuditLog log(o);
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 0}})));  // after a quiet spell: at once
  ASSERT_TRUE(eventually([&] { return log.stats().committed == 1; }));

  // Control: records that keep coming gather.
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 1}})));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(log.stats().committed, 1u);

  auto t0 = std::chrono::steady_clock::now();
  const AuditRecord r = log.append(ev("session:create", "user-1", json{{"i", 2}}));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(r.seq, 3u);
  EXPECT_EQ(log.stats().committed, 3u);

  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 3}})));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(log.stats().committed, 3u);  // gathering again
  t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(log.flush());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(log.stats().committed, 4u);
}

// batch_done runs once per committed batch, after all of that batch's lines
// (zerod flushes stdout and wakes its exporters there, not per record).
TEST_F(AuditLogTest, BatchDoneFollowsEachBatchsLines) {
  Gate gate;
  gate.close();
  std::mutex mu;
  std::vector<size_t> lines_at_batch_done;
  AuditLogOptions o = opts();
  o.before_commit = [&] { gate.pass(); };
  o.batch_done = [&] {
    std::lock_guard sl(sink.mu);
    std::lock_guard lk(mu);
    lines_at_batch_done.push_back(sink.lines.size());
  };
  AuditLog log(o);
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 0}})));
  ASSERT_TRUE(gate.wait_arrived(1));
  for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", i}})));
  gate.open();
  // Counted after the batch is done: both seen, the count is final.
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lk(mu);
    return !lines_at_batch_done.empty() && lines_at_batch_done.back() == 1001 &&
           log.stats().committed == 1001;
  }));
  std::lock_guard lk(mu);
  EXPECT_EQ(lines_at_batch_done.size(), log.stats().batches);
  EXPECT_LT(lines_at_batch_done.size(), 10u);  // batched: 1, then up to 512 at a time
  EXPECT_EQ(lines_at_batch_done.front(), 1u);
  for (size_t i = 1; i < lines_at_batch_done.size(); ++i)
    EXPECT_GT(lines_at_batch_done[i], lines_at_batch_done[i - 1]);
}

TEST_F(AuditLogTest, MoreAppendersThanABatchWhileACommitIsStuck) {
  constexpr int kThreads = 64;
  Gate gate;
  gate.close();
  AuditLogOptions o = opts();
  o.max_batch = 8;
  o.before_commit = [&] { gate.pass(); };
  AuditLog log(o);
  ASSERT_TRUE(log.post(ev("session:create", "user-0")));
  ASSERT_TRUE(gate.wait_arrived(1));
  std::vector<AuditRecord> got(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] { got[t] = log.append(ev("packet:deny", "user-1", json{{"t", t}})); });
  ASSERT_TRUE(eventually([&] { return log.stats().queued == kThreads + 1; }));
  gate.open();
  for (auto& t : ts) t.join();
  std::set<uint64_t> seqs;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(got[t].detail["t"], t);
    EXPECT_EQ(got[t].sid, "user-1");
    EXPECT_GE(got[t].seq, 2u);
    seqs.insert(got[t].seq);
  }
  EXPECT_EQ(seqs.size(), static_cast<size_t>(kThreads));
  EXPECT_EQ(*seqs.rbegin(), static_cast<uint64_t>(kThreads + 1));
  // What each got back is what was stored under its seq.
  auto all = log.query({});
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads + 1));
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(all[got[t].seq - 1].hash, got[t].hash);
  EXPECT_GE(log.stats().batches, 1u + kThreads / 8);
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
}

TEST_F(AuditLogTest, PostPastTheHardLimitIsRefusedAndCounted) {
  Gate gate;
  gate.close();
  AuditLogOptions o = opts();
  o.queue_limit = 10;
  o.high_water = 5;
  o.before_commit = [&] { gate.pass(); };
  AuditLog log(o);
  ASSERT_TRUE(log.post(ev("dns:allow", "user-1", json{{"i", 0}})));
  ASSERT_TRUE(gate.wait_arrived(1));  // record 0 is in flight: it still counts
  for (int i = 1; i < 10; ++i) {
    EXPECT_EQ(log.admits(), i < 5) << i;  // below the high-water mark
    EXPECT_TRUE(log.post(ev("dns:allow", "user-1", json{{"i", i}}))) << i;
  }
  EXPECT_FALSE(log.admits());
  EXPECT_FALSE(log.post(ev("dns:allow", "user-1", json{{"i", 10}})));
  EXPECT_FALSE(log.post(ev("dns:allow", "user-1", json{{"i", 11}})));
  AuditLogStats st = log.stats();
  EXPECT_EQ(st.queued, 10u);
  EXPECT_EQ(st.rejected, 2u);
  // A bad event is still a bad event, queue full or not.
  EXPECT_THROW(log.post(ev("dns:maybe", "user-1")), std::invalid_argument);
  gate.open();

  ASSERT_TRUE(eventually([&] { return log.stats().committed == 10; }));
  EXPECT_TRUE(log.admits());
  EXPECT_EQ(log.stats().rejected, 2u);
  auto all = log.query({});
  ASSERT_EQ(all.size(), 10u);  // the refused ones were not recorded
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].detail["i"], i);
  EXPECT_TRUE(log.post(ev("dns:allow", "user-1", json{{"i", 12}})));
}

TEST_F(AuditLogTest, FailingCommitsStopAdmittingAndLoseNothing) {
  std::atomic<bool> fail{true};
  AuditLogOptions o = opts();
  o.retry_backoff = 2ms;
  o.retry_backoff_max = 10ms;
  o.before_commit = [&] {
    if (fail) throw std::runtime_error("simulated: disk full");
  };
  AuditLog log(o);
  EXPECT_TRUE(log.admits());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", i}})));
  ASSERT_TRUE(eventually([&] { return log.stats().failed_commits >= 3; }));  // retried
  EXPECT_FALSE(log.admits());
  AuditLogStats st = log.stats();
  EXPECT_TRUE(st.failing);
  EXPECT_EQ(st.queued, 20u);
  EXPECT_EQ(st.committed, 0u);

  // An append meanwhile waits for the store to come back, then gets its record.
  std::atomic<bool> returned{false};
  AuditRecord got;
  std::thread appender([&] {
    got = log.append(ev("session:create", "user-2"));
    returned = true;
  });
  ASSERT_TRUE(eventually([&] { return log.stats().queued == 21; }));
  const uint64_t failed = log.stats().failed_commits;
  // The second attempt from here started after the append was queued: its
  // record failed at least once, and the append did not return.
  ASSERT_TRUE(eventually([&] { return log.stats().failed_commits >= failed + 2; }));
  EXPECT_FALSE(returned);
  {
    std::lock_guard lk(sink.mu);
    EXPECT_TRUE(sink.lines.empty());
  }

  fail = false;
  appender.join();
  EXPECT_EQ(got.seq, 21u);  // behind the 20 posted before it
  EXPECT_EQ(got.sid, "user-2");
  st = log.stats();
  EXPECT_EQ(st.committed, 21u);
  EXPECT_EQ(st.queued, 0u);
  EXPECT_FALSE(st.failing);
  EXPECT_TRUE(log.admits());
  auto all = log.query({});
  ASSERT_EQ(all.size(), 21u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    EXPECT_EQ(all[i].detail["i"], i);
  }
  EXPECT_EQ(all[20].hash, got.hash);
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 21u);
}

// A transaction that fails in the store after inserting some of its rows:
// the rollback must leave the chain head where it was, so the retry numbers
// and chains the same records from the same head.
TEST_F(AuditLogTest, AFailedTransactionLeavesTheChainAlone) {
  Gate gate;
  std::atomic<bool> use_gate{false};
  AuditLogOptions o = opts();
  o.retry_backoff = 2ms;
  o.retry_backoff_max = 10ms;
  o.before_commit = [&] {
    if (use_gate) gate.pass();
  };
  AuditLog log(o);
  log.append(ev("session:create", "user-1"));  // seq 1
  // From seq 4 on, while `fault` has a row, every insert fails.
  test::raw_sql(db,
                "CREATE TABLE fault(x); INSERT INTO fault VALUES(1);"
                "CREATE TRIGGER fault_from_4 BEFORE INSERT ON audit"
                " WHEN NEW.seq >= 4 AND EXISTS(SELECT 1 FROM fault)"
                " BEGIN SELECT RAISE(ABORT, 'simulated disk full'); END;");
  gate.close();
  use_gate = true;
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", 0}})));
  ASSERT_TRUE(gate.wait_arrived(1));  // record 0 alone in this commit: seq 2
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"i", i}})));
  use_gate = false;
  gate.open();
  // Records 1..5 are one transaction: seq 3 is inserted, seq 4 fails.
  ASSERT_TRUE(eventually([&] { return log.stats().failed_commits >= 2; }));
  EXPECT_FALSE(log.admits());
  EXPECT_EQ(log.stats().queued, 5u);
  EXPECT_EQ(log.query({}).size(), 2u);
  auto mid = log.verify();
  EXPECT_TRUE(mid.ok) << mid.reason;
  EXPECT_EQ(mid.records, 2u);

  test::raw_sql(db, "DELETE FROM fault");
  ASSERT_TRUE(eventually([&] { return log.stats().committed == 7; }));
  EXPECT_TRUE(log.admits());
  auto all = log.query({});
  ASSERT_EQ(all.size(), 7u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq, i + 1);
    if (i) {
      EXPECT_EQ(all[i].prev, all[i - 1].hash);
      EXPECT_EQ(all[i].detail["i"], i - 1);
    }
  }
  auto v = log.verify();
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, 7u);
  std::lock_guard lk(sink.mu);
  ASSERT_EQ(sink.lines.size(), 7u);  // nothing emitted for a failed attempt
  for (size_t i = 0; i < sink.lines.size(); ++i) EXPECT_EQ(json::parse(sink.lines[i])["hash"], all[i].hash);
}

TEST_F(AuditLogTest, DestructorDrainsEveryPostedRecord) {
  constexpr int kRecords = 300;
  Gate gate;
  gate.close();
  std::thread opener;
  {
    AuditLogOptions o = opts();
    o.max_batch = 16;
    o.before_commit = [&] { gate.pass(); };
    AuditLog log(o);
    for (int i = 0; i < kRecords; ++i) ASSERT_TRUE(log.post(ev("dns:deny", "user-1", json{{"i", i}})));
    ASSERT_TRUE(gate.wait_arrived(1));
    EXPECT_EQ(log.stats().committed, 0u);  // all still to write when destruction begins
    // The commit in flight is let go while (or before) the destructor runs.
    opener = std::thread([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
  }
  opener.join();
  auto v = AuditLog::verify_file(db);
  EXPECT_TRUE(v.ok) << v.reason;
  EXPECT_EQ(v.records, static_cast<uint64_t>(kRecords));
  AuditLog reopened(opts());
  auto all = reopened.query({});
  ASSERT_EQ(all.size(), static_cast<size_t>(kRecords));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].detail["i"], i);
  std::lock_guard lk(sink.mu);
  EXPECT_EQ(sink.lines.size(), static_cast<size_t>(kRecords));
}

TEST_F(AuditLogTest, PostValidatesAndRedactsWhenPosted) {
  AuditLog log(opts());
  EXPECT_THROW(log.post(ev("egress:maybe", "user-1")), std::invalid_argument);
  EXPECT_THROW(log.post(ev("egress:allow", "user-1", json::array())), std::invalid_argument);
  EXPECT_EQ(log.stats().queued, 0u);
  ASSERT_TRUE(log.add_secret("tok-0123456789"));
  ASSERT_TRUE(log.post(ev("egress:allow", "user-tok-0123456789", json{{"h", "x tok-0123456789"}})));
  // An append returns once it is committed, and the writer goes in order:
  // everything posted before it is committed too.
  log.append(ev("session:create", "user-1"));
  EXPECT_EQ(log.stats().committed, 2u);
  auto all = log.query({});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].sid, "user-[redacted]");
  EXPECT_EQ(all[0].detail["h"], "x [redacted]");
  EXPECT_EQ(log.verify().records, 2u);
}

// AuditEvent::detail_later: the data path's details are built, checked and
// redacted on the writer, never on the posting thread; a detail that cannot
// be recorded still leaves its record.
TEST_F(AuditLogTest, ADeferredDetailIsBuiltOnTheWriter) {
  AuditLog log(opts());
  ASSERT_TRUE(log.add_secret("tok-0123456789"));
  const std::thread::id poster = std::this_thread::get_id();
  std::atomic<bool> built_on_poster{false};
  std::atomic<int> builds{0};
  AuditEvent e{"egress:allow", "user-tok-0123456789", {}, [&] {
                 built_on_poster = std::this_thread::get_id() == poster;
                 ++builds;
                 return json{{"h", "x tok-0123456789"}, {"n", 7}};
               }};
  ASSERT_TRUE(log.post(std::move(e)));
  log.append(ev("session:create", "user-1"));
  EXPECT_EQ(builds.load(), 1);
  EXPECT_FALSE(built_on_poster.load());
  auto all = log.query({});
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].event, "egress:allow");
  EXPECT_EQ(all[0].sid, "user-[redacted]");
  EXPECT_EQ(all[0].detail["h"], "x [redacted]");
  EXPECT_EQ(all[0].detail["n"], 7);
  EXPECT_TRUE(log.verify().ok);
  std::lock_guard lk(sink.mu);
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_EQ(sink.lines[0].find("tok-0123456789"), std::string::npos);
  EXPECT_NE(sink.lines[0].find("x [redacted]"), std::string::npos);
}

TEST_F(AuditLogTest, ADeferredDetailThatCannotBeRecordedStillLeavesItsRecord) {
  AuditLog log(opts());
  ASSERT_TRUE(log.add_secret("tok-0123456789"));
  const std::vector<std::function<json()>> bad = {
      [] {
        return json::array({1, 2});
      },  // not an object
      [] {
        return json{{"path", std::string("/a\xff\xfe")}};
      },  // not UTF-8
      [] {
        return json{{"big", std::string(kAuditMaxDetailBytes, 'x')}};
      },                                                                      // too large
      []() -> json { throw std::runtime_error("tok-0123456789 \x01\xff"); },  // a failing builder
  };
  for (const auto& build : bad) ASSERT_TRUE(log.post({"egress:allow", "user-1", {}, build}));
  // Its name and sid are checked when posted, as any event's.
  EXPECT_THROW(log.post({"egress:maybe", "user-1", {}, [] { return json::object(); }}),
               std::invalid_argument);
  EXPECT_THROW(log.post({"egress:allow", "user\x01", {}, [] { return json::object(); }}),
               std::invalid_argument);
  ASSERT_TRUE(log.flush());
  auto all = log.query({});
  ASSERT_EQ(all.size(), bad.size());
  for (const AuditRecord& r : all) {
    EXPECT_EQ(r.event, "egress:allow");
    ASSERT_TRUE(r.detail.contains("unrecordable")) << r.detail.dump();
    EXPECT_EQ(r.detail.size(), 1u);
  }
  // The builder's own message, with what could not be text replaced and the
  // secret redacted.
  EXPECT_EQ(all[3].detail["unrecordable"], "[redacted] ??");
  EXPECT_TRUE(log.verify().ok);
}

// A session's secrets are redacted from its records until it is deleted,
// including the records it posted before the delete that the writer takes
// after it; stats() counts what is held.
TEST_F(AuditLogTest, ASessionsSecretsCoverWhatItPostedBeforeItWasDeleted) {
  Gate gate;
  AuditLogOptions o = opts();
  o.before_commit = [&] { gate.pass(); };
  AuditLog log(o);
  const std::string secret = "sk_live_0123456789abcdef";
  EXPECT_EQ(log.set_session_secrets("user-1", {secret, "short"}), 1u);
  EXPECT_EQ(log.stats().secrets_held, 1u);
  gate.close();
  ASSERT_TRUE(log.post(ev("session:create", "user-1")));
  ASSERT_TRUE(gate.wait_arrived(1));  // the writer is held in that commit
  // Posted while the writer is held, eager and deferred; then the delete.
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"path", "/?k=" + secret}})));
  ASSERT_TRUE(log.post({"egress:allow", "user-1", {}, [secret] { return json{{"path", "/?k=" + secret}}; }}));
  log.forget_session_secrets("user-1");
  EXPECT_EQ(log.stats().secrets_held, 0u);
  // Posted after the delete: nothing of that session's is held any more.
  ASSERT_TRUE(log.post(ev("egress:allow", "user-1", json{{"path", "/after"}})));
  gate.open();
  ASSERT_TRUE(log.flush());
  auto all = log.query({});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[1].detail["path"], "/?k=[redacted]");
  EXPECT_EQ(all[2].detail["path"], "/?k=[redacted]");
  EXPECT_EQ(all[3].detail["path"], "/after");
  std::lock_guard lk(sink.mu);
  for (const std::string& line : sink.lines) EXPECT_EQ(line.find(secret), std::string::npos) << line;
}

TEST_F(AuditLogTest, InconsistentLimitsAreRefused) {
  AuditLogOptions o = opts();
  o.high_water = o.queue_limit + 1;
  EXPECT_THROW(AuditLog{o}, std::invalid_argument);
  o = opts();
  o.max_batch = 0;
  EXPECT_THROW(AuditLog{o}, std::invalid_argument);
  o = opts();
  o.high_water = 0;
  EXPECT_THROW(AuditLog{o}, std::invalid_argument);
  EXPECT_FALSE(std::filesystem::exists(db));  // refused before opening anything
}

}  // namespace
}  // namespace zn::broker
