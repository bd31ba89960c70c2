// AresResolver against a real dnsmasq in a namespace of its own, and the
// whole responder in front of it. Needs root (namespaces).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <thread>

#include "common/netns.h"
#include "support/dns_messages.h"
#include "userspace/dns/ares_resolver.h"
#include "userspace/dns/responder.h"
#include "userspace/net/transparent_socket.h"
#include "vmm/host/named_netns.h"

namespace zn::dns::test {
namespace {

using namespace std::chrono_literals;

constexpr char kUpstream4[] = "198.18.0.53";
constexpr char kUpstream6[] = "2001:db8:18::53";

// "zdns<pid>_<4 hex>": unique per run; the pid lets a later run sweep leftovers.
std::string unique_name() {
  static std::mt19937 rng{std::random_device{}()};
  char tail[8];
  std::snprintf(tail, sizeof tail, "%04x", static_cast<unsigned>(rng() & 0xffff));
  return "zdns" + std::to_string(::getpid()) + "_" + tail;
}

// Namespaces of this test left by a crashed run whose process is gone.
void sweep_leftovers() {
  for (const auto& ns : vmm::list_netns()) {
    if (ns.rfind("zdns", 0) != 0) continue;
    const size_t sep = ns.find('_');
    if (sep == std::string::npos || sep == 4) continue;
    const std::string pid = ns.substr(4, sep - 4);
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::filesystem::exists("/proc/" + pid)) continue;
    try {
      vmm::delete_netns(ns);
    } catch (...) {
    }
  }
}

// dnsmasq on kUpstream4/6:53 inside a fresh namespace; removed on destruction.
class DnsmasqUpstream {
 public:
  DnsmasqUpstream() : ns_(unique_name() + "-up"), log_("/tmp/" + ns_ + ".log") {
    sweep_leftovers();
    vmm::create_netns(ns_);
    try {
      must({"ip", "link", "set", "lo", "up"});
      must({"ip", "addr", "add", std::string(kUpstream4) + "/32", "dev", "lo"});
      must({"ip", "addr", "add", std::string(kUpstream6) + "/128", "dev", "lo"});
      start();
      wait_ready();
    } catch (...) {
      cleanup();
      throw;
    }
  }
  ~DnsmasqUpstream() { cleanup(); }

  const std::string& netns() const { return ns_; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  void must(const std::vector<std::string>& argv) {
    if (vmm::run_in_netns(ns_, argv) != 0) throw std::runtime_error("failed in " + ns_ + ": " + argv[0]);
  }
  void start() {
    std::vector<std::string> args{"ip",
                                  "netns",
                                  "exec",
                                  ns_,
                                  "dnsmasq",
                                  "--no-daemon",
                                  "--conf-file=/dev/null",
                                  "--no-resolv",
                                  "--no-hosts",
                                  "--bind-interfaces",
                                  std::string("--listen-address=") + kUpstream4,
                                  std::string("--listen-address=") + kUpstream6,
                                  "--port=53",
                                  "--pid-file=",
                                  "--local-ttl=120",
                                  "--log-queries",
                                  "--log-facility=" + log_,
                                  "--address=/upstream.test/198.18.0.50",
                                  "--address=/upstream.test/2001:db8:18::50",
                                  "--address=/nx.test/",
                                  "--host-record=target.test,198.18.0.51",
                                  "--cname=alias.test,target.test"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
  }
  void wait_ready() {
    NetnsScope in(ns_);
    for (int i = 0; i < 50; ++i) {
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("dnsmasq exited");
      }
      if (udp_exchange(zn::net::make_endpoint(kUpstream4, 53), make_query("upstream.test"), 100ms)) return;
    }
    throw std::runtime_error("dnsmasq did not answer");
  }
  void cleanup() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    try {
      vmm::delete_netns(ns_);
    } catch (...) {
    }
    std::error_code ec;
    std::filesystem::remove(log_, ec);
  }

