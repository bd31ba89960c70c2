#include "broker/resources/gateway.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/temp_dir.h"
#include "support/files.h"
#include "broker/resources/raw_sql.h"

namespace zn::broker {
namespace {

using ::zn::test::raw_exec;
using ::zn::test::read_file;
using ::zn::test::write_file;

namespace fs = std::filesystem;
using nlohmann::json;

// The one 404 body: every miss reads exactly so.
constexpr std::string_view kNotFoundBody = R"({"error":{"code":"not_found","message":"not found"}})";

// A handle of the shape zerod issues: "cap:" and 32 of [a-z2-7].
std::string random_handle() {
  static std::mt19937_64 rng(std::random_device{}());
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string h = "cap:";
  for (int i = 0; i < 32; ++i) h += kAlphabet[rng() % 32];
  return h;
}

// "cap:" spelt "cap%3A", as a client that encodes the segment sends it.
std::string encoded(const std::string& handle) { return "cap%3A" + handle.substr(4); }

// One session's capabilities by handle: the caller's lookup, as zerod's.
class Session {
 public:
  std::string bind(const std::string& name, CapabilityKind kind, bool read_only, const std::string& store) {
    std::string handle = random_handle();
    caps_[handle] = BoundCapability{name, Capability{kind, read_only, store}, capability_store_id(handle)};
    return handle;
  }
  HandleLookup lookup() const {
    return [this](std::string_view handle) -> std::optional<BoundCapability> {
      auto it = caps_.find(std::string(handle));
      if (it == caps_.end()) return std::nullopt;
      return it->second;
    };
  }

 private:
  std::map<std::string, BoundCapability> caps_;
};

class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(dataset_);
    fs::create_directory(out_);
    fs::create_directory(tiny_);
    fs::create_directory(outside_);
    write_file(outside_ / "secret", "outside-secret");
    write_file(dataset_ / "input.csv", "a,b\n1,2\n");
    fs::create_directories(dataset_ / "nested/deeper");
    write_file(dataset_ / "nested/deeper/x y.txt", "spaced");
    raw_exec(ledger_,
             "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, data BLOB);"
             "INSERT INTO t VALUES(1, 'one', x'00ff'), (2, 'two', NULL), (3, 'three', NULL);");

    StoreCatalog c;
    c.sql_helper = ZN_SQL_CALL_BIN;
    c.kv["main"] = {dir_.file("kv.db"), {}};
    KvQuota small;
    small.max_keys = 1;
    small.max_value_bytes = 16;
    c.kv["small"] = {dir_.file("kv-small.db"), small};
    c.queue["main"] = {dir_.file("queue.db"), {}};
    QueueQuota qsmall;
    qsmall.max_messages = 1;
    qsmall.max_message_bytes = 16;
    c.queue["small"] = {dir_.file("queue-small.db"), qsmall};
    c.blob["dataset"].directory = dataset_.string();
    c.blob["out"].directory = out_.string();
    c.blob["tiny"].directory = tiny_.string();
    c.blob["tiny"].quota_bytes = 10;
    c.blob["tiny"].max_object_bytes = 8;
    c.sql["ledger"].path = ledger_;
    c.sql["ledger"].limits.max_rows = 100;
    c.sql["scratch"].path = dir_.file("scratch.db");
    c.sql["scratch"].create_if_missing = true;
    c.sql["scratch"].quota_bytes = 64 * 1024;
    stores_ = std::make_unique<StoreSet>(std::move(c));
    gateway_ = std::make_unique<ResourceGateway>(*stores_);

    data_ = a_.bind("data", CapabilityKind::kKv, false, "main");
    notes_ = a_.bind("notes", CapabilityKind::kKv, true, "main");
    small_kv_ = a_.bind("small-kv", CapabilityKind::kKv, false, "small");
    reports_ = a_.bind("reports", CapabilityKind::kBlob, true, "dataset");
    results_ = a_.bind("results", CapabilityKind::kBlob, false, "out");
    dataset_rw_ = a_.bind("dataset-rw", CapabilityKind::kBlob, false, "dataset");
    tiny_blob_ = a_.bind("tiny", CapabilityKind::kBlob, false, "tiny");
    ledger_ro_ = a_.bind("ledger", CapabilityKind::kSql, true, "ledger");
    ledger_rw_ = a_.bind("ledger-rw", CapabilityKind::kSql, false, "ledger");
    scratch_ = a_.bind("scratch", CapabilityKind::kSql, false, "scratch");
    jobs_ = a_.bind("jobs", CapabilityKind::kQueue, false, "main");
    small_q_ = a_.bind("small-q", CapabilityKind::kQueue, false, "small");
    b_data_ = b_.bind("data", CapabilityKind::kKv, false, "main");
  }

