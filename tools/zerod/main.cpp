// zerod: the zeroness broker daemon. Runs as root; see README.md.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "broker/daemon/config.h"
#include "broker/policy/parser.h"
#include "broker/daemon/zerod.h"

int main(int argc, char** argv) {
  CLI::App app{"zerod: compiles session policy into the BPF datapath, answers guest DNS, audits"};
  std::string config_path = "/etc/zeroness/zerod.json";
  std::string netns, state_dir, pin_root, control_socket;
  app.add_option("-c,--config", config_path, "config file (JSON); defaults apply when it is absent");
  app.add_option("--netns", netns, "enter this named network namespace (overrides the config)");
  app.add_option("--state-dir", state_dir, "sessions and audit database (overrides the config)");
  app.add_option("--pin-root", pin_root, "bpffs directory for pins (overrides the config)");
  app.add_option("--control-socket", control_socket, "control socket path (overrides the config)");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ zerod %l %v", spdlog::pattern_time_type::utc);
  if (::geteuid() != 0) {
    spdlog::error("zerod must run as root (BPF, TAP devices, transparent sockets)");
    return 1;
  }
  zn::broker::DaemonConfig config;
  try {
    if (std::filesystem::exists(config_path)) config = zn::broker::load_daemon_config(config_path);
  } catch (const std::exception& e) {
    spdlog::error("config {}: {}", config_path, e.what());
    return 2;
  }
  if (!netns.empty()) config.netns = netns;
  if (!state_dir.empty()) config.state_dir = state_dir;
  if (!pin_root.empty()) config.pin_root = pin_root;
  if (!control_socket.empty()) config.control_socket = control_socket;

  // Blocked before any thread starts, so only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<zn::broker::ZerodDaemon> daemon;
  try {
    daemon = std::make_unique<zn::broker::ZerodDaemon>(config);
  } catch (const std::exception& e) {
    spdlog::error("start-up failed: {}", e.what());
    return 1;
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  daemon->stop();
  return 0;
}
