// Issue 30: every SQL call is bounded, whatever one function call does. The
// progress handler runs between VM instructions, and one builtin call can
// run for minutes inside one (printf's width or precision, instr, replace,
// trim, LIKE on values near the length limit) or allocate gigabytes (large
// values in many columns, a sort of large rows). Each hostile statement
// below is answered or refused within its budget + 100 ms (a steady clock
// around the call), against a real SQLite file through the real zn-sql-call;
// the positive controls are honest heavy queries that answer correctly. A
// slow statement holds only its own call: another store, and another call
// on the same store, answer meanwhile; a cancelled call stops at once.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "broker/resources/sql_store.h"
#include "support/temp_dir.h"
#include "broker/resources/raw_sql.h"

namespace zn::broker {
namespace {

using ::zn::test::raw_exec;

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kBudget{1000};
constexpr milliseconds kSlack{100};  // the issue's target: budget + 100 ms
// A statement that never ends by itself, for the tests that need a call
// still running when they look. (instr() of the stored values is no such
// statement: it ends, in 2.9 s here, under a 3 s budget on a fast core.)
const std::string kEndless =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";

milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

struct Timed {
  StoreResult<SqlOutcome> result;
  milliseconds took;
};

Timed timed(const SqlStore& store, const std::string& sql, const json& params = nullptr,
            const std::atomic<bool>* cancel = nullptr) {
  const Clock::time_point start = Clock::now();
  auto r = store.execute(sql, params, cancel);
  return {std::move(r), since(start)};
}

class SqlBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    raw_exec(path_,
             "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);"
             "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) "
             "INSERT INTO t SELECT x, 'row' || x FROM c;"
             // Values near the length limit, stored by the operator: the
             // hostile calls need not even send them.
             "CREATE TABLE big(a TEXT, b TEXT);"
             "INSERT INTO big VALUES(printf('%.*c', 1000000, 'a'), printf('%.*c', 300000, 'a') || 'b');");
  }
  SqlStoreOptions options(AccessMode mode = AccessMode::kReadOnly, const std::string& path = "") {
    SqlStoreOptions o;
    o.path = path.empty() ? path_ : path;
    o.mode = mode;
    o.limits.time_budget = kBudget;
    o.helper = ZN_SQL_CALL_BIN;
    return o;
  }

  zn::test::TempDir dir_;
  std::string path_ = dir_.file("data.db");
};

std::string columns_of(const std::string& expr, int n) {
  std::string s = "SELECT ";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + expr + " AS c" + std::to_string(i);
  return s;
}

std::string nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "(1 + ";
  s += "1";
  for (int i = 0; i < depth; ++i) s += ")";
  return "SELECT " + s;
}

