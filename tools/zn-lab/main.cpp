// zn-lab: build, inspect, use and tear down the namespace lab (see vmm/lab/lab.h).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <iomanip>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "zn-lab/governed_lab.h"
#include "common/netns.h"
#include "userspace/datapath/drop_events.h"
#include "userspace/datapath/pinned_maps.h"
#include "userspace/datapath/verdict_names.h"
#include "userspace/net/address.h"
#include "vmm/lab/lab.h"

namespace {

using zn::net::to_string;
using zn::vmm::Lab;

constexpr char kUsage[] =
    "usage: zn-lab [--prefix P] up [--guests N] [--ungoverned]\n"
    "                               build a lab with guests g0..g<N-1> (default 1), each TAP\n"
    "                               under the default-deny datapath unless --ungoverned\n"
    "       zn-lab [--prefix P] down                tear it down (namespaces, pumps, pins)\n"
    "       zn-lab [--prefix P] status              show namespaces, guests, addresses\n"
    "       zn-lab [--prefix P] exec GUEST -- CMD...  run CMD in a guest's namespace\n"
    "       zn-lab [--prefix P] stats [GUEST]       per-verdict packet counters of the guests\n"
    "       zn-lab [--prefix P] events [--seconds S]  print drop events for S seconds (default 5)\n"
    "P defaults to \"zn\".\n";

constexpr int kUsageError = 2;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

unsigned parse_count(const std::string& text) {
  std::size_t used = 0;
  unsigned long n = 0;
  try {
    n = std::stoul(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1 || n > zn::vmm::lab_plan::kMaxGuests)
    throw UsageError("--guests wants a number from 1 to 254, got '" + text + "'");
  return static_cast<unsigned>(n);
}

int cmd_up(const std::string& prefix, const std::vector<std::string>& args) {
  unsigned guests = 1;
  bool governed = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--guests" && i + 1 < args.size())
      guests = parse_count(args[++i]);
    else if (args[i] == "--ungoverned")
      governed = false;
    else
      throw UsageError("up: unexpected argument '" + args[i] + "'");
  }
  Lab lab = Lab::up(prefix);
  for (unsigned n = 0; n < guests; ++n) {
    // Appended, not "g" + to_string(n): g++ 12 at -O3 warns (-Wrestrict, a
    // false positive) on the prepend, which a Release build with -Werror
    // must not.
    std::string name = "g";
    name += std::to_string(n);
    lab.add_guest(name);
  }
  if (governed) zn::lab::govern_lab(lab);
  lab.release();
  std::cout << "lab '" << prefix << "' up with " << guests << " guest(s)"
            << (governed ? ", datapath pinned at " + zn::lab::lab_pin_root(prefix) : ", ungoverned") << "\n";
  return 0;
}

int cmd_down(const std::string& prefix, const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError("down takes no arguments");
  Lab::destroy(prefix);
  zn::lab::ungovern_lab(prefix);
  std::cout << "lab '" << prefix << "' down\n";
  return 0;
}

int cmd_status(const std::string& prefix, const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError("status takes no arguments");
  Lab lab = Lab::attach(prefix);
  std::cout << "lab " << prefix << "\n"
            << "  host netns  " << lab.host_netns() << "\n"
            << "  inet netns  " << lab.inet_netns() << "\n"
            << "  upstreams  ";
  for (const auto& a : Lab::upstream_ip4()) std::cout << " " << to_string(a);
  for (const auto& a : Lab::upstream_ip6()) std::cout << " " << to_string(a);
  std::cout << "\n";
  for (const auto& g : lab.guests()) {
    auto pid = lab.pump_pid(g.name);
    std::cout << "  guest " << g.name << "  netns " << g.netns
              << (zn::netns_exists(g.netns) ? "" : " (missing)") << "\n"
              << "    host tap  " << g.tap_name << " ifindex " << g.tap_ifindex << " mac "
              << to_string(g.host_mac) << " gw " << to_string(g.gateway_ip4) << " "
              << to_string(g.gateway_ip6) << "\n"
              << "    guest eth0 mac " << to_string(g.guest_mac) << " " << to_string(g.guest_ip4) << " "
              << to_string(g.guest_ip6) << " " << to_string(g.guest_ip6_ll) << "\n"
              << "    pump      " << (pid ? "pid " + std::to_string(*pid) : "NOT RUNNING") << "\n";
  }
  return 0;
}

int cmd_exec(const std::string& prefix, const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError("exec: missing GUEST");
  std::size_t cmd_start = (args.size() > 1 && args[1] == "--") ? 2 : 1;
  if (cmd_start >= args.size()) throw UsageError("exec: missing command after GUEST --");
  Lab lab = Lab::attach(prefix);
  const auto& guest = lab.guest(args[0]);
  // exec, not spawn: the command gets our terminal and its exit code is ours.
  std::vector<char*> argv = {const_cast<char*>("ip"), const_cast<char*>("netns"), const_cast<char*>("exec"),
                             const_cast<char*>(guest.netns.c_str())};
  for (std::size_t i = cmd_start; i < args.size(); ++i) argv.push_back(const_cast<char*>(args[i].c_str()));
  argv.push_back(nullptr);
  ::execvp("ip", argv.data());
  std::cerr << "zn-lab: cannot run ip: " << std::strerror(errno) << "\n";
  return 127;
}

int cmd_stats(const std::string& prefix, const std::vector<std::string>& args) {
  if (args.size() > 1) throw UsageError("stats takes at most one GUEST");
  Lab lab = Lab::attach(prefix);
  auto pinned = zn::dp::PinnedMaps::open(zn::lab::lab_pin_root(prefix));
  zn::dp::DatapathMaps maps(pinned.fds());
  for (const auto& g : lab.guests()) {
    if (!args.empty() && args[0] != g.name) continue;
    const uint32_t idx = g.slot + 1;
    std::cout << g.name << " (session " << idx << ", " << g.tap_name << ")\n";
    const auto counters = maps.counters(idx);
    for (unsigned v = 0; v < counters.size(); ++v)
      if (counters[v])
        std::cout << "  " << std::left << std::setw(24) << zn::dp::verdict_name(v) << counters[v] << "\n";
  }
  return 0;
}

volatile std::sig_atomic_t g_stop = 0;

int cmd_events(const std::string& prefix, const std::vector<std::string>& args) {
  unsigned seconds = 5;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--seconds" && i + 1 < args.size())
      seconds = parse_count(args[++i]);
    else
      throw UsageError("events: unexpected argument '" + args[i] + "'");
  }
  auto pinned = zn::dp::PinnedMaps::open(zn::lab::lab_pin_root(prefix));
  zn::dp::DropEventReader reader(pinned.events_fd(), [](const zn_drop_event& e) {
    std::cout << zn::dp::format_drop_event(e) << std::endl;
  });
  std::signal(SIGINT, [](int) { g_stop = 1; });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!g_stop && std::chrono::steady_clock::now() < end) reader.poll(100);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string prefix = Lab::kDefaultPrefix;
  try {
    if (!args.empty() && args[0] == "--prefix") {
      if (args.size() < 2) throw UsageError("--prefix needs a value");
      prefix = args[1];
      args.erase(args.begin(), args.begin() + 2);
    }
    if (args.empty()) throw UsageError("missing command");
    if (args[0] == "-h" || args[0] == "--help") {
      std::cout << kUsage;
      return 0;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    if (command == "up") return cmd_up(prefix, args);
    if (command == "down") return cmd_down(prefix, args);
    if (command == "status") return cmd_status(prefix, args);
    if (command == "exec") return cmd_exec(prefix, args);
    if (command == "stats") return cmd_stats(prefix, args);
    if (command == "events") return cmd_events(prefix, args);
    throw UsageError("unknown command '" + command + "'");
  } catch (const UsageError& e) {
    std::cerr << "zn-lab: " << e.what() << "\n" << kUsage;
    return kUsageError;
  } catch (const std::invalid_argument& e) {
    std::cerr << "zn-lab: " << e.what() << "\n";
    return kUsageError;
  } catch (const std::out_of_range& e) {
    std::cerr << "zn-lab: " << e.what() << "\n";
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "zn-lab: " << e.what() << "\n";
    return 1;
  }
}