  GatewayResponse call(const std::string& method, const std::string& target, const std::string& body = "",
                       const Session* session = nullptr) {
    return gateway_->serve({method, target, body}, (session ? *session : a_).lookup());
  }

  static void expect_error(const GatewayResponse& r, int status, const std::string& code,
                           const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    EXPECT_EQ(r.content_type, "application/json") << what;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["error"]["code"], code) << what << ": " << r.body;
    EXPECT_FALSE(body["error"]["message"].get<std::string>().empty()) << what;
    EXPECT_EQ(r.event, "resource:deny") << what;
    EXPECT_EQ(r.detail["code"], code) << what;
    EXPECT_EQ(r.detail["status"], status) << what;
  }

  // Byte for byte the 404 of a missing key.
  static void expect_not_found(const GatewayResponse& r, const std::string& what) {
    EXPECT_EQ(r.status, 404) << what;
    EXPECT_EQ(r.content_type, "application/json") << what;
    EXPECT_EQ(r.body, kNotFoundBody) << what;
    EXPECT_EQ(r.event, "resource:deny") << what;
  }

  zn::test::TempDir dir_;
  fs::path dataset_ = dir_.path() / "dataset";
  fs::path out_ = dir_.path() / "out";
  fs::path tiny_ = dir_.path() / "tiny";
  fs::path outside_ = dir_.path() / "outside";  // a sibling of the blob directories
  std::string ledger_ = dir_.file("ledger.db");
  std::unique_ptr<StoreSet> stores_;
  std::unique_ptr<ResourceGateway> gateway_;
  Session a_, b_;
  std::string data_, notes_, small_kv_, reports_, results_, dataset_rw_, tiny_blob_, ledger_ro_, ledger_rw_,
      scratch_, jobs_, small_q_, b_data_;
};

TEST_F(GatewayTest, KvRoundTrip) {
  const std::string value("bin\0ary\xff", 8);
  auto put = call("PUT", "/v1/kv/" + data_ + "/my%20key", value);
  EXPECT_EQ(put.status, 204) << put.body;
  EXPECT_EQ(put.content_type, "");
  EXPECT_EQ(put.body, "");
  EXPECT_EQ(put.event, "resource:write");
  EXPECT_EQ(put.detail["op"], "put");
  EXPECT_EQ(put.detail["bytes_in"], 8);

  // The handle as cap%3A, a query string ignored: the same key.
  auto get = call("GET", "/v1/kv/" + encoded(data_) + "/my%20key?x=1&y");
  EXPECT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.content_type, "application/octet-stream");
  EXPECT_EQ(get.body, value);
  EXPECT_EQ(get.event, "resource:read");
  EXPECT_EQ(get.detail["op"], "get");
  EXPECT_EQ(get.detail["bytes_out"], 8);
  EXPECT_EQ(get.detail["cap"], "data");
  EXPECT_EQ(get.detail["kind"], "kv");

  // A key may hold slashes, encoded or not, and '+' is a '+'.
  ASSERT_EQ(call("PUT", "/v1/kv/" + data_ + "/dir/sub%2Fkey+1", "nested").status, 204);
  EXPECT_EQ(call("GET", "/v1/kv/" + data_ + "/dir%2Fsub/key%2B1").body, "nested");

  auto erase = call("DELETE", "/v1/kv/" + data_ + "/my%20key");
  EXPECT_EQ(erase.status, 204);
  EXPECT_EQ(erase.event, "resource:write");
  EXPECT_EQ(erase.detail["op"], "delete");
  auto gone = call("GET", "/v1/kv/" + data_ + "/my%20key");
  expect_not_found(gone, "deleted key");
  EXPECT_EQ(gone.detail["reason"], "missing");
  expect_not_found(call("DELETE", "/v1/kv/" + data_ + "/my%20key"), "deleted twice");

  // A read-only capability on the same store reads its own namespace (keyed
  // by its handle), not the rw capability's.
  expect_not_found(call("GET", "/v1/kv/" + notes_ + "/dir/sub/key+1"), "another capability's key");
}

