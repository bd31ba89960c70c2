// Approvals with a human in the loop, end to end: a real zerod, a lab guest
// running curl, operators' commands through znctl and the control socket.
// A held request approved with a standing grant (--for): a second matching
// request passes without a hold, another path is held, a revoke stops the
// grant at once, and after a grant expires a request is held again. Each
// held request reaches a webhook receiver (python3 http.server in zerod's
// namespace) signed so that the test, as a receiver, verifies both the HMAC
// and the Ed25519 signature over the bytes it got; `approval watch` streams
// the tickets and decisions.
#include <sodium.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <regex>
#include <set>

#include "integration/proxy_fixture.h"

namespace zn::test {
namespace {

constexpr int kWebhookPort = 19465;

// Writes each POST as a JSON line: its headers and its body as hex (exact bytes).
constexpr const char* kReceiver = R"(import http.server, json, sys
out = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        rec = {'headers': {k.lower(): v for k, v in self.headers.items()}, 'body': body.hex()}
        with open(out, 'a') as f:
            f.write(json.dumps(rec) + '\n')
        self.send_response(200)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
)";

std::string from_hex(const std::string& hex) {
  std::string out(hex.size() / 2, '\0');
  size_t len = 0;
  sodium_hex2bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), hex.data(), hex.size(), nullptr,
                 &len, nullptr);
  out.resize(len);
  return out;
}