TEST_F(SqlBoundsTest, EveryHostileStatementIsAnsweredWithinItsBudget) {
  const std::string huge(1000000, 'a');
  const std::string needle = std::string(300000, 'a') + "b";
  struct Case {
    std::string what, sql;
    json params;
  };
  std::string in_list = "SELECT count(*) FROM t WHERE id IN (";
  for (int i = 0; i < 9000; ++i) in_list += (i ? "," : "") + std::to_string(i);
  in_list += ")";
  const std::vector<Case> cases = {
      {"printf precision", "SELECT length(printf('%.*c', 1000000000, 'x'))", nullptr},
      {"printf width", "SELECT length(printf('%*d', 1000000000, 1))", nullptr},
      {"printf float precision", "SELECT length(printf('%.1000000000f', 1.5))", nullptr},
      {"printf width of a string", "SELECT length(printf('%-1000000000s|', 'x'))", nullptr},
      {"printf repeated in a CTE",
       "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(length(printf('%.*c', "
       "1000000, 'x'))) FROM c",
       nullptr},
      {"instr on stored values", "SELECT instr(a, b) FROM big", nullptr},
      {"instr on parameters", "SELECT instr(?, ?)", json::array({huge, needle})},
      {"replace", "SELECT length(replace(a, b, 'x')) FROM big", nullptr},
      {"replace with a growing result", "SELECT length(replace(a, 'a', 'aaaaaaaaaa')) FROM big", nullptr},
      {"ltrim with a large set", "SELECT length(ltrim(a, replace(b, 'a', 'c') || 'a')) FROM big", nullptr},
      {"rtrim with a large set", "SELECT length(rtrim(a, replace(b, 'a', 'c') || 'a')) FROM big", nullptr},
      {"trim with a large set", "SELECT length(trim(?, ?))",
       json::array({huge, std::string(900000, 'z') + "a"})},
      {"like with a long pattern", "SELECT a LIKE ('%' || substr(b, 1, 100000) || '%') FROM big", nullptr},
      {"like with many wildcards", "SELECT a LIKE (replace(substr(b, 1, 900), 'a', 'a%') || 'b') FROM big",
       nullptr},
      {"glob with many wildcards", "SELECT a GLOB (replace(substr(b, 1, 900), 'a', 'a*') || 'b') FROM big",
       nullptr},
      {"zeroblob", "SELECT length(zeroblob(2000000000))", nullptr},
      {"randomblob", "SELECT length(randomblob(2000000000))", nullptr},
      {"large values in many columns", columns_of("randomblob(1000000)", 450), nullptr},
      {"large text in many columns", columns_of("printf('%.*c', 1000000, 'x')", 450), nullptr},
      {"a recursive CTE without end",
       "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", nullptr},
      {"a deep expression", nested(5000), nullptr},
      {"a huge IN list", in_list, nullptr},
      {"json of a large value", "SELECT json_array_length(json_group_array(a)) FROM big, t", nullptr},
      {"json_each over a large array",
       "SELECT count(*) FROM json_each((SELECT json_group_array(x) FROM (WITH RECURSIVE c(x) AS (SELECT 1 "
       "UNION ALL SELECT x + 1 FROM c) SELECT x FROM c)))",
       nullptr},
      {"json_extract of a deep path", "SELECT json_extract(printf('%.*c', 1000000, '['), '$[0][0][0]')",
       nullptr},
      {"ORDER BY over a large result",
       "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000000) SELECT x FROM c "
       "ORDER BY random() LIMIT 1",
       nullptr},
      {"a sort of large rows",
       "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) SELECT length(r) FROM "
       "(SELECT randomblob(1000000) AS r FROM c) ORDER BY r LIMIT 1",
       nullptr},
      {"group_concat", "SELECT length(group_concat(a)) FROM big, t", nullptr},
      {"a cross join", "SELECT count(*) FROM t a, t b, t c, t d", nullptr},
      {"DISTINCT over a cross join", "SELECT count(DISTINCT a.v || b.v || c.v) FROM t a, t b, t c", nullptr},
      {"hex of large values", "SELECT max(length(hex(a || a))) FROM big, t, t", nullptr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const SqlStore store(options());
    const Timed t = timed(store, c.sql, c.params);
    std::printf("  %-32s %5lld ms  %s\n", c.what.c_str(), static_cast<long long>(t.took.count()),
                t.result.ok() ? "answered" : std::string(to_string(t.result.error())).c_str());
    EXPECT_LE(t.took, kBudget + kSlack)
        << c.what << ": "
        << (t.result.ok() ? std::string("answered")
                          : std::string(to_string(t.result.error())) + ": " + t.result.message());
  }
}

// The same bounds on a rw store, where a write stopped by them leaves
// nothing behind.
TEST_F(SqlBoundsTest, AHostileWriteIsStoppedAndLeavesNothing) {
  const SqlStore rw(options(AccessMode::kReadWrite));
  const Timed t = timed(rw, "INSERT INTO t(v) SELECT instr(a, b) FROM big");
  EXPECT_LE(t.took, kBudget + kSlack);
  ASSERT_FALSE(t.result.ok());
  EXPECT_EQ(t.result.error(), StoreError::kLimitExceeded) << t.result.message();
  auto n = rw.execute("SELECT count(*) AS n FROM t", nullptr);
  ASSERT_TRUE(n.ok()) << n.message();
  EXPECT_EQ(n.value().rows[0]["n"], 1000);
  // Positive control: the same write with an honest value lands.
  auto ok = rw.execute("INSERT INTO t(v) SELECT instr(a, 'a') FROM big", nullptr);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok.value().changes, 1);
}

