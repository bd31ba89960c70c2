// The passthrough proxy inside zerod, with real TLS upstreams in the stand-in
// internet (openssl s_server with certificates of a lab CA) and real curl in
// the guest: allowed hosts spliced to the upstream the broker chose (the
// guest sees the upstream's own certificate), everything else reset.
#include "integration/zerod_fixture.h"

#include "broker/audit_store.h"

#include <signal.h>
#include <sys/wait.h>

namespace zn::test {
namespace {

class ProxyTest : public ZerodTest {
 protected:
  void SetUp() override {
    ZerodTest::SetUp();
    pki_ = dir_ / "pki";
    fs::create_directories(pki_);
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + p("ca.key") +
       " -out " + p("ca.pem") + " -days 2 -subj '/CN=zeroness lab upstream CA'");
    for (const char* host : {"registry.npmjs.org", "evil.example", "meta.npmjs.org"}) {
      const std::string h = host;
      sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + p(h + ".key") + " -out " +
         p(h + ".csr") + " -subj '/CN=" + h + "'");
      std::ofstream(pki_ / (h + ".ext")) << "subjectAltName=DNS:" << h << "\n";
      sh("openssl x509 -req -in " + p(h + ".csr") + " -CA " + p("ca.pem") + " -CAkey " + p("ca.key") +
         " -CAcreateserial -out " + p(h + ".pem") + " -days 2 -extfile " + p(h + ".ext"));
    }
    // The real registry, and an attacker's server with another name's certificate.
    serve("198.18.0.12:443", "registry.npmjs.org");
    serve("198.18.0.13:443", "evil.example");
    servers_.push_back(spawn_in_inet({"socat", "TCP-LISTEN:5432,bind=198.18.0.13,reuseaddr,fork", "EXEC:cat"}));
    // The servers are up when they accept (a loaded CI machine is slow).
    for (const char* target : {"198.18.0.12 443", "198.18.0.13 443", "198.18.0.13 5432"}) {
      bool up = false;
      for (int i = 0; i < 100 && !up; ++i) {
        up = run_in_netns(lab_->inet_netns(), std::string("nc -z -w 1 ") + target).exit_code == 0;
        if (!up) std::this_thread::sleep_for(100ms);
      }
      ASSERT_TRUE(up) << target << " never accepted";
    }
    create_session();
  }
  void TearDown() override {
    for (pid_t pid : servers_) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    ZerodTest::TearDown();
  }
  std::string p(const std::string& name) const { return (pki_ / name).string(); }
  static void sh(const std::string& cmd) { ASSERT_EQ(std::system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd; }
  pid_t spawn_in_inet(std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "netns", "exec", lab_->inet_netns()});
    pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execvp("ip", a.data());
      ::_exit(127);
    }
    return pid;
  }
  void serve(const std::string& at, const std::string& host) {
    servers_.push_back(spawn_in_inet({"openssl", "s_server", "-accept", at, "-cert", p(host + ".pem"), "-key",
                                      p(host + ".key"), "-www", "-quiet"}));
  }
  CommandResult curl(const std::string& args) { return guest("curl -s -m 5 --cacert " + p("ca.pem") + " " + args); }
  std::string egress_events() {
    // Read-only, as znctl reads it: zerod keeps writing meanwhile.
    broker::AuditStore store((dir_ / "state" / "audit.db").string(), broker::AuditStore::Mode::kReadOnly);
    std::string out;
    broker::AuditQuery q;
    q.event = "egress:";
    for (const auto& r : store.query(q)) out += r.event + " " + r.detail.dump() + "\n";
    return out;
  }

  fs::path pki_;
  std::vector<pid_t> servers_;
};

TEST_F(ProxyTest, AllowedHostIsSplicedToItsUpstreamWithItsOwnCertificate) {
  auto r = guest("curl -sv -m 5 --cacert " + p("ca.pem") + " https://registry.npmjs.org/ 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<HTML>"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("issuer: CN=zeroness lab upstream CA"), std::string::npos) << r.output;
  const std::string events = egress_events();
  EXPECT_NE(events.find("egress:allow {\"bytes_down\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"host\":\"registry.npmjs.org\""), std::string::npos) << events;
}