class ApprovalTest : public ProxyTest {
 protected:
  void configure(json& config) override {
    ProxyTest::configure(config);
    // The shared HMAC key: 32 random bytes, 0600.
    std::string key(32, '\0');
    randombytes_buf(key.data(), key.size());
    std::ofstream(dir_ / "webhook.key", std::ios::binary) << key;
    ::chmod((dir_ / "webhook.key").c_str(), 0600);
    hmac_key_ = key;
    std::ofstream(dir_ / "receiver.py") << kReceiver;
    // In zerod's namespace (the lab's host side), on its loopback.
    servers_.push_back(
        spawn_in(lab_->host_netns(), {"python3", (dir_ / "receiver.py").string(),
                                      std::to_string(kWebhookPort), (dir_ / "webhook.log").string()}));
    config["approval_webhook"] = {{"url", "http://127.0.0.1:" + std::to_string(kWebhookPort) + "/hook"},
                                  {"hmac_key_file", (dir_ / "webhook.key").string()},
                                  {"signing", "ed25519"}};
    config["approval_grant_max_s"] = 3600;
  }
  void SetUp() override {
    ProxyTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string p2 =
        policy(R"({"host":"api.github.com","methods":["DELETE"],"paths":["/repos/**"],"action":"ask"},)");
    ASSERT_TRUE(call("session.update", {{"id", "user-1"}, {"policy", p2}})["ok"]);
  }
  // The ticket of the request held for `path` (0 if none within 5 s).
  uint64_t held(const std::string& path) {
    for (int i = 0; i < 50; ++i) {
      json r = call("approval.list");
      for (const auto& h : r["result"])
        if (h["path"] == path) return h["ticket"].get<uint64_t>();
      std::this_thread::sleep_for(100ms);
    }
    return 0;
  }
  std::future<std::string> fetch_async(const std::string& path) {
    return std::async(std::launch::async, [this, path] {
      return curl("-w '\\n%{http_code}' -m 15 -X DELETE -d 'token=" + std::string(kSecret) +
                  "' https://api.github.com" + path)
          .output;
    });
  }
  static std::string status_of(const std::string& out) {
    return out.substr(out.size() >= 3 ? out.size() - 3 : 0);
  }
  // znctl's answer (-j) to `args`.
  json znctl(const std::string& args) {
    FILE* z =
        ::popen((std::string(ZN_ZNCTL_BIN) + " -j --socket " + socket_ + " " + args + " 2>&1").c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, z)) > 0) out.append(buf, n);
    ::pclose(z);
    try {
      return json::parse(out);
    } catch (const json::exception&) {
      ADD_FAILURE() << "znctl " << args << ": " << out;
      return json();
    }
  }
  std::string hmac_key_;
};

TEST_F(ApprovalTest, AGrantPassesMatchingRequestsUntilRevokedOrExpired) {
  // An operator watching (stopped and joined however the test ends: a
  // heartbeat every 500 ms lets it see stop_watch).
  std::atomic<bool> stop_watch{false};
  std::mutex watch_mu;
  std::vector<json> watched;
  struct Joined {
    std::atomic<bool>& stop;
    std::thread thread;
    ~Joined() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } watcher{stop_watch, std::thread([&] {
              broker::control_stream(socket_, "approval.watch", json::object(), [&](const json& line) {
                if (!line.contains("heartbeat") && !line.contains("ok")) {
                  std::lock_guard lock(watch_mu);
                  watched.push_back(line);
                }
                return !stop_watch;
              });
            })};

  // Held; approved with a grant for this request's shape (znctl, as an operator types it).
  auto first = fetch_async("/repos/a/b");
  const uint64_t t1 = held("/repos/a/b");
  ASSERT_NE(t1, 0u);
  const json listed = call("approval.list")["result"][0];
  // What the operator is shown: the header names (never values) and the
  // body's first bytes, the session's secret redacted.
  ASSERT_TRUE(listed["header_names"].is_array()) << listed.dump();
  const std::vector<std::string> names = listed["header_names"];
  for (const char* n : {"host", "user-agent", "content-type", "content-length"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n << ": " << listed.dump();
  EXPECT_EQ(listed["body_preview"], "token=<redacted>") << listed.dump();
  EXPECT_EQ(listed.dump().find(kSecret), std::string::npos);
  EXPECT_EQ(upstream_log(), "");
  json allowed = znctl("approval allow " + std::to_string(t1) + " --for 30m");
  ASSERT_TRUE(allowed.contains("grant")) << allowed.dump();
  const uint64_t g1 = allowed["grant"]["id"].get<uint64_t>();
  EXPECT_EQ(status_of(first.get()), "200");
  // The same request again: through at once, never listed.
  EXPECT_EQ(status_of(fetch_async("/repos/a/b").get()), "200");
  EXPECT_TRUE(call("approval.list")["result"].empty());
  // Another path: held.
  auto other = fetch_async("/repos/a/other");
  const uint64_t t2 = held("/repos/a/other");
  ASSERT_NE(t2, 0u);
  EXPECT_TRUE(call("approval.deny", {{"ticket", t2}})["ok"]);
  EXPECT_EQ(other.get(), "zeroness: blocked by policy (denied by operator)\n\n403");
  // Listed, then revoked: the next matching request is held again.
  const json grants = znctl("approval grants");
  ASSERT_EQ(grants.size(), 1u) << grants.dump();
  EXPECT_EQ(grants[0]["id"], g1);
  EXPECT_EQ(grants[0]["path"], "/repos/a/b");
  EXPECT_EQ(grants[0]["uid"], 0);
  EXPECT_EQ(znctl("approval revoke " + std::to_string(g1))["revoked"], g1);
  EXPECT_TRUE(call("approval.grants")["result"].empty());
  auto after_revoke = fetch_async("/repos/a/b");
  const uint64_t t3 = held("/repos/a/b");
  ASSERT_NE(t3, 0u);
  // A grant's bounds: never 0, never over the configured maximum, a pattern must cover the path.
  EXPECT_FALSE(call("approval.allow", {{"ticket", t3}, {"for_s", 0}})["ok"]);
  const json too_long = call("approval.allow", {{"ticket", t3}, {"for_s", 3601}});
  EXPECT_NE(too_long.dump().find("at most 3600s"), std::string::npos) << too_long.dump();
  EXPECT_FALSE(call("approval.allow", {{"ticket", t3}, {"for_s", 3}, {"path", "/orgs/**"}})["ok"]);
  // Approved with a short grant for any path under /repos/a.
  const json short_grant = call("approval.allow", {{"ticket", t3}, {"for_s", 3}, {"path", "/repos/a/**"}});
  ASSERT_TRUE(short_grant["ok"]) << short_grant.dump();
  EXPECT_EQ(status_of(after_revoke.get()), "200");
  EXPECT_EQ(status_of(fetch_async("/repos/a/c").get()), "200");
  // Expired (reported by the sweep within a second): held again.
  bool expired = false;
  for (int i = 0; i < 80 && !expired; ++i) {
    expired = call("approval.grants")["result"].empty();
    if (!expired) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(expired);
  auto after_expiry = fetch_async("/repos/a/c");
  const uint64_t t4 = held("/repos/a/c");
  ASSERT_NE(t4, 0u);
  EXPECT_TRUE(call("approval.deny", {{"ticket", t4}})["ok"]);
  EXPECT_EQ(status_of(after_expiry.get()), "403");
  EXPECT_EQ(count(upstream_log(), "\"method\": \"DELETE\""), 4u);

  // The audit: who decided, by grant or by operator, each grant's life.
  const std::string egress = audit_events("egress:", {"\"by\":\"grant\"", "egress:denied"});
  EXPECT_EQ(count(egress, "\"by\":\"grant\""), 2u) << egress;
  EXPECT_EQ(count(egress, "egress:denied"), 2u) << egress;
  EXPECT_NE(egress.find("\"grant\":" + std::to_string(g1)), std::string::npos) << egress;
  EXPECT_NE(egress.find("\"uid\":0"), std::string::npos) << egress;
  const std::string grant_events =
      audit_events("grant:", {"grant:created", "grant:revoked", "grant:expired"});
  EXPECT_EQ(count(grant_events, "grant:created"), 2u) << grant_events;
  EXPECT_EQ(count(grant_events, "grant:revoked"), 1u) << grant_events;
  EXPECT_EQ(count(grant_events, "grant:expired"), 1u) << grant_events;
  EXPECT_EQ((egress + grant_events).find(kSecret), std::string::npos);

  // The watcher saw the first ticket held and approved, by uid 0.
  stop_watch = true;
  watcher.thread.join();
  bool saw_held = false, saw_approved = false;
  for (const json& w : watched) {
    if (w.value("ticket", uint64_t{0}) != t1) continue;
    saw_held = saw_held || w["event"] == "held" || w["event"] == "pending";
    saw_approved = saw_approved || (w["event"] == "approved" && w["uid"] == 0);
  }
  EXPECT_TRUE(saw_held);
  EXPECT_TRUE(saw_approved);

  // Every held request reached the webhook, signed: verified as a receiver would.
  const json key = call("approval.webhook_key")["result"];
  ASSERT_EQ(key["algorithm"], "ed25519") << key.dump();
  const std::string pk = from_hex(key["public_key_hex"].get<std::string>());
  ASSERT_EQ(pk.size(), crypto_sign_PUBLICKEYBYTES);
  std::vector<json> posts;
  for (int i = 0; i < 100 && posts.size() < 4; ++i) {
    posts.clear();
    std::istringstream lines(slurp(dir_ / "webhook.log"));
    for (std::string line; std::getline(lines, line);) posts.push_back(json::parse(line));
    if (posts.size() < 4) std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(posts.size(), 4u);  // t1..t4
  std::set<uint64_t> tickets;
  for (const json& post : posts) {
    const std::string body = from_hex(post["body"].get<std::string>());
    const std::string header = post["headers"].value("x-zeroness-signature", "");
    const std::regex form("^t=([0-9]+),v1=([0-9a-f]{64}),ed25519=([0-9a-f]{128})$");
    std::smatch m;
    ASSERT_TRUE(std::regex_match(header, m, form)) << header;
    const std::string message = m[1].str() + "." + body;
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, reinterpret_cast<const unsigned char*>(hmac_key_.data()),
                                hmac_key_.size());
    crypto_auth_hmacsha256_update(&st, reinterpret_cast<const unsigned char*>(message.data()),
                                  message.size());
    crypto_auth_hmacsha256_final(&st, mac);
    EXPECT_EQ(from_hex(m[2].str()), std::string(reinterpret_cast<char*>(mac), sizeof mac));
    const std::string sig = from_hex(m[3].str());
    EXPECT_EQ(crypto_sign_verify_detached(reinterpret_cast<const unsigned char*>(sig.data()),
                                          reinterpret_cast<const unsigned char*>(message.data()),
                                          message.size(), reinterpret_cast<const unsigned char*>(pk.data())),
              0);
    const json notice = json::parse(body);
    EXPECT_EQ(notice["event"], "held");
    EXPECT_EQ(notice["session"], "user-1");
    EXPECT_EQ(notice["method"], "DELETE");
    EXPECT_TRUE(notice["header_names"].is_array());
    EXPECT_EQ(body.find(kSecret), std::string::npos);
    tickets.insert(notice["ticket"].get<uint64_t>());
  }
  EXPECT_EQ(tickets, (std::set<uint64_t>{t1, t2, t3, t4}));
}

// approval_held_per_session from zerod's config: past it the session's next
// ask is 429 at once, and a decision frees its place.
class ApprovalHeldShareTest : public ApprovalTest {
 protected:
  void configure(json& config) override {
    ApprovalTest::configure(config);
    config["approval_held_per_session"] = 2;
    // Held until the test decides: none expires under a slow CI run.
    config["approval_timeout_ms"] = 60000;
  }
};

TEST_F(ApprovalHeldShareTest, PastTheConfiguredShareAnAskIsRefusedAtOnce) {
  auto first = fetch_async("/repos/a/1");
  auto second = fetch_async("/repos/a/2");
  const uint64_t t1 = held("/repos/a/1");
  ASSERT_NE(t1, 0u);
  ASSERT_NE(held("/repos/a/2"), 0u);
  const auto start = std::chrono::steady_clock::now();
  const std::string third = fetch_async("/repos/a/3").get();
  EXPECT_EQ(status_of(third), "429") << third;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);  // not held until the timeout
  // Positive control: one decided, the next ask is held again.
  ASSERT_TRUE(call("approval.deny", {{"ticket", t1}})["ok"]);
  EXPECT_EQ(status_of(first.get()), "403");
  auto fourth = fetch_async("/repos/a/4");
  EXPECT_NE(held("/repos/a/4"), 0u);
  const json listed = call("approval.list");
  for (const auto& h : listed["result"]) ASSERT_TRUE(call("approval.deny", {{"ticket", h["ticket"]}})["ok"]);
  EXPECT_EQ(status_of(second.get()), "403");
  EXPECT_EQ(status_of(fourth.get()), "403");
}

}  // namespace
}  // namespace zn::test
