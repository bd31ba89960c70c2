// zerod with its proxy in a lab whose stand-in internet has real upstreams:
// certificates of a lab CA (zerod is told to trust it), echo servers that
// answer with what they received (tests/support/echo_upstream.py, logging
// every request in full) and openssl s_server for passthrough hosts.
//   198.18.0.10 api.github.com   echo, TLS 443 and plain 80
//   198.18.0.11 api.stripe.com   echo, TLS 443 and plain 80
//   198.18.0.12 registry.npmjs.org  s_server 443 (passthrough), echo plain 80
//   198.18.0.13 evil.example     s_server 443; socat echo on 5432
#pragma once

#include <openssl/sha.h>
#include <sodium.h>
#include <signal.h>
#include <sys/wait.h>

#include "broker/audit/store.h"
#include "integration/zerod_fixture.h"

namespace zn::test {

// How often `needle` occurs in `haystack` (non-overlapping).
// Lower-case hex SHA-256, as the echo upstream reports a credential.
inline std::string sha256_hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return hex;
}

inline size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size()))
    ++n;
  return n;
}

class ProxyTest : public ZerodTest {
 protected:
  void configure(json& config) override {
    pki_ = dir_ / "pki";
    fs::create_directories(pki_);
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + p("ca.key") +
       " -out " + p("ca.pem") + " -days 2 -subj '/CN=zeroness lab upstream CA'");
    for (const char* host : {"registry.npmjs.org", "evil.example", "api.github.com", "api.stripe.com"})
      issue_upstream_cert(host);
    config["upstream_ca_bundle"] = p("ca.pem");
    // The passthrough tests run the kernel relay (off by default); the
    // other fixtures' passthrough and L4 connections cover splice(2).
    config["proxy_kernel_splice"] = true;
    // The intercept tests speak HTTP/1.1 (curl's h2 is Http2Test's).
    config["proxy_http2"] = false;
  }

  void SetUp() override {
    ZerodTest::SetUp();
    if (HasFatalFailure()) return;
    // The guest trusts the lab CA (passthrough hosts show their own
    // certificates) and the deployment CA (intercepted hosts).
    std::ofstream(pki_ / "guest-trust.pem")
        << slurp(pki_ / "ca.pem") << slurp(dir_ / "state" / "ca" / "ca.pem");
    // The real registry, and an attacker's server with another name's certificate.
    serve("198.18.0.12:443", "registry.npmjs.org");
    serve("198.18.0.13:443", "evil.example");
    echo("198.18.0.10", 443, "api.github.com");
    echo("198.18.0.11", 443, "api.stripe.com");
    echo("198.18.0.10", 80, "");
    echo("198.18.0.11", 80, "");
    echo("198.18.0.12", 80, "");
    servers_.push_back(
        spawn_in_inet({"socat", "TCP-LISTEN:5432,bind=198.18.0.13,reuseaddr,fork", "EXEC:cat"}));
    for (const char* target : {"198.18.0.10 443", "198.18.0.11 443", "198.18.0.10 80", "198.18.0.11 80",
                               "198.18.0.12 80", "198.18.0.12 443", "198.18.0.13 443", "198.18.0.13 5432"})
      ASSERT_TRUE(inet_accepts(target)) << target << " never accepted";
    create_session();
  }
  // A certificate for `host` from the lab's upstream CA (pki_/HOST.pem,
  // HOST.key), for a server of the stand-in internet.
  void issue_upstream_cert(const std::string& h) {
    sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + p(h + ".key") + " -out " +
       p(h + ".csr") + " -subj '/CN=" + h + "'");
    std::ofstream(pki_ / (h + ".ext")) << "subjectAltName=DNS:" << h << "\n";
    sh("openssl x509 -req -in " + p(h + ".csr") + " -CA " + p("ca.pem") + " -CAkey " + p("ca.key") +
       " -CAcreateserial -out " + p(h + ".pem") + " -days 2 -extfile " + p(h + ".ext"));
  }
  // Whether a server of the stand-in internet accepts on "ADDRESS PORT",
  // waited for up to 10 s (servers are up when they accept; a loaded CI
  // machine is slow).
  bool inet_accepts(const std::string& target) {
    for (int i = 0; i < 100; ++i) {
      if (run_in_netns(lab_->inet_netns(), "nc -z -w 1 " + target).exit_code == 0) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  // nginx in the stand-in internet with `http_blocks` (server blocks and
  // anything else of the http context), its files under pki_/NAME; stopped
  // at TearDown. Up when `accepts` ("ADDRESS PORT") accepts.
  void start_nginx(const std::string& name, const std::string& http_blocks, const std::string& accepts) {
    const fs::path n = pki_ / name;
    fs::create_directories(n / "tmp");
    const std::string tmp = (n / "tmp").string();
    std::ofstream(n / "nginx.conf")
        << "user root;\nworker_processes 1;\ndaemon off;\npid " << (n / "nginx.pid").string()
        << ";\nerror_log " << (n / "error.log").string()
        << " warn;\nevents { worker_connections 256; }\nhttp {\n  access_log off;\n"
        << "  client_body_temp_path " << tmp << ";\n  proxy_temp_path " << tmp << ";\n  fastcgi_temp_path "
        << tmp << ";\n  uwsgi_temp_path " << tmp << ";\n  scgi_temp_path " << tmp << ";\n"
        << http_blocks << "}\n";
    const std::vector<std::string> argv = {
        "nginx", "-e", (n / "error.log").string(), "-c", (n / "nginx.conf").string(), "-p", n.string()};
    std::string check = "nginx -t -q";
    for (size_t i = 1; i < argv.size(); ++i) check += " " + argv[i];
    ASSERT_EQ(run_in_netns(lab_->inet_netns(), check).exit_code, 0) << slurp(n / "error.log");
    servers_.push_back(spawn_in_inet(argv));
    ASSERT_TRUE(inet_accepts(accepts)) << "nginx never accepted: " << slurp(n / "error.log");
  }
  void TearDown() override {
    for (pid_t pid : servers_) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    ZerodTest::TearDown();
  }
  std::string p(const std::string& name) const { return (pki_ / name).string(); }
  static void sh(const std::string& cmd) {
    ASSERT_EQ(std::system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd;
  }
  pid_t spawn_in_inet(std::vector<std::string> argv) { return spawn_in(lab_->inet_netns(), std::move(argv)); }
  // A server in namespace `ns`, its output discarded; stopped at TearDown
  // when added to servers_.
  static pid_t spawn_in(const std::string& ns, std::vector<std::string> argv) {
    argv.insert(argv.begin(), {"ip", "netns", "exec", ns});
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
  // host "" = plain HTTP. Every request lands in upstream_log().
  void echo(const std::string& address, int port, const std::string& host) {
    std::vector<std::string> argv = {"python3", ZN_ECHO_UPSTREAM, address, std::to_string(port),
                                     p("upstream.log")};
    if (!host.empty()) {
      argv.push_back(p(host + ".pem"));
      argv.push_back(p(host + ".key"));
    }
    servers_.push_back(spawn_in_inet(argv));
  }
  std::string upstream_log() const { return slurp(pki_ / "upstream.log"); }
  CommandResult curl(const std::string& args) {
    return guest("curl -s -m 5 --cacert " + p("guest-trust.pem") + " " + args);
  }
  // The egress events, once every one of `needles` is in them (or as they
  // are after 5 s). A request's or connection's event is written after the
  // guest has its answer (a connection's as it closes), so a test reading
  // the audit right after curl returns would race zerod.
  std::string egress_events(const std::vector<std::string>& needles) {
    return audit_events("egress:", needles);
  }
  std::string egress_events() { return audit_events("egress:"); }
  // The audit's events under `prefix` ("egress:", "secret:canary"), once
  // every one of `needles` is in them (or as they are after 5 s).
  std::string audit_events(const std::string& prefix, const std::vector<std::string>& needles) {
    std::string events;
    for (int i = 0; i < 100; ++i) {
      events = audit_events(prefix);
      bool all = true;
      for (const std::string& n : needles) all = all && events.find(n) != std::string::npos;
      if (all) break;
      std::this_thread::sleep_for(50ms);
    }
    return events;
  }
  std::string audit_events(const std::string& prefix) {
    // Read-only, as znctl reads it: zerod keeps writing meanwhile.
    broker::AuditStore store((dir_ / "state" / "audit.db").string(), broker::AuditStore::Mode::kReadOnly);
    std::string out;
    broker::AuditQuery q;
    q.event = prefix;
    for (const auto& r : store.query(q)) out += r.event + " " + r.detail.dump() + "\n";
    return out;
  }
  // Raw bytes over TLS to `ip`:443 with SNI `host` from the guest; what came back.
  std::string raw_tls(const std::string& host, const std::string& ip, const std::string& bytes) {
    const fs::path f = dir_ / ("raw-" + std::to_string(raw_count_++));
    std::ofstream(f, std::ios::binary) << bytes;
    return guest("timeout 10 openssl s_client -quiet -CAfile " + p("guest-trust.pem") + " -connect " + ip +
                 ":443 -servername " + host + " < " + f.string() + " 2>/dev/null")
        .output;
  }

  // command.exec (issue 15), streamed: stdout, stderr and the last line
  // ({"result"}, {"reject"} or {"error"}). `args` names the session ("id").
  struct ExecReply {
    std::string out, err;
    json last;
  };
  ExecReply command_exec(const json& args) {
    ExecReply r;
    broker::control_stream(socket_, "command.exec", args, [&](const json& line) {
      if (line.contains("stream")) {
        const std::string text = line["b64"];
        std::string bytes(text.size(), '\0');
        size_t len = 0;
        sodium_base642bin(reinterpret_cast<unsigned char*>(bytes.data()), bytes.size(), text.data(),
                          text.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL);
        bytes.resize(len);
        (line["stream"] == "stderr" ? r.err : r.out) += bytes;
        return true;
      }
      if (line.contains("ok")) return true;  // zerod's answer to the request itself
      r.last = line;
      return false;
    });
    return r;
  }

  fs::path pki_;
  std::vector<pid_t> servers_;
  int raw_count_ = 0;
};

}  // namespace zn::test