TEST_F(GatewayTest, BlobRoundTrip) {
  auto get = call("GET", "/v1/blob/" + reports_ + "/input.csv");
  EXPECT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.content_type, "application/octet-stream");
  EXPECT_EQ(get.body, "a,b\n1,2\n");
  EXPECT_EQ(get.event, "resource:read");
  EXPECT_EQ(call("GET", "/v1/blob/" + reports_ + "/nested/deeper/x%20y.txt").body, "spaced");

  auto put = call("PUT", "/v1/blob/" + results_ + "/runs/2026/result.bin", std::string("\0\1\2", 3));
  EXPECT_EQ(put.status, 204) << put.body;
  EXPECT_EQ(put.event, "resource:write");
  EXPECT_EQ(read_file(out_ / "runs/2026/result.bin"), std::string("\0\1\2", 3));
  EXPECT_EQ(call("GET", "/v1/blob/" + results_ + "/runs/2026/result.bin").body, std::string("\0\1\2", 3));
  auto missing = call("GET", "/v1/blob/" + results_ + "/runs/none");
  expect_not_found(missing, "missing object");
  EXPECT_EQ(missing.detail["reason"], "missing");
}

TEST_F(GatewayTest, SqlQueries) {
  auto r = call("POST", "/v1/sql/" + ledger_ro_,
                R"({"sql": "SELECT id, name, data FROM t WHERE id <= ? ORDER BY id", "params": [2]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  EXPECT_EQ(json::parse(r.body),
            json::parse(R"({"rows": [{"id": 1, "name": "one", "data": {"base64": "AP8="}},
                                                          {"id": 2, "name": "two", "data": null}],
                                                 "changes": 0})"));
  EXPECT_EQ(r.event, "resource:read");
  EXPECT_EQ(r.detail["op"], "query");
  EXPECT_EQ(r.detail["rows"], 2);

  auto named = call("POST", "/v1/sql/" + ledger_ro_,
                    R"({"sql": "SELECT name FROM t WHERE id = :id", "params": {"id": 3}})");
  ASSERT_EQ(named.status, 200) << named.body;
  EXPECT_EQ(json::parse(named.body)["rows"], json::parse(R"([{"name": "three"}])"));
  auto bare = call("POST", "/v1/sql/" + ledger_ro_, R"({"sql": "SELECT count(*) AS n FROM t"})");
  ASSERT_EQ(bare.status, 200) << bare.body;
  EXPECT_EQ(json::parse(bare.body)["rows"][0]["n"], 3);

  ASSERT_EQ(call("POST", "/v1/sql/" + scratch_, json{{"sql", "CREATE TABLE r(x)"}}.dump()).status, 200);
  auto write = call("POST", "/v1/sql/" + scratch_,
                    R"j({"sql": "INSERT INTO r VALUES(?), (?)", "params": [1, "two"]})j");
  ASSERT_EQ(write.status, 200) << write.body;
  EXPECT_EQ(json::parse(write.body)["changes"], 2);
  EXPECT_EQ(write.event, "resource:write");
  EXPECT_EQ(write.detail["changes"], 2);
  auto select = call("POST", "/v1/sql/" + scratch_, R"({"sql": "SELECT x FROM r ORDER BY rowid"})");
  EXPECT_EQ(json::parse(select.body)["rows"], json::parse(R"([{"x": 1}, {"x": "two"}])"));
  EXPECT_EQ(select.event, "resource:read");  // no changes

  for (const std::string body : {"", "not json", "[]", R"({"params": []})", R"({"sql": 5})",
                                 R"({"sql": "SELECT 1", "params": 5})", R"({"sql": "SELECT 1", "param": []})",
                                 R"({"sql": "SELEC 1"})", R"({"sql": "SELECT ?", "params": [{}]})"})
    expect_error(call("POST", "/v1/sql/" + ledger_ro_, body), 400, "bad_request", body);
}

