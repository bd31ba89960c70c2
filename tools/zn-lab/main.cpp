// zn-lab: build, inspect, use and tear down the namespace lab (see vmm/lab.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "common/netns.h"
#include "vmm/ip_address.h"
#include "vmm/lab.h"

namespace {

using zn::vmm::Lab;
using zn::vmm::to_string;

constexpr char kUsage[] =
    "usage: zn-lab [--prefix P] up [--guests N]    build a lab with guests g0..g<N-1> (default 1)\n"
    "       zn-lab [--prefix P] down                tear it down\n"
    "       zn-lab [--prefix P] status              show namespaces, guests, addresses\n"
    "       zn-lab [--prefix P] exec GUEST -- CMD...  run CMD in a guest's namespace\n"
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
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--guests" && i + 1 < args.size())
      guests = parse_count(args[++i]);
    else
      throw UsageError("up: unexpected argument '" + args[i] + "'");
  }
  Lab lab = Lab::up(prefix);
  for (unsigned n = 0; n < guests; ++n) lab.add_guest("g" + std::to_string(n));
  lab.release();
  std::cout << "lab '" << prefix << "' up with " << guests << " guest(s)\n";
  return 0;
}

int cmd_down(const std::string& prefix, const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError("down takes no arguments");
  Lab::destroy(prefix);
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
              << "    guest eth0 mac " << to_string(g.guest_mac) << " " << to_string(g.guest_ip4)
              << " " << to_string(g.guest_ip6) << " " << to_string(g.guest_ip6_ll) << "\n"
              << "    pump      " << (pid ? "pid " + std::to_string(*pid) : "NOT RUNNING")
              << "\n";
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
  std::vector<char*> argv = {const_cast<char*>("ip"), const_cast<char*>("netns"),
                             const_cast<char*>("exec"), const_cast<char*>(guest.netns.c_str())};
  for (std::size_t i = cmd_start; i < args.size(); ++i)
    argv.push_back(const_cast<char*>(args[i].c_str()));
  argv.push_back(nullptr);
  ::execvp("ip", argv.data());
  std::cerr << "zn-lab: cannot run ip: " << std::strerror(errno) << "\n";
  return 127;
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
