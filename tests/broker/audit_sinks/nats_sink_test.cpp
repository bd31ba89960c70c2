// The NATS JetStream audit sink and its reader against a real nats-server
// (-js, a store dir in a temp dir, 127.0.0.1 on a free port) started by each
// test and killed in TearDown: subjects, message ids and order as stored,
// deduplication of a batch delivered twice, a server that dies and comes
// back, two hosts in one stream, host names that are not subject tokens, and
// every config field's refusal.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nats/nats.h>
#include <nlohmann/json.hpp>

#include "broker/audit_sinks/nats_connection.h"
#include "broker/audit_sinks/nats_reader.h"
#include "broker/audit_sinks/nats_sink.h"
#include "support/temp_dir.h"

namespace zn::broker::audit_sinks {
namespace {

using audit_export::ExportBatch;
using audit_export::SinkContext;
using audit_export::SinkError;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kNatsServer = "/usr/sbin/nats-server";

// libnats' global threads and pools, released once every test is done.
class NatsLibrary : public ::testing::Environment {
 public:
  void TearDown() override { nats_CloseAndWait(5000); }
};
const auto* const kNatsLibrary = ::testing::AddGlobalTestEnvironment(new NatsLibrary);

uint16_t free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// A nats-server child with JetStream; start() waits until it says it is
// ready, stop() kills it (SIGKILL: a crash, not a clean shutdown).
class NatsServer {
 public:
  NatsServer(uint16_t port, std::string store_dir, std::string log)
      : port_(port), store_dir_(std::move(store_dir)), log_(std::move(log)) {}
  ~NatsServer() { stop(); }

  void start(const std::vector<std::string>& extra = {}) {
    ASSERT_EQ(pid_, -1);
    ASSERT_EQ(::access(kNatsServer, X_OK), 0)
        << kNatsServer << " missing (scripts/install-deps.sh installs it)";
    ::unlink(log_.c_str());
    std::vector<std::string> args = {kNatsServer,           "-js", "-a",       "127.0.0.1", "-p",
                                     std::to_string(port_), "-sd", store_dir_, "-l",        log_};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test binary that crashed
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      const int devnull = ::open("/dev/null", O_RDWR);
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      ::execv(kNatsServer, argv.data());
      ::_exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < until) {
      if (read_file(log_).find("Server is ready") != std::string::npos) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "nats-server exited at start:\n" << read_file(log_);
      }
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "nats-server not ready in 15 s:\n" << read_file(log_);
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }

 private:
  uint16_t port_;
  std::string store_dir_;
  std::string log_;
  pid_t pid_ = -1;
};

AuditRecord record(uint64_t seq, const std::string& event) {
  AuditRecord r;
  r.seq = seq;
  r.ts = "2026-11-29T12:00:00.123Z";
  r.event = event;
  r.sid = "s-1";
  r.detail = json{{"n", seq}};
  r.prev = std::string(64, '0');
  r.hash = std::string(64, 'a');
  return r;
}

// Records first..last with the given events (cycled), and a seal over the range.
ExportBatch batch(uint64_t first, uint64_t last, const std::vector<std::string>& events) {
  ExportBatch b;
  for (uint64_t seq = first; seq <= last; ++seq) {
    b.records.push_back(record(seq, events[(seq - first) % events.size()]));
    b.lines.push_back(b.records.back().json_line());
  }
  b.first_seq = first;
  b.last_seq = last;
  b.seal_line = json{{"zn", "audit-seal"}, {"first_seq", first}, {"last_seq", last}}.dump();
  return b;
}

// What a reader should return for these batches: lines then seal, each.
std::vector<std::string> expected_lines(const std::vector<const ExportBatch*>& batches) {
  std::vector<std::string> out;
  for (const auto* b : batches) {
    out.insert(out.end(), b->lines.begin(), b->lines.end());
    out.push_back(b->seal_line);
  }
  return out;
}

// One stored message as the test reads it straight from the stream.
struct Stored {
  std::string subject;
  std::string msg_id;
  std::string data;
};

class NatsSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<NatsServer>(free_port(), dir_.file("store"), dir_.file("nats.log"));
    server_->start();
  }
  void TearDown() override { server_.reset(); }

  json config(int timeout_ms = 2000) const {
    return json{{"type", "nats"}, {"url", server_->url()}, {"timeout_ms", timeout_ms}};
  }

  std::unique_ptr<audit_export::AuditSink> sink(const std::string& host, int timeout_ms = 2000) const {
    return make_nats_sink(config(timeout_ms), "$.audit_sinks[0]", SinkContext{host, dir_.path().string()});
  }

  std::vector<std::string> read(const std::string& host) const {
    NatsReadOptions o;
    o.url = server_->url();
    o.host = host;
    o.timeout = 10s;
    return read_nats_audit(o);
  }

  // Every message of the stream, in stream order, with its subject and id.
  std::vector<Stored> stored(const std::string& stream = "ZN_AUDIT") const {
    NatsConnection conn(NatsEndpoint{server_->url(), "", "", 5000ms});
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    EXPECT_EQ(js_GetStreamInfo(&info, conn.jetstream(), stream.c_str(), nullptr, &code), NATS_OK);
    if (info == nullptr) return {};
    const uint64_t first = info->State.FirstSeq, last = info->State.LastSeq;
    jsStreamInfo_Destroy(info);
    std::vector<Stored> out;
    for (uint64_t seq = first; last != 0 && seq <= last; ++seq) {
      natsMsg* m = nullptr;
      EXPECT_EQ(js_GetMsg(&m, conn.jetstream(), stream.c_str(), seq, nullptr, &code), NATS_OK) << seq;
      if (m == nullptr) continue;
      const char* id = nullptr;
      natsMsgHeader_Get(m, "Nats-Msg-Id", &id);
      out.push_back(
          {natsMsg_GetSubject(m), id ? id : "", std::string(natsMsg_GetData(m), natsMsg_GetDataLength(m))});
      natsMsg_Destroy(m);
    }
    return out;
  }

  zn::test::TempDir dir_;
  std::unique_ptr<NatsServer> server_;
};

