// Capability-scoped resources end to end (issue 13): a real zerod with
// operator-named stores, curl in lab guests reaching cap.zeroness.internal
// over HTTPS (the governed DNS's answer, terminated with the deployment CA,
// served by zerod; nothing leaves the host).
//   - KV, blob, SQL and queue by handle, each with its happy path;
//   - read-only held by SQLite and the stores: writes, CTE-fed writes,
//     PRAGMA writable_schema, ATTACH refused, the database unchanged;
//   - blob traversal and symlink escapes refused, the file outside unread;
//   - no forgery, no enumeration: unknown, truncated, guessed, another
//     kind's and another tenant's handle (from that tenant's guest and
//     back) get the same 404 as a missing key, each miss audited;
//   - quotas (507) and the session's rate (429);
//   - the audit names capability, operation and sizes, never contents.
// Every refusal has its positive control.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

constexpr const char* kDataset = "region,total\nnorth,42\nsouth,17\n";
constexpr const char* kSecretValue = "kv-value-7c1d0b9e";

std::string caps_policy(const std::string& rate = "") {
  return R"({"policy":{"allow":[{"host":"api.github.com","methods":["GET"]}])" + rate + R"(},
    "caps":{"data":{"kind":"kv","mode":"rw"},"seen":{"kind":"kv"},
            "reports":{"kind":"blob","store":"reports"},
            "results":{"kind":"blob","mode":"rw","store":"results"},
            "ledger":{"kind":"sql","db":"ledger"},
            "scratch":{"kind":"sql","mode":"rw","db":"scratch"},
            "jobs":{"kind":"queue"}}})";
}

class CapabilityTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    fs::create_directories(dir_ / "reports" / "2026");
    fs::create_directories(dir_ / "results");
    std::ofstream(dir_ / "reports" / "2026" / "sales.csv") << kDataset;
    std::ofstream(dir_ / "outside.txt") << "outside the store";
    // A symlink planted in the store, to a file outside it.
    fs::create_symlink(dir_ / "outside.txt", dir_ / "reports" / "escape.csv");
    sh("python3 -c \"import sqlite3; c = sqlite3.connect('" + (dir_ / "ledger.db").string() +
       "'); c.execute('create table ledger(id integer primary key, who text, amount integer)'); "
       "c.executemany('insert into ledger(who, amount) values (?, ?)', [('ann', 5), ('bob', 7)]); "
       "c.commit()\"");
    config["stores"] = {{"kv", {{"default", {{"path", (dir_ / "kv.db").string()}, {"max_bytes", 4096}}}}},
                        {"blob",
                         {{"reports", {{"directory", (dir_ / "reports").string()}}},
                          {"results", {{"directory", (dir_ / "results").string()}, {"max_bytes", 8192}}}}},
                        {"sql",
                         {{"ledger", {{"path", (dir_ / "ledger.db").string()}}},
                          {"scratch", {{"path", (dir_ / "scratch.db").string()}, {"create", true}}}}}};
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    json r = call("session.update", {{"id", "user-1"}, {"policy", caps_policy()}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    env_ = call("session.show", {{"id", "user-1"}})["result"]["guest_env"];
    for (const char* name : {"ZN_CAP_DATA", "ZN_CAP_REPORTS", "ZN_CAP_LEDGER", "ZN_CAP_JOBS"})
      ASSERT_EQ(env_.value(name, "").rfind("cap:", 0), 0u) << env_.dump();
  }
  std::string handle(const std::string& env) { return env_.value(env, ""); }

  struct Answer {
    std::string status, body;
  };
  // One request to the gateway from guest `g` (0 or 1); the body from a file
  // so any bytes go as they are.
  Answer cap(const std::string& method, const std::string& path, const std::string& body = "", size_t g = 0,
             int max_seconds = 5) {
    const fs::path f = dir_ / ("body-" + std::to_string(bodies_++));
    std::ofstream(f, std::ios::binary) << body;
    // --path-as-is: the dot segments go as written, for the server to judge.
    std::string cmd = "curl -s -m " + std::to_string(max_seconds) + " --path-as-is --cacert " +
                      p("guest-trust.pem") + " -X " + method + " -w '\\n%{http_code}' ";
    if (!body.empty() || method == "PUT" || method == "POST") cmd += "--data-binary @" + f.string() + " ";
    cmd += "'https://cap.zeroness.internal" + path + "'";
    const std::string out = run_in_netns(lab_->guests()[g].netns, cmd).output;
    const size_t nl = out.rfind('\n');
    if (nl == std::string::npos) return {out, ""};
    return {out.substr(nl + 1), out.substr(0, nl)};
  }
  // A key of the data capability: absent, written, read back.
  void expect_kv_round_trip(const std::string& base) {
    EXPECT_EQ(cap("GET", base + "/greeting").status, "404");
    EXPECT_EQ(cap("PUT", base + "/greeting", kSecretValue).status, "204");
    Answer got = cap("GET", base + "/greeting");
    EXPECT_EQ(got.status, "200");
    EXPECT_EQ(got.body, kSecretValue);
  }
  // The number of ledger rows, read on the host.
  std::string ledger_rows() {
    return run_in_netns(lab_->host_netns(), "python3 -c \"import sqlite3; print(sqlite3.connect('" +
                                                (dir_ / "ledger.db").string() +
                                                "').execute('select count(*) from ledger').fetchone()[0])\"")
        .output;
  }

  // Every value in the shared KV file whose key is "k", sorted, read on the host.
  std::string kv_values() {
    std::ofstream(dir_ / "kv_values.py") << "import sqlite3, sys\n"
                                            "rows = sqlite3.connect(sys.argv[1]).execute(\"select value from "
                                            "kv where key = x'6b'\").fetchall()\n"
                                            "for v in sorted(bytes(r[0]).decode() for r in rows): print(v)\n";
    return run_in_netns(lab_->host_netns(),
                        "python3 " + (dir_ / "kv_values.py").string() + " " + (dir_ / "kv.db").string())
        .output;
  }

  // A second tenant, user-2, on its own guest (g1) with its own KV
  // capability; `handle` is that capability's handle.
  void second_tenant(std::string& handle) {
    lab_->add_guest("g1");
    json r = call("session.create", {{"id", "user-2"},
                                     {"policy", R"({"policy":{},"caps":{"data":{"kind":"kv","mode":"rw"}}})"},
                                     {"device", "zn-tap1"},
                                     {"slot", 1}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    handle = call("session.show", {{"id", "user-2"}})["result"]["guest_env"].value("ZN_CAP_DATA", "");
    ASSERT_EQ(handle.rfind("cap:", 0), 0u);
  }

  json env_;
  std::atomic<int> bodies_{0};  // cap() may run on several threads at once
};

TEST_F(CapabilityTest, TheGatewayNameIsAnsweredAndServedOnTheHost) {
  EXPECT_EQ(dig("cap.zeroness.internal"), "203.0.113.253\n");
  EXPECT_EQ(guest("dig @8.8.8.8 cap.zeroness.internal AAAA +short +tries=1 +time=2").output,
            "2001:db8:ca9::1\n");
  // Over IPv6 as well as IPv4, with the deployment CA's leaf.
  const std::string kv = "/v1/kv/" + handle("ZN_CAP_DATA") + "/k6";
  ASSERT_EQ(cap("PUT", kv, "v6").status, "204");
  const CommandResult six = guest("curl -s -6 -m 5 --cacert " + p("guest-trust.pem") +
                                  " 'https://cap.zeroness.internal" + kv + "'");
  EXPECT_EQ(six.output, "v6");
  // Nothing reached an upstream; cleartext is refused.
  EXPECT_EQ(upstream_log().find("cap.zeroness.internal"), std::string::npos) << upstream_log();
  const CommandResult plain =
      guest("curl -s -m 5 -o /dev/null -w '%{http_code}' 'http://cap.zeroness.internal" + kv + "'");
  EXPECT_EQ(plain.output, "403");
}

TEST_F(CapabilityTest, KvByHandle) {
  const std::string base = "/v1/kv/" + handle("ZN_CAP_DATA");
  expect_kv_round_trip(base);
  // Keys may hold slashes and escapes; the handle may be percent-encoded.
  std::string encoded = handle("ZN_CAP_DATA");
  encoded.replace(3, 1, "%3A");
  EXPECT_EQ(cap("PUT", "/v1/kv/" + encoded + "/a%2Fb/c", "x").status, "204");
  EXPECT_EQ(cap("GET", base + "/a%2Fb/c").body, "x");
  EXPECT_EQ(cap("DELETE", base + "/greeting").status, "204");
  EXPECT_EQ(cap("GET", base + "/greeting").status, "404");
  // Read-only: the ro capability refuses writes (positive control above).
  const std::string ro = "/v1/kv/" + handle("ZN_CAP_SEEN");
  Answer refused = cap("PUT", ro + "/k", "v");
  EXPECT_EQ(refused.status, "403");
  EXPECT_NE(refused.body.find("read_only"), std::string::npos) << refused.body;
  // The audit: capability, operation, sizes; never the value, key or handle.
  const std::string events = audit_events("resource:", {"\"op\":\"delete\"", "read_only"});
  EXPECT_NE(events.find("resource:write"), std::string::npos) << events;
  EXPECT_NE(events.find("resource:read"), std::string::npos) << events;
  EXPECT_NE(events.find("\"cap\":\"data\""), std::string::npos) << events;
  EXPECT_EQ(events.find(kSecretValue), std::string::npos) << events;
  EXPECT_EQ(events.find("greeting"), std::string::npos) << events;
  EXPECT_EQ(events.find(handle("ZN_CAP_DATA").substr(4)), std::string::npos) << events;
}

TEST_F(CapabilityTest, HostileRequestShapes) {
  const std::string h = handle("ZN_CAP_DATA");
  const std::string head = " HTTP/1.1\r\nHost: cap.zeroness.internal\r\n";
  // Pipelined on one connection: a chunked PUT, then a GET that reads it.
  std::string out = raw_tls("cap.zeroness.internal", "203.0.113.253",
                            "PUT /v1/kv/" + h + "/piped" + head +
                                "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                                "GET /v1/kv/" +
                                h + "/piped" + head + "Connection: close\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 204"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\n\r\nabcde"), std::string::npos) << out;
  // Another Host on the gateway's connection: 421, nothing served.
  out = raw_tls("cap.zeroness.internal", "203.0.113.253",
                "GET /v1/kv/" + h + "/piped HTTP/1.1\r\nHost: api.github.com\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 421"), std::string::npos) << out;
  EXPECT_EQ(out.find("abcde"), std::string::npos) << out;
  // The gateway's Host on another name's connection: domain fronting, 421.
  out = raw_tls("api.github.com", "198.18.0.10", "GET /v1/kv/" + h + "/piped" + head + "\r\n");
  EXPECT_NE(out.find("HTTP/1.1 421"), std::string::npos) << out;
  EXPECT_EQ(out.find("abcde"), std::string::npos) << out;
  // The gateway's SNI towards a real upstream's address: answered by zerod
  // all the same, and nothing reaches that upstream.
  const size_t logged = upstream_log().size();
  out = raw_tls("cap.zeroness.internal", "198.18.0.10",
                "GET /v1/kv/" + h + "/piped" + head + "Connection: close\r\n\r\n");
  EXPECT_NE(out.find("abcde"), std::string::npos) << out;
  EXPECT_EQ(upstream_log().size(), logged);
  // A body past the bound is refused before it is read.
  out = raw_tls("cap.zeroness.internal", "203.0.113.253",
                "PUT /v1/kv/" + h + "/big" + head + "Content-Length: 9000000\r\n\r\nxx");
  EXPECT_NE(out.find("HTTP/1.1 413"), std::string::npos) << out;
  // A malformed chunk: 400, and the key was not written.
  out =
      raw_tls("cap.zeroness.internal", "203.0.113.253",
              "PUT /v1/kv/" + h + "/bad" + head + "Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 400"), std::string::npos) << out;
  EXPECT_EQ(cap("GET", "/v1/kv/" + h + "/bad").status, "404");
  // An upgrade is refused here as everywhere.
  out = raw_tls("cap.zeroness.internal", "203.0.113.253",
                "GET /v1/kv/" + h + "/piped" + head + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  EXPECT_NE(out.find("HTTP/1.1 403"), std::string::npos) << out;
}

TEST_F(CapabilityTest, KvQuotaIsEnforced) {
  const std::string base = "/v1/kv/" + handle("ZN_CAP_DATA");
  EXPECT_EQ(cap("PUT", base + "/small", std::string(1000, 'a')).status, "204");
  Answer full = cap("PUT", base + "/big", std::string(4000, 'b'));
  EXPECT_EQ(full.status, "507");
  EXPECT_NE(full.body.find("quota_exceeded"), std::string::npos) << full.body;
  EXPECT_EQ(cap("GET", base + "/big").status, "404");
}

TEST_F(CapabilityTest, SqlReadOnlyIsReadOnly) {
  const std::string ledger = "/v1/sql/" + handle("ZN_CAP_LEDGER");
  Answer rows =
      cap("POST", ledger, R"j({"sql":"select who, amount from ledger where amount > ?","params":[6]})j");
  ASSERT_EQ(rows.status, "200") << rows.body;
  EXPECT_EQ(json::parse(rows.body)["rows"], json::parse(R"([{"who":"bob","amount":7}])")) << rows.body;
  ASSERT_EQ(ledger_rows(), "2\n");
  for (const char* write : {"insert into ledger(who, amount) values ('eve', 1)", "delete from ledger",
                            "with x(n) as (select 1) insert into ledger(who, amount) select 'eve', n from x",
                            "with x as (select 1) update ledger set amount = 0", "pragma writable_schema = 1",
                            "pragma journal_mode = delete", "attach database '/tmp/zn-cap-attach.db' as a",
                            "vacuum into '/tmp/zn-cap-vacuum.db'",
                            "create temp trigger t after insert on ledger begin select 1; end",
                            "select load_extension('/tmp/x.so')", "drop table ledger"}) {
    Answer r = cap("POST", ledger, json{{"sql", write}}.dump());
    EXPECT_TRUE(r.status == "403" || r.status == "400") << write << " -> " << r.status << " " << r.body;
  }
  EXPECT_EQ(ledger_rows(), "2\n");
  EXPECT_FALSE(fs::exists("/tmp/zn-cap-attach.db"));
  EXPECT_FALSE(fs::exists("/tmp/zn-cap-vacuum.db"));
  // A rw database takes writes (the refusals above are the mode's, not the route's).
  const std::string scratch = "/v1/sql/" + handle("ZN_CAP_SCRATCH");
  EXPECT_EQ(cap("POST", scratch, R"j({"sql":"create table t(x)"})j").status, "200");
  Answer ins = cap("POST", scratch, R"j({"sql":"insert into t values (?), (?)","params":[1,2]})j");
  EXPECT_EQ(ins.status, "200") << ins.body;
  EXPECT_EQ(json::parse(ins.body)["changes"], 2) << ins.body;
  // A statement that would run away is stopped by its budget.
  Answer slow = cap(
      "POST", scratch,
      R"j({"sql":"with recursive c(x) as (select 1 union all select x+1 from c) select count(*) from c"})j");
  EXPECT_EQ(slow.status, "422") << slow.body;
}

TEST_F(CapabilityTest, BlobsStayBeneathTheirDirectory) {
  const std::string reports = "/v1/blob/" + handle("ZN_CAP_REPORTS");
  Answer got = cap("GET", reports + "/2026/sales.csv");
  EXPECT_EQ(got.status, "200");
  EXPECT_EQ(got.body, kDataset);
  EXPECT_EQ(cap("PUT", reports + "/2026/new.csv", "x").status, "403");  // ro
  for (const std::string escape :
       {"/../outside.txt", "/%2e%2e/outside.txt", "/2026/..%2f..%2foutside.txt", "/escape.csv",
        "/%2Fetc%2Fpasswd", "//etc/passwd", "/2026/%2e%2e/%2e%2e/outside.txt"}) {
    Answer r = cap("GET", reports + escape);
    EXPECT_NE(r.status, "200") << escape;
    EXPECT_EQ(r.body.find("outside the store"), std::string::npos) << escape << ": " << r.body;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << escape;
  }
  // The rw store: a result written by the guest lands in the operator's directory.
  const std::string results = "/v1/blob/" + handle("ZN_CAP_RESULTS");
  EXPECT_EQ(cap("PUT", results + "/run-1/summary.txt", "north wins").status, "204");
  EXPECT_EQ(slurp(dir_ / "results" / "run-1" / "summary.txt"), "north wins");
  EXPECT_EQ(cap("PUT", results + "/../escaped.txt", "x").status, "400");
  EXPECT_FALSE(fs::exists(dir_ / "escaped.txt"));
  // Its quota.
  Answer big = cap("PUT", results + "/big.bin", std::string(9000, 'z'));
  EXPECT_EQ(big.status, "507") << big.body;
}

TEST_F(CapabilityTest, QueueSendReceiveAck) {
  const std::string q = "/v1/queue/" + handle("ZN_CAP_JOBS");
  EXPECT_EQ(cap("POST", q + "/receive").status, "204");
  Answer sent = cap("POST", q + "/send", "job-1");
  ASSERT_EQ(sent.status, "200") << sent.body;
  Answer got = cap("POST", q + "/receive");
  ASSERT_EQ(got.status, "200") << got.body;
  const json msg = json::parse(got.body);
  EXPECT_EQ(msg["body"], "job-1");
  EXPECT_EQ(msg["id"], json::parse(sent.body)["id"]);
  EXPECT_EQ(cap("POST", q + "/ack", json{{"receipt", msg["receipt"]}}.dump()).status, "204");
  EXPECT_EQ(cap("POST", q + "/ack", json{{"receipt", msg["receipt"]}}.dump()).status, "404");
}

TEST_F(CapabilityTest, HandlesCannotBeForgedOrBorrowed) {
  std::string theirs;
  ASSERT_NO_FATAL_FAILURE(second_tenant(theirs));
  const std::string mine = handle("ZN_CAP_DATA");
  ASSERT_EQ(cap("PUT", "/v1/kv/" + mine + "/k", "tenant-a").status, "204");
  ASSERT_EQ(cap("PUT", "/v1/kv/" + theirs + "/k", "tenant-b", 1).status, "204");
  // Positive controls: each tenant reads its own.
  EXPECT_EQ(cap("GET", "/v1/kv/" + mine + "/k").body, "tenant-a");
  EXPECT_EQ(cap("GET", "/v1/kv/" + theirs + "/k", "", 1).body, "tenant-b");

  const Answer missing = cap("GET", "/v1/kv/" + mine + "/nothing-here");
  ASSERT_EQ(missing.status, "404");
  std::string flipped = mine;
  flipped.back() = flipped.back() == 'a' ? 'b' : 'a';
  const std::vector<std::pair<std::string, size_t>> attempts = {
      {"/v1/kv/" + theirs + "/k", 0},                           // B's handle from A's guest
      {"/v1/kv/" + mine + "/k", 1},                             // A's handle from B's guest
      {"/v1/kv/" + mine.substr(0, mine.size() - 1) + "/k", 0},  // truncated
      {"/v1/kv/" + flipped + "/k", 0},                          // one character off
      {"/v1/kv/cap:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/k", 0},     // guessed
      {"/v1/kv/" + mine.substr(4) + "/k", 0},                   // without the prefix
      {"/v1/blob/" + mine + "/k", 0},                           // a KV handle on the blob route
      {"/v1/kv/" + handle("ZN_CAP_REPORTS") + "/k", 0},         // a blob handle on the KV route
      {"/v1/kv/", 0},                                           // listing
      {"/v1/caps", 0},
  };
  for (const auto& [path, g] : attempts) {
    const Answer a = cap("GET", path, "", g);
    EXPECT_EQ(a.status, missing.status) << path << " from g" << g;
    EXPECT_EQ(a.body, missing.body) << path << " from g" << g;
  }
  // Writes through a borrowed handle change nothing.
  EXPECT_EQ(cap("PUT", "/v1/kv/" + theirs + "/k", "overwritten").status, "404");
  EXPECT_EQ(cap("GET", "/v1/kv/" + theirs + "/k", "", 1).body, "tenant-b");
  const std::string denies = audit_events("resource:deny", {"unknown handle"});
  EXPECT_NE(denies.find("unknown handle"), std::string::npos) << denies;
  EXPECT_EQ(denies.find(theirs.substr(4)), std::string::npos) << denies;
  // Deleting a tenant erases its KV contents from the shared file (nobody
  // could reach them again); the other tenant's stay.
  ASSERT_EQ(kv_values(), "tenant-a\ntenant-b\n");
  ASSERT_TRUE(call("session.delete", {{"id", "user-2"}})["ok"]);
  EXPECT_EQ(kv_values(), "tenant-a\n");
}

TEST_F(CapabilityTest, RequestsCountAgainstTheSessionRate) {
  ASSERT_TRUE(
      call("session.update",
           {{"id", "user-1"}, {"policy", caps_policy(R"(,"rate":{"burst":3,"per_second":1})")}})["ok"]);
  const std::string base = "/v1/kv/" + handle("ZN_CAP_DATA");
  // One guest command, one connection: five requests back to back.
  const CommandResult burst =
      guest("for i in 1 2 3 4 5; do curl -s -m 5 -o /dev/null -w '%{http_code} ' --cacert " +
            p("guest-trust.pem") + " 'https://cap.zeroness.internal" + base + "/r'; done");
  EXPECT_NE(burst.output.find("429"), std::string::npos) << burst.output;
  EXPECT_NE(burst.output.find("404"), std::string::npos) << burst.output;  // the first ones passed
}

TEST_F(CapabilityTest, APolicyNamingAnUnknownStoreIsRefused) {
  json r =
      call("session.update",
           {{"id", "user-1"}, {"policy", R"({"policy":{},"caps":{"x":{"kind":"sql","db":"nowhere"}}})"}});
  ASSERT_FALSE(r["ok"]) << r.dump();
  EXPECT_NE(r.dump().find("$.caps.x.db"), std::string::npos) << r.dump();
  // The session kept its policy: its handles still work.
  EXPECT_EQ(cap("PUT", "/v1/kv/" + handle("ZN_CAP_DATA") + "/still", "here").status, "204");
}

// Issue 30: calls queue per store, a slow store holds only its own calls,
// and a capability removed by `session update` loses its queued and running
// calls. The SQL stores' budget is long so that slow calls outlast the
// steps between them on a loaded machine; the state of the queues is read
// from zerod's metrics (zn_capability_calls), never guessed by sleeping.
class CapabilityQueueTest : public CapabilityTest {
 protected:
  static constexpr int kSlowSeconds = 8;
  void configure(json& config) override {
    CapabilityTest::configure(config);
    for (const char* db : {"ledger", "scratch"})
      config["stores"]["sql"][db]["time_budget_ms"] = kSlowSeconds * 1000;
  }
  struct Calls {
    int queued = -1, running = -1;
  };
  Calls calls() {
    const std::string text =
        run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics").output;
    auto value = [&](const std::string& state) {
      const std::string line = "zn_capability_calls{state=\"" + state + "\"} ";
      const size_t at = text.find(line);
      return at == std::string::npos ? -1 : std::stoi(text.substr(at + line.size()));
    };
    return {value("queued"), value("running")};
  }
  // Waits until zerod's calls are exactly these (false after 20 s).
  bool calls_become(int queued, int running) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < until) {
      const Calls c = calls();
      if (c.queued == queued && c.running == running) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a state, not waiting for one
    }
    return false;
  }
  // A statement that runs until its budget stops it.
  std::future<Answer> slow_sql(const std::string& env) {
    return std::async(std::launch::async, [this, env] {
      return cap(
          "POST", "/v1/sql/" + handle(env),
          R"j({"sql":"with recursive c(x) as (select 1 union all select x+1 from c) select count(*) from c"})j",
          0, kSlowSeconds + 10);
    });
  }
  // Fills the session's share (3 calls running; the fourth waits): two slow
  // calls on each SQL store (each store's most).
  std::vector<std::future<Answer>> fill_the_share() {
    std::vector<std::future<Answer>> slow;
    for (const char* env : {"ZN_CAP_LEDGER", "ZN_CAP_LEDGER", "ZN_CAP_SCRATCH", "ZN_CAP_SCRATCH"})
      slow.push_back(slow_sql(env));
    return slow;
  }
  std::future<Answer> kv_put(const std::string& key, const std::string& value) {
    return std::async(std::launch::async, [this, key, value] {
      return cap("PUT", "/v1/kv/" + handle("ZN_CAP_DATA") + "/" + key, value, 0, kSlowSeconds + 10);
    });
  }
};

