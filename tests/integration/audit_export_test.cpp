// Audit export through zerod as a real process (issue 16): a file sink in
// its config gets every crossing, sealed under zerod's audit key, and
// `znctl audit verify` proves it against the chain head, while an edited or
// cut copy fails; a restart resumes the export without a gap.
#include <sys/wait.h>

#include <fstream>

#include "zerod_fixture.h"

namespace zn::test {
namespace {

class AuditExportTest : public ZerodTest {
 protected:
  void configure(json& config) override {
    config["audit_host"] = "lab-host";
    config["audit_sinks"] = {{{"name", "local"},
                              {"type", "file"},
                              {"path", (dir_ / "export/audit.jsonl").string()},
                              {"batch_max", 2}},
                             {{"name", "dns-only"},
                              {"type", "file"},
                              {"format", "ocsf"},
                              {"events", {"dns:"}},
                              {"path", (dir_ / "export/dns.jsonl").string()}}};
  }

  CommandResult znctl(const std::string& args) {
    const std::string cmd = std::string(ZN_ZNCTL_BIN) + " -j --socket " + socket_ + " --state-dir " +
                            (dir_ / "state").string() + " " + args + " 2>&1";
    CommandResult r;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  // Waits until every sink has caught up with the chain head.
  void wait_exported() {
    const uint64_t head = json::parse(znctl("audit head").output)["seq"].get<uint64_t>();
    for (int i = 0; i < 100; ++i) {
      const json sinks = call("audit.sinks")["result"];
      bool done = true;
      for (const json& s : sinks)
        if (s["backlog"].get<uint64_t>() != 0 || s["consumed_seq"].get<uint64_t>() < head) done = false;
      if (done) return;
      std::this_thread::sleep_for(100ms);
    }
    FAIL() << "the sinks did not catch up: " << call("audit.sinks").dump();
  }

  std::vector<std::string> lines(const fs::path& p) {
    std::vector<std::string> out;
    std::ifstream in(p);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
  void write_lines(const fs::path& p, const std::vector<std::string>& ls) {
    std::ofstream out(p);
    for (const std::string& l : ls) out << l << "\n";
  }
};

TEST_F(AuditExportTest, EveryCrossingIsExportedSealedAndVerifiesAgainstTheHead) {
  create_session();
  dig("api.github.com");
  dig("evil.example");
  dig("api.stripe.com");
  dig("registry.npmjs.org");  // five records at least: three batches of at most two
  // A DNS answer is audited after the guest has it: the anchor is taken once
  // all five are committed. Taken earlier, a record committed after it
  // would be exported after it, and a copy cut before its last seal could
  // still reach the anchor (seen under load).
  json head = json::parse(znctl("audit head").output);
  for (int i = 0; i < 100 && head["seq"].get<uint64_t>() < 5; ++i) {
    std::this_thread::sleep_for(100ms);
    head = json::parse(znctl("audit head").output);
  }
  ASSERT_GE(head["seq"].get<uint64_t>(), 5u) << head.dump();
  const std::string anchor = head["anchor"];
  wait_exported();
  const fs::path file = dir_ / "export/audit.jsonl";
  auto ok = znctl("audit verify " + file.string() + " --anchor " + anchor + " --host lab-host");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  const json v = json::parse(ok.output);
  EXPECT_GE(v["records"].get<uint64_t>(), 3u);  // session:create, dns:allow, dns:deny
  // The store agrees with the same anchor.
  EXPECT_EQ(znctl("audit verify --anchor " + anchor).exit_code, 0);

  // An edited copy fails; so does one cut before its last seal, against the anchor.
  auto all = lines(file);
  ASSERT_GE(all.size(), 4u);
  auto edited = all;
  for (std::string& l : edited) {
    const size_t at = l.find("evil.example");
    if (at != std::string::npos && l.rfind(R"({"zn":"audit",)", 0) == 0) {
      l.replace(at, 4, "good");
      break;
    }
  }
  ASSERT_NE(edited, all);
  write_lines(dir_ / "edited.jsonl", edited);
  auto bad = znctl("audit verify " + (dir_ / "edited.jsonl").string());
  EXPECT_EQ(bad.exit_code, 3) << bad.output;
  auto cut = all;
  cut.pop_back();
  while (!cut.empty() && cut.back().rfind(R"({"zn":"audit-seal")", 0) != 0) cut.pop_back();
  ASSERT_FALSE(cut.empty());
  write_lines(dir_ / "cut.jsonl", cut);
  EXPECT_EQ(znctl("audit verify " + (dir_ / "cut.jsonl").string()).exit_code, 0);  // verifies alone...
  auto truncated = znctl("audit verify " + (dir_ / "cut.jsonl").string() + " --anchor " + anchor);
  EXPECT_EQ(truncated.exit_code, 3) << truncated.output;  // ...not against the head
  EXPECT_NE(truncated.output.find("truncated"), std::string::npos) << truncated.output;

  // The filtered OCSF sink holds the DNS records only, and verifies too.
  const auto dns = lines(dir_ / "export/dns.jsonl");
  size_t records = 0;
  for (const std::string& l : dns) {
    if (l.rfind(R"({"zn":"audit-seal")", 0) == 0) continue;
    const json j = json::parse(l);
    EXPECT_EQ(j["class_uid"], 4003) << l;
    ++records;
  }
  EXPECT_GE(records, 2u);  // dns:allow and dns:deny at least
  // (No anchor: a filtered sink seals only when it has records or after idle_seal_ms.)
  auto ocsf = znctl("audit verify " + (dir_ / "export/dns.jsonl").string());
  EXPECT_EQ(ocsf.exit_code, 0) << ocsf.output;
}

TEST_F(AuditExportTest, ARestartResumesTheExportWithoutAGap) {
  create_session();
  dig("api.github.com");
  wait_exported();
  stop_zerod(SIGKILL);
  start_zerod();
  dig("evil.example");
  dig("api.stripe.com");
  wait_exported();
  const std::string anchor = json::parse(znctl("audit head").output)["anchor"];
  auto r = znctl("audit verify " + (dir_ / "export/audit.jsonl").string() + " --anchor " + anchor);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The metrics show the sinks.
  auto m = run_in_netns(lab_->host_netns(), "curl -s -m 3 http://127.0.0.1:19464/metrics");
  EXPECT_NE(m.output.find("zn_audit_export_up{sink=\"local\"} 1"), std::string::npos) << m.output;
  EXPECT_NE(m.output.find("zn_audit_export_dropped_records_total{sink=\"local\"} 0"), std::string::npos);
}

TEST_F(AuditExportTest, TheAuditKeyIsPublicAndAnotherKeyDoesNotVerify) {
  create_session();
  wait_exported();
  const json key = json::parse(znctl("audit key").output);
  ASSERT_EQ(key["public_key"].get<std::string>().size(), 64u);
  const std::string file = (dir_ / "export/audit.jsonl").string();
  EXPECT_EQ(znctl("audit verify " + file + " --key " + key["public_key"].get<std::string>()).exit_code, 0);
  auto other = znctl("audit verify " + file + " --key " + std::string(64, 'a'));
  EXPECT_EQ(other.exit_code, 3) << other.output;
  // Bad input is a usage error that says what is wrong (not "stol").
  for (const char* bad : {"audit query --since -m", "audit query --since -5x", "audit verify --anchor 12",
                          "audit verify "
                          "/nonexistent --nats nats://127.0.0.1:1 --host h"}) {
    auto r = znctl(bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_EQ(r.output.find("stol"), std::string::npos) << r.output;
  }
  EXPECT_EQ(znctl("audit query --since -10m").exit_code, 0);  // positive control
  // The key file is zerod's alone.
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "audit-ed25519.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
}

// A NATS JetStream sink: nats-server runs in the lab's host namespace (where
// zerod runs), started and killed by the test.
class AuditNatsExportTest : public AuditExportTest {
 protected:
  void configure(json& config) override {
    nats_dir_ = dir_ / "nats";
    fs::create_directories(nats_dir_);
    start_nats();
    config["audit_host"] = "lab-host";
    config["audit_sinks"] = {{{"name", "bus"},
                              {"type", "nats"},
                              {"url", "nats://127.0.0.1:4222"},
                              {"timeout_ms", 1000},
                              {"backoff_initial_ms", 100},
                              {"backoff_max_ms", 500}}};
  }
  void TearDown() override {
    stop_nats();
    AuditExportTest::TearDown();
  }
  void start_nats() {
    nats_pid_ = ::fork();
    ASSERT_GE(nats_pid_, 0);
    if (nats_pid_ == 0) {
      const std::string log = (nats_dir_ / "nats.log").string();
      FILE* out = std::fopen(log.c_str(), "a");
      ::dup2(fileno(out), 1);
      ::dup2(fileno(out), 2);
      ::execlp("ip", "ip", "netns", "exec", lab_->host_netns().c_str(), "/usr/sbin/nats-server", "-js", "-a",
               "127.0.0.1", "-p", "4222", "-sd", (nats_dir_ / "store").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      if (run_in_netns(lab_->host_netns(), "nc -z -w 1 127.0.0.1 4222").exit_code == 0) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "nats-server did not come up: " << slurp(nats_dir_ / "nats.log");
  }
  void stop_nats() {
    if (nats_pid_ <= 0) return;
    ::kill(nats_pid_, SIGKILL);
    int status;
    ::waitpid(nats_pid_, &status, 0);
    nats_pid_ = -1;
  }
  CommandResult verify_nats(const std::string& anchor) {
    const std::string cmd = std::string(ZN_ZNCTL_BIN) + " -j --socket " + socket_ +
                            " audit verify --nats nats://127.0.0.1:4222 --host lab-host --anchor " + anchor;
    return run_in_netns(lab_->host_netns(), cmd);
  }

  fs::path nats_dir_;
  pid_t nats_pid_ = -1;
};

TEST_F(AuditNatsExportTest, TheBusGetsEverythingAndAKilledServerLosesNothingThatFitInTheSpool) {
  create_session();
  dig("api.github.com");
  wait_exported();
  std::string anchor = json::parse(znctl("audit head").output)["anchor"];
  auto before = verify_nats(anchor);
  ASSERT_EQ(before.exit_code, 0) << before.output;
  const uint64_t records_before = json::parse(before.output)["records"];

  // The bus goes down mid-stream: enforcement goes on, the records wait in the store.
  stop_nats();
  dig("evil.example");
  dig("api.stripe.com");
  EXPECT_NE(dig("api.stripe.com"), "");  // DNS still answered while the sink is down
  for (int i = 0; i < 50 && call("audit.sinks")["result"][0]["up"].get<bool>(); ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(call("audit.sinks")["result"][0]["up"].get<bool>());
  EXPECT_GT(call("audit.sinks")["result"][0]["backlog"].get<uint64_t>(), 0u);

  start_nats();
  wait_exported();
  anchor = json::parse(znctl("audit head").output)["anchor"];
  auto after = verify_nats(anchor);
  ASSERT_EQ(after.exit_code, 0) << after.output;
  const json v = json::parse(after.output);
  EXPECT_GE(v["records"].get<uint64_t>(), records_before + 3);
  EXPECT_TRUE(v["dropped"].empty()) << after.output;
  EXPECT_EQ(call("audit.sinks")["result"][0]["dropped_records"], 0);
}

}  // namespace
}  // namespace zn::test