TEST_F(NatsSinkTest, BatchLandsOnPerCategorySubjectsInOrderWithTheSealLast) {
  auto s = sink("web-1");
  const ExportBatch b = batch(1, 5, {"egress:allow", "dns:query", "egress:deny", "session:start"});
  s->deliver(b);

  const std::vector<Stored> got = stored();
  ASSERT_EQ(got.size(), 6u);
  const std::vector<std::string> subjects = {"zn.audit.web-1.egress", "zn.audit.web-1.dns",
                                             "zn.audit.web-1.egress", "zn.audit.web-1.session",
                                             "zn.audit.web-1.egress", "zn.audit.web-1.seal"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].subject, subjects[i]) << i;
    EXPECT_EQ(got[i].msg_id, "web-1-" + std::to_string(i + 1)) << i;
    EXPECT_EQ(got[i].data, b.lines[i]) << i;
  }
  EXPECT_EQ(got[5].subject, "zn.audit.web-1.seal");
  EXPECT_EQ(got[5].msg_id, "web-1-seal-1-5");
  EXPECT_EQ(got[5].data, b.seal_line);

  EXPECT_EQ(read("web-1"), expected_lines({&b}));

  // The stream the sink made: every subject under the prefix, on disk,
  // remembering message ids for the documented window.
  NatsConnection conn(NatsEndpoint{server_->url(), "", "", 5000ms});
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_GetStreamInfo(&info, conn.jetstream(), "ZN_AUDIT", nullptr, &code), NATS_OK);
  ASSERT_EQ(info->Config->SubjectsLen, 1);
  EXPECT_STREQ(info->Config->Subjects[0], "zn.audit.>");
  EXPECT_EQ(info->Config->Storage, js_FileStorage);
  EXPECT_EQ(info->Config->Duplicates, std::chrono::nanoseconds(kNatsDuplicateWindow).count());
  jsStreamInfo_Destroy(info);
}

TEST_F(NatsSinkTest, TheSameBatchDeliveredTwiceIsStoredOnce) {
  auto s = sink("web-1");
  const ExportBatch b = batch(1, 4, {"egress:allow"});
  s->deliver(b);
  s->deliver(b);
  // Also from a new sink (zerod restarted and retried its last batch).
  sink("web-1")->deliver(b);
  EXPECT_EQ(stored().size(), 5u);
  EXPECT_EQ(read("web-1"), expected_lines({&b}));
}

TEST_F(NatsSinkTest, AServerThatDiesFailsTheBatchInTimeAndTheRetryAfterItsReturnStoresEachOnce) {
  auto s = sink("web-1", 1000);
  const ExportBatch b1 = batch(1, 3, {"egress:allow", "dns:query"});
  const ExportBatch b2 = batch(4, 6, {"egress:deny"});
  s->deliver(b1);

  server_->stop();
  for (int attempt = 0; attempt < 2; ++attempt) {  // the dead connection, then a refused one
    const auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(s->deliver(b2), SinkError) << attempt;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 3s) << attempt;
  }

  server_->start();  // same port, same store
  s->deliver(b2);
  s->deliver(b2);  // the exporter may retry a batch that had in fact landed
  s->deliver(b1);  // ids stored before the crash are still known
  EXPECT_EQ(stored().size(), 8u);
  EXPECT_EQ(read("web-1"), expected_lines({&b1, &b2}));
}