TEST_F(GatewayTest, QueueSendReceiveAck) {
  auto empty = call("POST", "/v1/queue/" + jobs_ + "/receive");
  EXPECT_EQ(empty.status, 204) << empty.body;
  EXPECT_EQ(empty.content_type, "");

  auto sent = call("POST", "/v1/queue/" + jobs_ + "/send", "job one");
  ASSERT_EQ(sent.status, 200) << sent.body;
  EXPECT_EQ(sent.event, "resource:write");
  EXPECT_EQ(sent.detail["op"], "send");
  const std::string id = json::parse(sent.body)["id"];
  ASSERT_EQ(call("POST", "/v1/queue/" + jobs_ + "/send", std::string("\xff\x00", 2)).status, 200);

  auto got = call("POST", "/v1/queue/" + jobs_ + "/receive", R"({"visibility_seconds": 60})");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.event, "resource:write");
  const json m = json::parse(got.body);
  EXPECT_EQ(m["id"], id);
  EXPECT_EQ(m["body"], "job one");
  EXPECT_EQ(m["deliveries"], 1);
  auto binary = call("POST", "/v1/queue/" + jobs_ + "/receive", "{}");
  ASSERT_EQ(binary.status, 200) << binary.body;
  EXPECT_EQ(json::parse(binary.body)["body"], json::parse(R"({"base64": "/wA="})"));
  EXPECT_EQ(call("POST", "/v1/queue/" + jobs_ + "/receive").status, 204);  // both hidden

  const std::string ack = json{{"receipt", m["receipt"]}}.dump();
  auto acked = call("POST", "/v1/queue/" + jobs_ + "/ack", ack);
  EXPECT_EQ(acked.status, 204) << acked.body;
  EXPECT_EQ(acked.detail["op"], "ack");
  auto again = call("POST", "/v1/queue/" + jobs_ + "/ack", ack);
  expect_not_found(again, "acked twice");
  EXPECT_EQ(again.detail["reason"], "missing");

  for (const std::string body :
       {R"({"visibility_seconds": 0})", R"({"visibility_seconds": 43201})", R"({"visibility_seconds": 1.5})",
        R"({"visibility_seconds": "30"})", R"({"visibility": 30})", "30", "not json"})
    expect_error(call("POST", "/v1/queue/" + jobs_ + "/receive", body), 400, "bad_request", body);
  for (const std::string body : {"", "{}", R"({"receipt": 5})", R"({"receipt": "x", "more": 1})"})
    expect_error(call("POST", "/v1/queue/" + jobs_ + "/ack", body), 400, "bad_request", body);
}

