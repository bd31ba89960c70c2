// zerod as a real process in a lab, for the integration tests: a fresh lab,
// a config pointing at it, the daemon started and stopped around each test.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "broker/audit/log.h"
#include "broker/control/server.h"
#include "zn-lab/governed_lab.h"
#include "integration/guest_commands.h"
#include "integration/lab_datapath.h"
#include "userspace/datapath/bpffs.h"
#include "vmm/lab/lab.h"

namespace zn::test {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

inline constexpr const char* kSecret = "sk_live_zerod_test_4f9a8b7c6d";

inline std::string policy(const std::string& extra_allow = "") {
  return R"({"policy":{"allow":[
      {"host":"api.github.com","methods":["GET"],"paths":["/repos/**"]},
      {"host":"api.stripe.com","identity":"cap:stripe"},
      {"host":"*.npmjs.org"},)" +
         extra_allow + R"(
      {"host":"db.internal","port":5432,"proto":"tcp"}],
    "deny":[{"host":"evil.example"}]},
   "resources":{"stripe":{"accessToken":")" +
         kSecret + R"("}}})";
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ZerodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lab_ = std::make_unique<vmm::Lab>(vmm::Lab::up(unique_lab_prefix("zd")));
    lab_->add_guest("g0");
    dir_ = fs::temp_directory_path() / ("zerod-" + lab_->prefix());
    fs::create_directories(dir_);
    socket_ = (dir_ / "zerod.sock").string();
    json config = {{"netns", lab_->host_netns()},
                   {"pin_root", lab::lab_pin_root(lab_->prefix())},
                   {"state_dir", (dir_ / "state").string()},
                   {"host_key", (dir_ / "host.key").string()},
                   {"control_socket", socket_},
                   {"metrics_port", 19464},
                   {"proxy_idle_timeout_ms", 2000},
                   {"proxy_header_timeout_ms", 2000},
                   {"proxy_max_connections_per_guest", 64},
                   {"approval_timeout_ms", 4000},
                   // The lab's stand-in internet is a benchmarking range that
                   // zerod refuses by default; the guest pool 198.19.0.0/16
                   // next to it must stay refused, hence /16 and not /15.
                   {"upstream_allow", {"198.18.0.0/16", "2001:db8:18::/48"}},
                   {"dns_static",
                    {{"api.github.com", {"198.18.0.10"}},
                     {"api.stripe.com", {"198.18.0.11"}},
                     {"registry.npmjs.org", {"198.18.0.12", "2001:db8:18::12"}},
                     {"db.internal", {"198.18.0.13"}},
                     {"api.openai.com", {"198.18.0.10"}},
                     {"meta.npmjs.org", {"169.254.169.254"}}}}};
    configure(config);
    std::ofstream(dir_ / "zerod.json") << config.dump();
    start_zerod();
  }
  // Before zerod starts: a fixture adds to its configuration.
  virtual void configure(json& config) { (void)config; }
  void TearDown() override {
    stop_zerod(SIGTERM);
    if (HasFailure()) {
      // The daemon's side of a failure, for CI logs (it never logs secrets).
      const std::string log = slurp(dir_ / "zerod.log");
      std::cerr << "---- zerod.log (last 4 KiB) ----\n"
                << log.substr(log.size() > 4096 ? log.size() - 4096 : 0);
    }
    const std::string pins = lab::lab_pin_root(lab_->prefix());
    lab_.reset();
    try {
      dp::remove_pin_root(pins);
    } catch (...) {
    }
    fs::remove_all(dir_);
  }

  void start_zerod() {
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const std::string log = (dir_ / "zerod.log").string();
      FILE* out = std::fopen(log.c_str(), "a");
      ::dup2(fileno(out), 1);
      ::dup2(fileno(out), 2);
      ::execl(ZN_ZEROD_BIN, "zerod", "--config", (dir_ / "zerod.json").c_str(), nullptr);
      ::_exit(127);
    }
    // Up to 30 s: zerod is up in well under a second, but CI builds beside
    // the tests (at the lowest priority) and a CPU hog may share the cores.
    for (int i = 0; i < 600; ++i) {
      try {
        if (broker::control_call(socket_, "status").value("ok", false)) return;
      } catch (...) {
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "zerod did not come up: " << slurp(dir_ / "zerod.log");
  }
  void stop_zerod(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  json call(const std::string& verb, const json& args = json::object()) {
    return broker::control_call(socket_, verb, args);
  }
  CommandResult guest(const std::string& cmd) { return run_in_netns(lab_->guests()[0].netns, cmd); }
  std::string dig(const std::string& name) {
    return guest("dig @8.8.8.8 " + name + " +short +tries=1 +time=2").output;
  }
  void create_session() {
    json r =
        call("session.create", {{"id", "user-1"}, {"policy", policy()}, {"device", "zn-tap0"}, {"slot", 0}});
    ASSERT_TRUE(r["ok"]) << r.dump();
  }

  std::unique_ptr<vmm::Lab> lab_;
  fs::path dir_;
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace zn::test