TEST_F(NatsSinkTest, AServerThatStopsAnsweringFailsTheBatchWithinTheTimeout) {
  auto s = sink("web-1", 500);
  s->deliver(batch(1, 1, {"egress:allow"}));
  // Frozen, not dead: the connection stays up and nothing answers.
  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  int status = 0;  // until it has stopped indeed (kill only queues the signal)
  ASSERT_EQ(::waitpid(server_->pid(), &status, WUNTRACED), server_->pid());
  ASSERT_TRUE(WIFSTOPPED(status));
  const auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(s->deliver(batch(2, 2, {"egress:allow"})), SinkError);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
  s->deliver(batch(2, 2, {"egress:allow"}));
  EXPECT_EQ(read("web-1").size(), 4u);
}

TEST_F(NatsSinkTest, TwoHostsInOneStreamAreReadApart) {
  auto web = sink("web-1");
  auto db = sink("db-2");
  const ExportBatch w1 = batch(1, 2, {"egress:allow"});
  const ExportBatch d1 = batch(1, 3, {"dns:query"});
  const ExportBatch w2 = batch(3, 4, {"session:start"});
  const ExportBatch d2 = batch(4, 4, {"egress:deny"});
  web->deliver(w1);
  db->deliver(d1);
  web->deliver(w2);
  db->deliver(d2);  // the stream's last message is db-2's: web-1's read must still end
  EXPECT_EQ(read("web-1"), expected_lines({&w1, &w2}));
  EXPECT_EQ(read("db-2"), expected_lines({&d1, &d2}));
  EXPECT_TRUE(read("mail-3").empty());
}

TEST_F(NatsSinkTest, ALongTrailIsReadWholeAndInOrder) {
  auto s = sink("web-1");
  std::vector<ExportBatch> batches;
  for (uint64_t first = 1; first <= 4000; first += 500) {
    batches.push_back(batch(first, first + 499, {"egress:allow", "dns:query", "session:start"}));
    s->deliver(batches.back());
  }
  std::vector<const ExportBatch*> all;
  for (const auto& b : batches) all.push_back(&b);
  const std::vector<std::string> got = read("web-1");
  ASSERT_EQ(got.size(), 4008u);
  EXPECT_TRUE(got == expected_lines(all));
}

TEST_F(NatsSinkTest, AHostNameWithDotsIsSanitisedIntoOneToken) {
  auto s = sink("web-1.prod.example.com");
  const ExportBatch b = batch(1, 2, {"egress:allow"});
  s->deliver(b);
  const std::vector<Stored> got = stored();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].subject, "zn.audit.web-1_prod_example_com.egress");
  EXPECT_EQ(got[0].msg_id, "web-1_prod_example_com-1");
  EXPECT_EQ(got[2].subject, "zn.audit.web-1_prod_example_com.seal");
  EXPECT_EQ(read("web-1.prod.example.com"), expected_lines({&b}));
  // A name that only looks the same after a careless mapping is another host.
  EXPECT_TRUE(read("web-1_prod_example_com").empty());
}

TEST_F(NatsSinkTest, AStreamThatDoesNotTakeTheSubjectsFailsTheBatch) {
  {
    NatsConnection conn(NatsEndpoint{server_->url(), "", "", 5000ms});
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char* subjects[] = {"other.>"};
    cfg.Name = "ZN_AUDIT";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    jsErrCode code = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_AddStream(nullptr, conn.jetstream(), &cfg, nullptr, &code), NATS_OK);
  }
  try {
    sink("web-1")->deliver(batch(1, 1, {"egress:allow"}));
    FAIL() << "delivered to a stream that does not take zn.audit.>";
  } catch (const SinkError& e) {
    EXPECT_NE(std::string(e.what()).find("no stream takes"), std::string::npos) << e.what();
  }
}

TEST_F(NatsSinkTest, TheReaderRefusesAStreamThatDoesNotExist) { EXPECT_THROW(read("web-1"), NatsError); }

// Runs a shell command for the test's fixtures; fails the test if it fails.
void sh(const std::string& command) {
  ASSERT_EQ(std::system((command + " 2>/dev/null").c_str()), 0) << command;
}