// An unknown, truncated, guessed, malformed, another session's or another
// kind's handle, a route that does not exist and a missing key: one answer.
TEST_F(GatewayTest, EveryMissIsTheSame404) {
  ASSERT_EQ(call("PUT", "/v1/kv/" + data_ + "/present", "v").status, 204);
  ASSERT_EQ(call("PUT", "/v1/kv/" + b_data_ + "/b-key", "b's", &b_).status, 204);
  // Positive controls: each handle below works in its own session and kind.
  ASSERT_EQ(call("GET", "/v1/kv/" + data_ + "/present").status, 200);
  ASSERT_EQ(call("GET", "/v1/kv/" + b_data_ + "/b-key", "", &b_).status, 200);
  ASSERT_EQ(call("GET", "/v1/blob/" + reports_ + "/input.csv").status, 200);

  struct Miss {
    std::string method, target, reason;
  };
  const std::string truncated = data_.substr(0, data_.size() - 1);
  const std::vector<Miss> misses = {
      {"GET", "/v1/kv/" + data_ + "/absent", "missing"},
      {"GET", "/v1/kv/" + random_handle() + "/present", "unknown handle"},
      {"GET", "/v1/kv/" + random_handle() + "/present", "unknown handle"},
      {"PUT", "/v1/kv/" + random_handle() + "/present", "unknown handle"},
      {"POST", "/v1/kv/" + random_handle() + "/present", "unknown handle"},  // not 405: the handle first
      {"GET", "/v1/kv/" + truncated + "/present", "malformed handle"},
      {"GET", "/v1/kv/" + data_ + "a/present", "malformed handle"},
      {"GET", "/v1/kv/" + data_.substr(4) + "/present", "malformed handle"},  // no "cap:"
      {"GET", "/v1/kv/CAP:" + data_.substr(4) + "/present", "malformed handle"},
      {"GET", "/v1/kv/cap%3z" + data_.substr(5) + "/present", "no route"},  // a broken escape
      {"GET", "/v1/kv/" + b_data_ + "/b-key", "unknown handle"},            // tenant B's, from A
      {"GET", "/v1/kv/" + b_data_ + "/present", "unknown handle"},
      {"GET", "/v1/blob/" + data_ + "/input.csv", "wrong kind"},  // a kv handle on the blob route
      {"GET", "/v1/kv/" + reports_ + "/input.csv", "wrong kind"},
      {"POST", "/v1/sql/" + jobs_, "wrong kind"},
      {"POST", "/v1/queue/" + ledger_ro_ + "/send", "wrong kind"},
      {"GET", "/v1/kv/" + data_, "no route"},  // no key
      {"GET", "/v1/list", "no route"},
      {"GET", "/v1/kv", "no route"},
      {"GET", "/v1/kv/", "no route"},
      {"GET", "/v2/kv/" + data_ + "/present", "no route"},
      {"GET", "/v1/files/" + data_ + "/present", "no route"},
      {"POST", "/v1/sql/" + ledger_ro_ + "/", "no route"},
      {"POST", "/v1/queue/" + jobs_ + "/list", "no route"},
      {"POST", "/v1/queue/" + jobs_, "no route"},
      {"GET", "v1/kv/" + data_ + "/present", "no route"},
      {"GET", "*", "no route"},
      {"GET", "", "no route"},
  };
  for (const Miss& m : misses) {
    auto r = call(m.method, m.target);
    expect_not_found(r, m.method + " " + m.target);
    EXPECT_EQ(r.detail["reason"], m.reason) << m.target;
    // Only a handle that resolved in this session is named in the audit.
    EXPECT_EQ(r.detail.contains("cap"), m.reason == "missing" || m.reason == "wrong kind") << m.target;
  }
  // B's data is untouched and A never saw it.
  EXPECT_EQ(call("GET", "/v1/kv/" + b_data_ + "/b-key", "", &b_).body, "b's");
}

TEST_F(GatewayTest, AWrongMethodIs405OnlyOnceTheHandleResolved) {
  struct Case {
    std::string method, target;
  };
  for (const Case& c : std::vector<Case>{{"POST", "/v1/kv/" + data_ + "/k"},
                                         {"HEAD", "/v1/kv/" + data_ + "/k"},
                                         {"DELETE", "/v1/blob/" + results_ + "/x"},
                                         {"GET", "/v1/sql/" + ledger_ro_},
                                         {"GET", "/v1/queue/" + jobs_ + "/receive"},
                                         {"PUT", "/v1/queue/" + jobs_ + "/send"}}) {
    auto r = call(c.method, c.target);
    expect_error(r, 405, "method_not_allowed", c.method + " " + c.target);
    EXPECT_FALSE(r.detail.contains("op"));
    // The same with an unknown handle: 404.
    const size_t at = c.target.find("cap:");
    const std::string unknown = c.target.substr(0, at) + random_handle() + c.target.substr(at + 36);
    expect_not_found(call(c.method, unknown), unknown);
  }
}