TEST_F(CapabilityQueueTest, ASlowStoreHoldsOnlyItsOwnCalls) {
  ASSERT_TRUE(calls_become(0, 0));
  std::vector<std::future<Answer>> slow;
  for (int i = 0; i < 3; ++i) slow.push_back(slow_sql("ZN_CAP_LEDGER"));
  // Two run (the store's most), the third waits in the store's own queue.
  ASSERT_TRUE(calls_become(1, 2)) << calls().queued << " " << calls().running;
  // Another store answers meanwhile.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cap("PUT", "/v1/kv/" + handle("ZN_CAP_DATA") + "/k", "meanwhile").status, "204");
  EXPECT_EQ(cap("GET", "/v1/kv/" + handle("ZN_CAP_DATA") + "/k").body, "meanwhile");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(kSlowSeconds / 2));
  EXPECT_EQ(slow[0].wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the slow calls ended first: the test proved nothing";
  for (auto& f : slow) EXPECT_EQ(f.get().status, "422");
}

TEST_F(CapabilityQueueTest, AQueuedWriteOfARemovedCapabilityNeverLands) {
  ASSERT_TRUE(calls_become(0, 0));
  std::vector<std::future<Answer>> slow = fill_the_share();
  ASSERT_TRUE(calls_become(1, 3)) << calls().queued << " " << calls().running;
  std::future<Answer> write = kv_put("k", "after-revocation");
  ASSERT_TRUE(calls_become(2, 3)) << calls().queued << " "
                                  << calls().running;  // the write waits for the session's share
  // The update drops the KV capability while its write is queued.
  std::string without = caps_policy();
  const std::string data = R"("data":{"kind":"kv","mode":"rw"},)";
  without.erase(without.find(data), data.size());
  json r = call("session.update", {{"id", "user-1"}, {"policy", without}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  const Answer refused = write.get();
  EXPECT_EQ(refused.status, "404") << refused.body;
  for (auto& f : slow) EXPECT_EQ(f.get().status, "422");
  EXPECT_EQ(kv_values(), "");  // no row stays
  const std::string events = audit_events("resource:deny", {"revoked"});
  EXPECT_NE(events.find("\"reason\":\"revoked\""), std::string::npos) << events;
}

// The positive control: the same queued write, no update, lands.
TEST_F(CapabilityQueueTest, AQueuedWriteOfAKeptCapabilityLands) {
  ASSERT_TRUE(calls_become(0, 0));
  std::vector<std::future<Answer>> slow = fill_the_share();
  ASSERT_TRUE(calls_become(1, 3)) << calls().queued << " " << calls().running;
  std::future<Answer> write = kv_put("k", "kept");
  ASSERT_TRUE(calls_become(2, 3)) << calls().queued << " " << calls().running;
  // An update that keeps the capability keeps its queued write.
  ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", caps_policy()}})["ok"]);
  EXPECT_EQ(write.get().status, "204");
  for (auto& f : slow) EXPECT_EQ(f.get().status, "422");
  EXPECT_EQ(kv_values(), "kept\n");
}

// Issue 32: a session whose calls all run to their budget holds only its
// share of the service's threads; another session's call starts at once,
// while the first session's own next call still waits (the control: the
// service is saturated for it).
TEST_F(CapabilityQueueTest, ASessionAtItsShareDoesNotDelayAnother) {
  std::string theirs;
  ASSERT_NO_FATAL_FAILURE(second_tenant(theirs));
  ASSERT_TRUE(calls_become(0, 0));
  std::vector<std::future<Answer>> slow = fill_the_share();
  ASSERT_TRUE(calls_become(1, 3)) << calls().queued << " " << calls().running;
  std::future<Answer> own = kv_put("k", "user-1");
  ASSERT_TRUE(calls_become(2, 3)) << calls().queued << " " << calls().running;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cap("PUT", "/v1/kv/" + theirs + "/k", "user-2", 1).status, "204");
  EXPECT_EQ(cap("GET", "/v1/kv/" + theirs + "/k", "", 1).body, "user-2");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(kSlowSeconds / 2));
  EXPECT_EQ(own.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "user-1's own call did not wait: the service was not saturated for it, the test proved nothing";
  // Stop the slow calls rather than wait for their budgets.
  ASSERT_TRUE(call("session.delete", {{"id", "user-1"}})["ok"]);
  for (auto& f : slow) f.get();
  EXPECT_NE(own.get().status, "204");
}

// A running SQL call of a removed capability is cancelled, and the update
// answers without waiting for its budget.
TEST_F(CapabilityQueueTest, ARunningCallOfARemovedCapabilityIsCancelled) {
  ASSERT_TRUE(calls_become(0, 0));
  std::future<Answer> running = slow_sql("ZN_CAP_LEDGER");
  ASSERT_TRUE(calls_become(0, 1));
  std::string without = caps_policy();
  const std::string ledger = R"("ledger":{"kind":"sql","db":"ledger"},)";
  without.erase(without.find(ledger), ledger.size());
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", without}})["ok"]);
  const Answer cancelled = running.get();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(kSlowSeconds / 2));
  EXPECT_EQ(cancelled.status, "403") << cancelled.body;
  EXPECT_NE(cancelled.body.find("revoked"), std::string::npos) << cancelled.body;
  // Positive control: the capability kept by the same update still answers.
  Answer ok = cap("POST", "/v1/sql/" + handle("ZN_CAP_SCRATCH"), R"j({"sql":"select 1 as one"})j");
  EXPECT_EQ(ok.status, "200") << ok.body;
}

// The gateway over HTTP/2 (issue 17): curl negotiates h2, each stream is
// served by the broker exactly as the HTTP/1.1 request would be.
class CapabilityHttp2Test : public CapabilityTest {
 protected:
  void configure(json& config) override {
    CapabilityTest::configure(config);
    config["proxy_http2"] = true;
  }
};

TEST_F(CapabilityHttp2Test, KvByHandleOverHttp2) {
  const std::string base = "/v1/kv/" + handle("ZN_CAP_DATA");
  expect_kv_round_trip(base);
  EXPECT_EQ(cap("GET", "/v1/kv/" + handle("ZN_CAP_DATA") + "x/greeting").status, "404");
  const CommandResult version =
      guest("curl -s -o /dev/null -w '%{http_version}' --cacert " + p("guest-trust.pem") +
            " 'https://cap.zeroness.internal" + base + "/greeting'");
  EXPECT_EQ(version.output, "2");
}

}  // namespace
}  // namespace zn::test