// A server that speaks TLS only, with a certificate for 127.0.0.1 from a CA
// made for the test.
class NatsSinkTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + dir_.file("ca.key") +
       " -out " + dir_.file("ca.pem") + " -days 2 -subj '/CN=zeroness nats test CA'");
    sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout " + dir_.file("server.key") +
       " -out " + dir_.file("server.csr") + " -subj '/CN=127.0.0.1'");
    std::ofstream(dir_.file("server.ext")) << "subjectAltName=IP:127.0.0.1\n";
    sh("openssl x509 -req -in " + dir_.file("server.csr") + " -CA " + dir_.file("ca.pem") + " -CAkey " +
       dir_.file("ca.key") + " -CAcreateserial -out " + dir_.file("server.pem") + " -days 2 -extfile " +
       dir_.file("server.ext"));
    if (HasFatalFailure()) return;
    server_ = std::make_unique<NatsServer>(free_port(), dir_.file("store"), dir_.file("nats.log"));
    server_->start({"--tls", "--tlscert", dir_.file("server.pem"), "--tlskey", dir_.file("server.key")});
  }
  void TearDown() override { server_.reset(); }

  std::string url(const char* scheme) const {
    return std::string(scheme) + "127.0.0.1:" + std::to_string(port());
  }
  uint16_t port() const { return server_->port(); }

  zn::test::TempDir dir_;
  std::unique_ptr<NatsServer> server_;
};

TEST_F(NatsSinkTlsTest, DeliversAndReadsOverTlsVerifyingTheServerWithTheCaFile) {
  const ExportBatch b = batch(1, 3, {"egress:allow"});
  make_nats_sink(
      {{"type", "nats"}, {"url", url("tls://")}, {"ca_file", dir_.file("ca.pem")}, {"timeout_ms", 2000}},
      "$.audit_sinks[0]", SinkContext{"web-1", dir_.path().string()})
      ->deliver(b);
  NatsReadOptions o;
  o.url = url("tls://");
  o.ca_file = dir_.file("ca.pem");
  o.host = "web-1";
  o.timeout = 10s;
  EXPECT_EQ(read_nats_audit(o), expected_lines({&b}));

  // A server the CA file does not vouch for (here: the system's CAs, which
  // know nothing of the test's) is refused, in time.
  auto untrusting = make_nats_sink({{"type", "nats"}, {"url", url("tls://")}, {"timeout_ms", 1000}},
                                   "$.audit_sinks[0]", SinkContext{"web-1", dir_.path().string()});
  const auto started = std::chrono::steady_clock::now();
  try {
    untrusting->deliver(b);
    ADD_FAILURE() << "a server no CA vouches for was trusted";
  } catch (const SinkError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("nats: connect to " + url("tls://") + ": ", 0), 0u) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
}