TEST_F(GatewayTest, ReadOnlyKvAndBlobRefuseWrites) {
  auto put = call("PUT", "/v1/kv/" + notes_ + "/k", "v");
  expect_error(put, 403, "read_only", "kv put");
  EXPECT_EQ(put.detail["op"], "put");
  expect_error(call("DELETE", "/v1/kv/" + notes_ + "/k"), 403, "read_only", "kv delete");
  expect_not_found(call("GET", "/v1/kv/" + notes_ + "/k"), "nothing was written");

  const std::string before = read_file(dataset_ / "input.csv");
  expect_error(call("PUT", "/v1/blob/" + reports_ + "/input.csv", "overwritten"), 403, "read_only",
               "blob put");
  expect_error(call("PUT", "/v1/blob/" + reports_ + "/new.csv", "new"), 403, "read_only", "blob put new");
  EXPECT_EQ(read_file(dataset_ / "input.csv"), before);
  EXPECT_FALSE(fs::exists(dataset_ / "new.csv"));
  // Positive control: the same put through a rw capability on the same directory.
  EXPECT_EQ(call("PUT", "/v1/blob/" + dataset_rw_ + "/new.csv", "new").status, 204);
  EXPECT_EQ(read_file(dataset_ / "new.csv"), "new");
}

TEST_F(GatewayTest, ReadOnlySqlRefusesWrites) {
  const std::string before = read_file(ledger_);
  struct Case {
    std::string sql;
    std::string code;
  };
  const std::vector<Case> hostile = {
      {"INSERT INTO t(name) VALUES('x')", "read_only"},
      {"WITH x AS (SELECT 'cte') INSERT INTO t(name) SELECT * FROM x", "read_only"},
      {"WITH x AS (SELECT 1) DELETE FROM t WHERE id IN (SELECT * FROM x)", "read_only"},
      {"UPDATE t SET name = 'x'", "read_only"},
      {"PRAGMA writable_schema=ON", "forbidden"},
      {"ATTACH DATABASE '" + dir_.file("x.db") + "' AS x", "forbidden"},
      {"ATTACH DATABASE ':memory:' AS m", "forbidden"},
  };
  for (const Case& c : hostile) {
    auto r = call("POST", "/v1/sql/" + ledger_ro_, json{{"sql", c.sql}}.dump());
    expect_error(r, 403, c.code, c.sql);
  }
  EXPECT_EQ(read_file(ledger_), before);
  EXPECT_FALSE(fs::exists(dir_.file("x.db")));
  // Positive control: the writes pass through a rw capability on the same
  // database (ATTACH and writable_schema stay refused in any mode).
  auto insert = call("POST", "/v1/sql/" + ledger_rw_, json{{"sql", hostile[0].sql}}.dump());
  EXPECT_EQ(insert.status, 200) << insert.body;
  auto cte = call("POST", "/v1/sql/" + ledger_rw_, json{{"sql", hostile[1].sql}}.dump());
  EXPECT_EQ(cte.status, 200) << cte.body;
  EXPECT_EQ(json::parse(cte.body)["changes"], 1);
  expect_error(call("POST", "/v1/sql/" + ledger_rw_, json{{"sql", hostile[4].sql}}.dump()), 403, "forbidden",
               "rw writable_schema");
}

// Traversal through the URL: '..' plain and encoded, absolute paths, an
// encoded slash, a symlink the test plants in the directory. None reads
// (or writes) outside.
TEST_F(GatewayTest, BlobPathsNeverLeaveTheDirectory) {
  fs::create_directory_symlink(outside_, dataset_ / "link-dir");
  fs::create_symlink(outside_ / "secret", dataset_ / "link-file");
  ASSERT_EQ(read_file(dataset_ / "link-file"), "outside-secret");  // the links work for the OS

  const std::vector<std::string> paths = {
      "../outside/secret",
      "%2e%2e/outside/secret",
      "%2E%2E%2Foutside%2Fsecret",
      "nested/../../outside/secret",
      "nested/%2e%2e/%2e%2e/outside/secret",
      "/" + outside_.string().substr(1) + "/secret",  // "//tmp/...": the rest is absolute
      "%2F" + outside_.string().substr(1) + "%2Fsecret",
      "./input.csv",
      "link-dir/secret",
      "link-file",
      "nested/../link-file",
  };
  for (const std::string& p : paths) {
    for (const std::string& handle : {reports_, dataset_rw_}) {
      auto r = call("GET", "/v1/blob/" + handle + "/" + p);
      EXPECT_NE(r.status, 200) << p;
      EXPECT_EQ(r.body.find("outside-secret"), std::string::npos) << p;
      EXPECT_EQ(r.event, "resource:deny") << p;
      EXPECT_TRUE(r.status == 400 || r.status == 403 || r.status == 404) << p << ": " << r.status;
    }
    auto put = call("PUT", "/v1/blob/" + dataset_rw_ + "/" + p, "overwritten");
    EXPECT_NE(put.status, 204) << p;
  }
  EXPECT_EQ(read_file(outside_ / "secret"), "outside-secret");
  EXPECT_EQ(std::distance(fs::directory_iterator(outside_), fs::directory_iterator()), 1);
  expect_error(call("GET", "/v1/blob/" + reports_ + "/link-file"), 403, "forbidden", "symlink");
  expect_error(call("GET", "/v1/blob/" + reports_ + "/../outside/secret"), 400, "bad_request", "..");
  expect_error(call("GET", "/v1/blob/" + reports_ + "/in%zzput.csv"), 400, "bad_request", "bad escape");
  expect_error(call("GET", "/v1/blob/" + reports_ + "/"), 400, "bad_request", "empty path");
  // Positive control: the same directory, a path inside.
  EXPECT_EQ(call("GET", "/v1/blob/" + reports_ + "/nested/../input.csv").status, 400);  // '..' even inside
  EXPECT_EQ(call("GET", "/v1/blob/" + reports_ + "/input.csv").body, "a,b\n1,2\n");
}