  std::string ns_;
  std::string log_;
  pid_t pid_ = -1;
};

class AresResolverTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;
    // Thrown here, gtest 1.12 would skip the suite: fail each test instead.
    try {
      upstream_ = new DnsmasqUpstream();
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static inline std::string setup_error_;
  static void TearDownTestSuite() {
    delete upstream_;
    upstream_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << "suite setup failed: " << setup_error_;
    if (!upstream_) GTEST_SKIP() << "needs root (namespaces)";
  }

  // The resolver and its thread live in the upstream's namespace.
  static std::unique_ptr<AresResolver> resolver(AresConfig config) {
    NetnsScope in(upstream_->netns());
    return std::make_unique<AresResolver>(std::move(config));
  }
  static ResolveResult resolve(Resolver& r, const std::string& name, QType t) {
    auto p = std::make_shared<std::promise<ResolveResult>>();
    auto f = p->get_future();
    r.resolve(name, t, [p](ResolveResult res) { p->set_value(std::move(res)); });
    if (f.wait_for(10s) != std::future_status::ready) throw std::runtime_error("no callback");
    return f.get();
  }
  static std::vector<std::string> texts(const ResolveResult& r) {
    std::vector<std::string> out;
    for (const auto& a : r.addresses) out.push_back(a.to_string());
    return out;
  }

  static DnsmasqUpstream* upstream_;
};
DnsmasqUpstream* AresResolverTest::upstream_ = nullptr;

TEST_F(AresResolverTest, ResolvesAandAaaaWithTtl) {
  auto r = resolver({.servers = {kUpstream4}});
  auto a = resolve(*r, "upstream.test", QType::A);
  EXPECT_EQ(a.rcode, Rcode::NoError);
  EXPECT_EQ(texts(a), std::vector<std::string>{"198.18.0.50"});
  EXPECT_EQ(a.ttl, 120u);
  auto aaaa = resolve(*r, "upstream.test", QType::AAAA);
  EXPECT_EQ(aaaa.rcode, Rcode::NoError);
  EXPECT_EQ(texts(aaaa), std::vector<std::string>{"2001:db8:18::50"});
}

TEST_F(AresResolverTest, NxdomainIsReportedAsSuch) {
  auto r = resolver({.servers = {kUpstream4}});
  EXPECT_EQ(resolve(*r, "gone.nx.test", QType::A).rcode, Rcode::NxDomain);
}

TEST_F(AresResolverTest, CnameChainsAreFlattened) {
  auto r = resolver({.servers = {kUpstream4}});
  auto a = resolve(*r, "alias.test", QType::A);
  EXPECT_EQ(a.rcode, Rcode::NoError);
  EXPECT_EQ(texts(a), std::vector<std::string>{"198.18.0.51"});
}

TEST_F(AresResolverTest, Ipv6UpstreamServer) {
  auto r = resolver({.servers = {std::string("[") + kUpstream6 + "]:53"}});
  EXPECT_EQ(texts(resolve(*r, "upstream.test", QType::A)), std::vector<std::string>{"198.18.0.50"});
}

TEST_F(AresResolverTest, SilentUpstreamTimesOutBounded) {
  // A socket that takes queries and never answers.
  NetnsScope in(upstream_->netns());
  int silent = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const auto addr = zn::net::make_endpoint(kUpstream4, 5300);
  ASSERT_EQ(::bind(silent, reinterpret_cast<const sockaddr*>(&addr), zn::net::endpoint_len(addr)), 0);
  std::future<ResolveResult> late;
  {
    AresResolver r({.servers = {std::string(kUpstream4) + ":5300"}, .timeout = 200ms, .tries = 2});
    const auto start = std::chrono::steady_clock::now();
    auto res = resolve(r, "upstream.test", QType::A);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(res.rcode, Rcode::ServFail);
    EXPECT_LT(took, 3s);
    // Destroyed with a query in flight: its callback still runs (ServFail).
    auto p = std::make_shared<std::promise<ResolveResult>>();
    late = p->get_future();
    r.resolve("upstream.test", QType::A, [p](ResolveResult x) { p->set_value(std::move(x)); });
    std::this_thread::sleep_for(20ms);
  }  // r is destroyed here, long before its 200 ms timeout
  ASSERT_EQ(late.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(late.get().rcode, Rcode::ServFail);
  ::close(silent);
}

TEST_F(AresResolverTest, OverloadIsServfailAtOnce) {
  auto r = resolver({.servers = {kUpstream4}, .max_pending = 0});
  EXPECT_EQ(resolve(*r, "upstream.test", QType::A).rcode, Rcode::ServFail);
}

TEST_F(AresResolverTest, ResponderInFrontOfAresNeverForwardsDeniedNames) {
  RecordingPolicy policy;
  policy.allowed_suffixes = {"upstream.test", "alias.test"};
  auto r = resolver({.servers = {kUpstream4}});
  NetnsScope in(upstream_->netns());
  Responder responder({.addresses = {"127.0.0.1"}, .port = 0}, policy, *r);
  const auto server = zn::net::make_endpoint("127.0.0.1", responder.port());
  auto ok = udp_exchange(server, make_query("Upstream.Test"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(parse_reply(*ok)->addresses, std::vector<std::string>{"198.18.0.50"});
  EXPECT_EQ(parse_reply(*ok)->ttls, std::vector<uint32_t>{120});
  auto denied = udp_exchange(server, make_query("c2VjcmV0.exfil.nx.test"));
  ASSERT_TRUE(denied);
  EXPECT_EQ(parse_reply(*denied)->rcode, LDNS_RCODE_NXDOMAIN);
  ASSERT_EQ(policy.answers().size(), 1u);
  EXPECT_EQ(policy.answers()[0].qname, "upstream.test");
  // dnsmasq saw the allowed name and never the denied one.
  std::string log;
  for (int i = 0; i < 20 && log.find("upstream.test") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
    log = upstream_->log();
  }
  EXPECT_NE(log.find("query[A] upstream.test"), std::string::npos) << log;
  EXPECT_EQ(log.find("c2VjcmV0"), std::string::npos) << log;
  EXPECT_EQ(responder.counters().upstream_failures, 0u);
}

}  // namespace
}  // namespace zn::dns::test