TEST(NatsShownUrl, HidesCredentialsOfEachServer) {
  EXPECT_EQ(nats_shown_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
  EXPECT_EQ(nats_shown_url("nats://user:pw@a:4222,tls://token@b"), "nats://***@a:4222,tls://***@b");
}

TEST(NatsSubjectToken, KeepsNamesThatAreTokensAndEscapesTheRestWithoutCollisions) {
  EXPECT_EQ(nats_subject_token("web-1"), "web-1");
  EXPECT_EQ(nats_subject_token("Web-1.Example.com"), "Web-1_Example_com");
  EXPECT_EQ(nats_subject_token("a_b"), "a%5Fb");
  EXPECT_EQ(nats_subject_token("a*b>c"), "a%2Ab%3Ec");
  EXPECT_EQ(nats_subject_token("db 2\t"), "db%202%09");
  EXPECT_EQ(nats_subject_token("100%"), "100%25");
  EXPECT_EQ(nats_subject_token(""), "%");
  EXPECT_NE(nats_subject_token("a.b"), nats_subject_token("a_b"));
  EXPECT_EQ(nats_host_subject("zn.audit", "h.x"), "zn.audit.h_x");
}

// The message of the std::invalid_argument that `config` raises ("" if none).
std::string config_error(const json& config) {
  try {
    check_nats_sink(config, "$.audit_sinks[1]");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(NatsSinkConfig, AcceptsTheFullAndTheMinimalForm) {
  EXPECT_EQ(config_error({{"type", "nats"}, {"url", "nats://127.0.0.1:4222"}}), "");
  EXPECT_EQ(config_error({{"type", "nats"},
                          {"url", "tls://nats.example.com:4222,tls://[::1]:4223"},
                          {"stream", "AUDIT_1"},
                          {"subject_prefix", "corp.zn-audit"},
                          {"creds_file", "/etc/zeroness/audit.creds"},
                          {"ca_file", "/etc/zeroness/ca.pem"},
                          {"timeout_ms", 1500}}),
            "");
  const NatsSinkConfig defaults =
      parse_nats_sink_config({{"type", "nats"}, {"url", "nats://h"}}, "$.audit_sinks[1]");
  EXPECT_EQ(defaults.stream, "ZN_AUDIT");
  EXPECT_EQ(defaults.subject_prefix, "zn.audit");
  EXPECT_EQ(defaults.timeout, 5000ms);
  EXPECT_TRUE(defaults.creds_file.empty());
  EXPECT_TRUE(defaults.ca_file.empty());
}

TEST(NatsSinkConfig, RefusesEachBadFieldNamingIt) {
  const json good = {{"type", "nats"}, {"url", "nats://127.0.0.1:4222"}};
  auto with = [&](const char* key, const json& value) {
    json c = good;
    c[key] = value;
    return c;
  };
  auto without = [&](const char* key) {
    json c = good;
    c.erase(key);
    return c;
  };
  const struct {
    json config;
    std::string path;  // the field the message must start with
  } cases[] = {
      {json::array(), "$.audit_sinks[1]: "},
      {with("typo", 1), "$.audit_sinks[1].typo: unknown field"},
      {without("type"), "$.audit_sinks[1].type: required"},
      {with("type", "syslog"), "$.audit_sinks[1].type: "},
      {without("url"), "$.audit_sinks[1].url: required"},
      {with("url", 4222), "$.audit_sinks[1].url: "},
      {with("url", ""), "$.audit_sinks[1].url: "},
      {with("url", "http://127.0.0.1:4222"), "$.audit_sinks[1].url: "},
      {with("url", "nats://user:secret@127.0.0.1:4222"), "$.audit_sinks[1].url: "},
      {with("url", "nats://127.0.0.1:99999"), "$.audit_sinks[1].url: "},
      {with("url", "nats://127.0.0.1:4222/path"), "$.audit_sinks[1].url: "},
      {with("url", "nats://:4222"), "$.audit_sinks[1].url: "},
      {with("url", "nats://a:4222,"), "$.audit_sinks[1].url: "},
      {with("stream", ""), "$.audit_sinks[1].stream: "},
      {with("stream", "ZN.AUDIT"), "$.audit_sinks[1].stream: "},
      {with("stream", "ZN AUDIT"), "$.audit_sinks[1].stream: "},
      {with("stream", 7), "$.audit_sinks[1].stream: "},
      {with("subject_prefix", ""), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "zn.*"), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "zn.>"), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "zn..audit"), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "zn.audit."), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "zn audit"), "$.audit_sinks[1].subject_prefix: "},
      {with("subject_prefix", "$JS.API"), "$.audit_sinks[1].subject_prefix: "},
      {with("creds_file", "audit.creds"), "$.audit_sinks[1].creds_file: must be an absolute path"},
      {with("creds_file", ""), "$.audit_sinks[1].creds_file: must be an absolute path"},
      {with("creds_file", true), "$.audit_sinks[1].creds_file: must be an absolute path"},
      {with("ca_file", "ca.pem"), "$.audit_sinks[1].ca_file: must be an absolute path"},
      {with("timeout_ms", 0), "$.audit_sinks[1].timeout_ms: "},
      {with("timeout_ms", 99), "$.audit_sinks[1].timeout_ms: "},
      {with("timeout_ms", 600001), "$.audit_sinks[1].timeout_ms: "},
      {with("timeout_ms", -5), "$.audit_sinks[1].timeout_ms: "},
      {with("timeout_ms", 1.5), "$.audit_sinks[1].timeout_ms: "},
      {with("timeout_ms", "5000"), "$.audit_sinks[1].timeout_ms: "},
  };
  for (const auto& c : cases) {
    const std::string error = config_error(c.config);
    EXPECT_EQ(error.rfind(c.path, 0), 0u) << c.config.dump() << " -> \"" << error << "\"";
  }
  // The refusal of a URL with a password does not repeat the password.
  EXPECT_EQ(config_error(with("url", "nats://user:secret@127.0.0.1:4222")).find("secret"), std::string::npos);
}

TEST(NatsSinkConfig, AHostWithoutANameIsRefused) {
  EXPECT_THROW(make_nats_sink({{"type", "nats"}, {"url", "nats://127.0.0.1:4222"}}, "$.audit_sinks[0]",
                              SinkContext{"", "/tmp"}),
               std::invalid_argument);
}

}  // namespace
}  // namespace zn::broker::audit_sinks