TEST_F(GatewayTest, QuotasAnswer507AndSizeLimits413) {
  ASSERT_EQ(call("PUT", "/v1/kv/" + small_kv_ + "/one", "v").status, 204);
  expect_error(call("PUT", "/v1/kv/" + small_kv_ + "/two", "v"), 507, "quota_exceeded", "kv keys");
  expect_error(call("PUT", "/v1/kv/" + small_kv_ + "/one", std::string(17, 'v')), 413, "too_large",
               "kv value");

  ASSERT_EQ(call("PUT", "/v1/blob/" + tiny_blob_ + "/a", "12345678").status, 204);
  expect_error(call("PUT", "/v1/blob/" + tiny_blob_ + "/b", "123"), 507, "quota_exceeded", "blob bytes");
  expect_error(call("PUT", "/v1/blob/" + tiny_blob_ + "/c", "123456789"), 413, "too_large", "blob object");

  ASSERT_EQ(call("POST", "/v1/queue/" + small_q_ + "/send", "m").status, 200);
  expect_error(call("POST", "/v1/queue/" + small_q_ + "/send", "m"), 507, "quota_exceeded", "queue messages");
  expect_error(call("POST", "/v1/queue/" + small_q_ + "/send", std::string(17, 'm')), 413, "too_large",
               "queue message");

  ASSERT_EQ(call("POST", "/v1/sql/" + scratch_, json{{"sql", "CREATE TABLE big(b)"}}.dump()).status, 200);
  expect_error(
      call("POST", "/v1/sql/" + scratch_, json{{"sql", "INSERT INTO big VALUES(randomblob(200000))"}}.dump()),
      507, "quota_exceeded", "sql bytes");
}

TEST_F(GatewayTest, EveryErrorCodeHasItsStatus) {
  // limit_exceeded: the ledger returns at most 100 rows.
  expect_error(
      call(
          "POST", "/v1/sql/" + ledger_ro_,
          R"({"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) SELECT x FROM c"})"),
      422, "limit_exceeded", "rows");
  expect_error(call("GET", "/v1/kv/" + data_ + "/" + std::string(600, 'k')), 400, "bad_request", "long key");
  expect_error(call("GET", "/v1/kv/" + data_ + "/%00"), 400, "bad_request", "NUL key");
  expect_error(call("GET", "/v1/kv/" + data_ + "/%4"), 400, "bad_request", "truncated escape");
  expect_error(call("GET", "/v1/kv/" + data_ + "/"), 400, "bad_request", "empty key");
  expect_error(call("POST", "/v1/sql/" + scratch_, R"({"sql": "ATTACH ':memory:' AS m"})"), 403, "forbidden",
               "attach");
  expect_error(call("POST", "/v1/kv/" + data_ + "/k"), 405, "method_not_allowed", "method");

  // internal: the rw instance of a store whose file went away cannot open.
  ASSERT_TRUE(fs::remove(ledger_));
  auto r = call("POST", "/v1/sql/" + ledger_rw_, R"({"sql": "SELECT 1"})");
  expect_error(r, 500, "internal", "store unavailable");
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "store unavailable");
  EXPECT_EQ(r.body.find(dir_.path().string()), std::string::npos) << r.body;
}