TEST_F(SqlBoundsTest, HonestHeavyQueriesStillAnswer) {
  const SqlStore store(options());
  // The builtins the hostile cases abuse, on the same large values, used
  // as they are meant to be: linear work, correct answers.
  Timed t = timed(store, "SELECT instr(a, 'b') AS i, instr(b, 'b') AS j, length(a) AS n FROM big");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows, json::parse(R"([{"i":0,"j":300001,"n":1000000}])"));
  t = timed(store,
            "SELECT length(replace(b, 'b', 'cc')) AS n, length(printf('%.*c', 500000, 'x')) AS p FROM big");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows, json::parse(R"([{"n":300002,"p":500000}])"));
  // A sum over 300,000 generated rows, and a sort of 100,000.
  t = timed(store,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) "
            "SELECT sum(x) AS s, count(*) AS n FROM c");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows, json::parse(R"([{"s":45000150000,"n":300000}])"));
  t = timed(store,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) "
            "SELECT x FROM c ORDER BY -x LIMIT 2");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows, json::parse(R"([{"x":100000},{"x":99999}])"));
  // A join and LIKE with a short pattern.
  t = timed(store, "SELECT count(*) AS n FROM t a JOIN t b ON a.id = b.id WHERE a.v LIKE 'row1%'");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows, json::parse(R"([{"n":112}])"));
  // Many columns of small values and a nested expression are honest.
  t = timed(store, columns_of("1", 400) + ", " + nested(20).substr(7) + " AS deep");
  ASSERT_TRUE(t.result.ok()) << t.result.message();
  EXPECT_EQ(t.result.value().rows[0]["deep"], 21);
}

TEST_F(SqlBoundsTest, MemoryIsBoundedPerCall) {
  SqlStoreOptions small = options();
  small.limits.max_memory_bytes = 64ull << 20;
  const SqlStore store(small);
  const Timed t = timed(store, columns_of("randomblob(1000000)", 100));
  ASSERT_FALSE(t.result.ok());
  EXPECT_EQ(t.result.error(), StoreError::kLimitExceeded) << t.result.message();
  EXPECT_NE(t.result.message().find("memory"), std::string::npos) << t.result.message();
  // Positive control: a large value within the bound answers.
  const Timed small_row = timed(store, "SELECT length(randomblob(1000000)) AS n");
  ASSERT_TRUE(small_row.result.ok()) << small_row.result.message();
  EXPECT_EQ(small_row.result.value().rows[0]["n"], 1000000);
}

TEST_F(SqlBoundsTest, ASlowStatementHoldsOnlyItsOwnCall) {
  const std::string other = dir_.file("other.db");
  raw_exec(other, "CREATE TABLE o(x); INSERT INTO o VALUES(42);");
  SqlStoreOptions slow_options = options();
  slow_options.limits.time_budget = milliseconds(3000);
  const SqlStore slow(slow_options);
  const SqlStore elsewhere(options(AccessMode::kReadOnly, other));
  std::atomic<bool> slow_done{false};
  auto running = std::async(std::launch::async, [&] {
    auto r = slow.execute(kEndless, nullptr);
    slow_done = true;
    return r;
  });
  // Another store and the same store answer while the slow call runs.
  std::this_thread::sleep_for(milliseconds(100));  // let it start; not a synchronisation
  const Timed b = timed(elsewhere, "SELECT x FROM o");
  ASSERT_TRUE(b.result.ok()) << b.result.message();
  EXPECT_EQ(b.result.value().rows, json::parse(R"([{"x":42}])"));
  const Timed same = timed(slow, "SELECT count(*) AS n FROM t");
  ASSERT_TRUE(same.result.ok()) << same.result.message();
  EXPECT_FALSE(slow_done.load()) << "the slow call ended before the reads: the test proved nothing";
  EXPECT_LE(b.took, milliseconds(1000));
  EXPECT_LE(same.took, milliseconds(1000));
  auto r = running.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), StoreError::kLimitExceeded) << r.message();
}

TEST_F(SqlBoundsTest, ACancelledCallStopsAtOnce) {
  SqlStoreOptions long_options = options();
  long_options.limits.time_budget = milliseconds(10000);
  const SqlStore store(long_options);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel = true;
  });
  const Timed t = timed(store, kEndless, nullptr, &cancel);
  canceller.join();
  ASSERT_FALSE(t.result.ok());
  EXPECT_EQ(t.result.error(), StoreError::kForbidden) << t.result.message();
  EXPECT_LE(t.took, milliseconds(2000));  // far below the 10 s budget
  // Positive control: the flag unset, a call answers.
  std::atomic<bool> keep{false};
  EXPECT_TRUE(timed(store, "SELECT 1", nullptr, &keep).result.ok());
}

}  // namespace
}  // namespace zn::broker