TEST_F(ProxyTest, SniOfAnAllowedHostSentToAnAttackersAddressReachesOnlyTheRealHost) {
  ASSERT_EQ(dig("registry.npmjs.org"), "198.18.0.12\n");
  // The guest connects to .13 (evil.example's server). Had the proxy gone
  // there, curl would have seen evil.example's certificate and failed.
  auto r = curl("--resolve registry.npmjs.org:443:198.18.0.13 https://registry.npmjs.org/");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("<HTML>"), std::string::npos);
}

TEST_F(ProxyTest, DeniedHostsRawIpsAndUnresolvedNamesAreReset) {
  EXPECT_NE(curl("--resolve evil.example:443:198.18.0.13 https://evil.example/").exit_code, 0);
  EXPECT_NE(guest("curl -sk -m 5 https://198.18.0.12/").exit_code, 0);  // no SNI
  // An allowed name the guest never resolved through us: not pinned.
  EXPECT_NE(curl("--resolve other.npmjs.org:443:198.18.0.12 https://other.npmjs.org/").exit_code, 0);
  // A rule with request conditions needs interception, not built yet: fail closed.
  EXPECT_NE(guest("curl -sk -m 5 https://api.github.com/").exit_code, 0);
  const std::string events = egress_events();
  EXPECT_NE(events.find("\"reason\":\"deny rule 0 (evil.example)\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"no SNI\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"name was not resolved through governed DNS\""), std::string::npos) << events;
  EXPECT_NE(events.find("\"reason\":\"rule needs TLS interception, which is not built yet\""), std::string::npos)
      << events;
  EXPECT_EQ(events.find("egress:allow"), std::string::npos) << events;
}

TEST_F(ProxyTest, NamesResolvingToMetadataOrPrivateAddressesAreRefused) {
  // DNS may be made to answer an internal address; the proxy still refuses it.
  EXPECT_EQ(dig("meta.npmjs.org"), "169.254.169.254\n");
  EXPECT_NE(curl("https://meta.npmjs.org/").exit_code, 0);
  EXPECT_NE(egress_events().find("\"reason\":\"no permitted upstream address\""), std::string::npos);
}

TEST_F(ProxyTest, L4RuleDestinationIsSplicedAndOtherPortsAreNot) {
  ASSERT_EQ(dig("db.internal"), "198.18.0.13\n");
  auto r = guest("echo ping-5432 | nc -w 2 -q 1 198.18.0.13 5432");
  EXPECT_EQ(r.output, "ping-5432\n") << r.output;
  EXPECT_NE(guest("echo x | nc -w 2 -q 1 198.18.0.13 5433").output, "x\n");
}

TEST_F(ProxyTest, AnIdleRelayedConnectionIsClosed) {
  ASSERT_EQ(dig("db.internal"), "198.18.0.13\n");
  // One line echoed, then silence: zerod (idle timeout 2 s here) closes it.
  auto r = guest("bash -c 's=$(date +%s); nc 198.18.0.13 5432 < <(echo hi; sleep 9); e=$(date +%s); echo $((e - s))'");
  EXPECT_EQ(r.output.substr(0, 3), "hi\n") << r.output;
  const int seconds = std::atoi(r.output.substr(3).c_str());
  EXPECT_GE(seconds, 2) << r.output;
  EXPECT_LE(seconds, 5) << r.output;
  EXPECT_NE(egress_events().find("\"end\":\"idle timeout\""), std::string::npos);
}

TEST_F(ProxyTest, ASlowClientIsTimedOut) {
  // Connects to 443 and sends nothing: the proxy gives up after its hello
  // deadline (5 s) and resets; curl would wait 8 s.
  auto r = guest("bash -c 's=$(date +%s); nc 198.18.0.12 443 < <(sleep 9); e=$(date +%s); echo $((e - s))'");
  const int seconds = std::atoi(r.output.c_str());
  EXPECT_GE(seconds, 4) << r.output;  // the connection was accepted and held ...
  EXPECT_LE(seconds, 7) << r.output;  // ... then reset at the hello deadline
}

}  // namespace
}  // namespace zn::test