// The audit says who, what and how much; never the value, the key, the
// path, the statement, the message or the handle. Error messages do not
// quote them either.
TEST_F(GatewayTest, AuditAndErrorsNeverCarryContents) {
  const std::string value = "value-7c1e";
  const std::string key = "key-91ab";
  const std::string path = "path-4d2f";
  const std::string literal = "sqltext-5e0b";
  const std::string message = "message-a3c9";
  std::vector<std::pair<std::string, GatewayResponse>> seen;
  auto note = [&](const std::string& what, GatewayResponse r) { seen.emplace_back(what, std::move(r)); };

  note("kv put", call("PUT", "/v1/kv/" + data_ + "/" + key, value));
  note("kv get", call("GET", "/v1/kv/" + data_ + "/" + key));
  note("kv missing", call("GET", "/v1/kv/" + data_ + "/" + key + "-absent"));
  note("kv ro put", call("PUT", "/v1/kv/" + notes_ + "/" + key, value));
  note("kv too large", call("PUT", "/v1/kv/" + small_kv_ + "/" + key, value + value));
  note("kv bad key", call("GET", "/v1/kv/" + data_ + "/" + key + std::string(600, 'k')));
  note("blob put", call("PUT", "/v1/blob/" + results_ + "/" + path, value));
  note("blob get", call("GET", "/v1/blob/" + results_ + "/" + path));
  note("blob bad", call("GET", "/v1/blob/" + results_ + "/../" + path));
  note("blob missing", call("GET", "/v1/blob/" + results_ + "/" + path + "/x"));
  note("sql", call("POST", "/v1/sql/" + scratch_, json{{"sql", "SELECT '" + literal + "' AS v"}}.dump()));
  note("sql write",
       call("POST", "/v1/sql/" + scratch_, json{{"sql", "CREATE TABLE IF NOT EXISTS w(v)"}}.dump()));
  note("sql ro", call("POST", "/v1/sql/" + ledger_ro_,
                      json{{"sql", "INSERT INTO t(name) VALUES('" + literal + "')"}}.dump()));
  note("queue send", call("POST", "/v1/queue/" + jobs_ + "/send", message));
  note("queue receive", call("POST", "/v1/queue/" + jobs_ + "/receive"));
  note("unknown", call("GET", "/v1/kv/" + random_handle() + "/" + key));
  note("other session", call("GET", "/v1/kv/" + b_data_ + "/" + key));
  note("method", call("PATCH", "/v1/kv/" + data_ + "/" + key, value));

  ASSERT_EQ(seen[1].second.body, value);  // positive control: the contents did flow
  ASSERT_NE(seen[10].second.body.find(literal), std::string::npos);
  ASSERT_NE(seen[14].second.body.find(message), std::string::npos);
  for (const auto& [what, r] : seen) {
    const std::string audit = r.detail.dump();
    for (const std::string& secret : {value, key, path, literal, message})
      EXPECT_EQ(audit.find(secret), std::string::npos) << what << ": " << audit;
    for (const std::string& handle :
         {data_, notes_, small_kv_, results_, scratch_, ledger_ro_, jobs_, b_data_}) {
      EXPECT_EQ(audit.find(handle.substr(4)), std::string::npos) << what << ": " << audit;
      EXPECT_EQ(audit.find(capability_store_id(handle)), std::string::npos) << what << ": " << audit;
    }
    EXPECT_TRUE(r.detail.contains("status") && r.detail.contains("bytes_in") &&
                r.detail.contains("bytes_out"))
        << what;
    if (r.status >= 400) {
      const std::string error = json::parse(r.body)["error"]["message"];
      for (const std::string& secret : {value, key, path, literal, message})
        EXPECT_EQ(error.find(secret), std::string::npos) << what << ": " << error;
      EXPECT_EQ(error.find(dir_.path().string()), std::string::npos) << what << ": " << error;
    }
  }
}

}  // namespace
}  // namespace zn::broker
