// zerod: the zeroness broker daemon. Runs as root; see README.md.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdio>

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
  bool check_config = false;
  app.add_flag(
      "--check-config", check_config,
      "parse and check the config file (every field, the audit sinks) without starting; exit 0 if it "
      "is good, 2 with the field's JSON path if not");
  CLI11_PARSE(app, argc, argv);

  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%eZ zerod %l %v", spdlog::pattern_time_type::utc);
  if (check_config) {
    // No root needed, nothing touched: a package's postinst or an operator
    // before a restart.
    try {
      zn::broker::load_daemon_config(config_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "config %s: %s\n", config_path.c_str(), e.what());
      return 2;
    }
    std::printf("config %s: ok\n", config_path.c_str());
    return 0;
  }
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
  // systemd (Type=notify): ready once every listener is up; the watchdog
  // is fed from this thread while it waits for a stop signal. Outside
  // systemd both calls do nothing.
  sd_notify(0, "READY=1");
  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  int sig = 0;
  while (true) {
    if (!watchdog) {
      sigwait(&stop_signals, &sig);
      break;
    }
    const timespec half{static_cast<time_t>(watchdog_usec / 2 / 1000000),
                        static_cast<long>((watchdog_usec / 2 % 1000000) * 1000)};
    sig = sigtimedwait(&stop_signals, nullptr, &half);
    if (sig > 0) break;
    sd_notify(0, "WATCHDOG=1");
  }
  sd_notify(0, "STOPPING=1");
  spdlog::info("signal {}: shutting down", sig);
  daemon->stop();
  return 0;
}
