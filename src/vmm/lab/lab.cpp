#include "vmm/lab/lab.h"

#include <fcntl.h>

#include <cctype>
#include <chrono>
#include <cerrno>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "common/netns.h"
#include "vmm/lab/state.h"
#include "vmm/host/named_netns.h"
#include "vmm/lab/pump_process.h"
#include "vmm/host/route_netlink.h"
#include "vmm/host/steering_routes.h"
#include "vmm/host/tap_device.h"
#include "userspace/net/unique_fd.h"

namespace zn::vmm {
namespace {

constexpr std::size_t kMaxPrefix = 16, kMaxGuestName = 15;  // netns names stay <= 32

bool valid_name(const std::string& s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

void check_prefix(const std::string& prefix) {
  if (!valid_name(prefix, kMaxPrefix))
    throw std::invalid_argument("bad lab prefix '" + prefix + "': 1-16 of [A-Za-z0-9_]");
}

// /proc/sys/net resolves against the opening thread's namespace, so this
// writes the setting of whatever namespace the caller is in.
void write_sysctl(const std::string& key, const std::string& value) {
  std::ofstream out("/proc/sys/" + key);
  out << value;
  out.flush();
  if (!out) throw std::runtime_error("cannot set sysctl " + key);
}

void bring_up_loopback(RouteNetlink& nl) { nl.configure_link(nl.link_index("lo"), {}); }

// Link-local addresses skip duplicate address detection too (the lab's
// addresses already carry IFA_F_NODAD): each lab link joins exactly two
// namespaces of the lab, so there is nothing to detect, and a tentative
// address is one the kernel will not use yet. Set before the namespace's
// devices exist: a device copies "default" when it is created.
void skip_dad() {
  write_sysctl("net/ipv6/conf/all/accept_dad", "0");
  write_sysctl("net/ipv6/conf/default/accept_dad", "0");
}

// Returns once the named links of the current namespace pass traffic: up
// and running, no address tentative. Both settle asynchronously after the
// calls that configure them return (carrier changes and address completion
// run from kernel work queues that wait for the RTNL lock, which other
// namespaces' set-up and teardown hold for long stretches), and until then
// a link silently drops what it is given. Waiting for the state itself, not
// for a time, is what makes the first packet through a new lab reliable.
void wait_settled(const std::string& ns, const std::vector<std::string>& links) {
  NetnsScope in_ns(ns);
  RouteNetlink nl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto pending = nl.unsettled(links);
    if (pending.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string what;
      for (const auto& p : pending) what += (what.empty() ? "" : ", ") + p;
      throw std::runtime_error("lab namespace " + ns + " not ready after 10 s: " + what);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string cidr(const in_addr& a, unsigned len) { return net::to_string(a) + "/" + std::to_string(len); }
std::string cidr(const in6_addr& a, unsigned len) { return net::to_string(a) + "/" + std::to_string(len); }

void build_host_and_inet(const std::string& host, const std::string& inet) {
  using namespace lab_plan;
  {
    NetnsScope in_inet(inet);
    skip_dad();
    RouteNetlink nl;
    bring_up_loopback(nl);
    int lo = nl.link_index("lo");
    for (const auto& a : upstream_ip4()) nl.add_address(lo, cidr(a, 32));
    for (const auto& a : upstream_ip6()) nl.add_address(lo, cidr(a, 128));
  }
  {
    NetnsScope in_host(host);
    skip_dad();
    RouteNetlink nl;
    bring_up_loopback(nl);
    net::UniqueFd inet_fd(::open(netns_path(inet).c_str(), O_RDONLY | O_CLOEXEC));
    if (!inet_fd) throw std::system_error(errno, std::generic_category(), "open netns " + inet);
    nl.create_veth(kHostUplink, kInetDownlink, inet_fd.get());
    int uplink = nl.link_index(kHostUplink);
    nl.configure_link(uplink, {});
    nl.add_address(uplink, kHostUplinkIp4);
    nl.add_address(uplink, kHostUplinkIp6);
    // Forwarding on, so traffic for guests reaches their TAPs: dropping it
    // must be the BPF egress program's doing, not the lab's.
    write_sysctl("net/ipv4/ip_forward", "1");
    write_sysctl("net/ipv6/conf/all/forwarding", "1");
    install_steering_routes();
  }
  {
    NetnsScope in_inet(inet);
    RouteNetlink nl;
    int downlink = nl.link_index(kInetDownlink);
    nl.configure_link(downlink, {});
    nl.add_address(downlink, kInetDownlinkIp4);
    nl.add_address(downlink, kInetDownlinkIp6);
    nl.add_route(kGuestNet4, "198.18.255.1");
    nl.add_route(kGuestNet6, "2001:db8:18:ff::1");
  }
  {
    NetnsScope in_host(host);
    RouteNetlink nl;
    nl.add_route(kUpstreamNet4, "198.18.255.2");
    nl.add_route(kUpstreamNet6, "2001:db8:18:ff::2");
  }
  wait_settled(host, {"lo", kHostUplink});
  wait_settled(inet, {"lo", kInetDownlink});
}

}  // namespace

Lab::Lab(std::string prefix, bool owning) : prefix_(std::move(prefix)), owning_(owning) {}

Lab::Lab(Lab&& other) noexcept
    : prefix_(std::move(other.prefix_)), owning_(other.owning_), guests_(std::move(other.guests_)) {
  other.owning_ = false;
}

Lab::~Lab() {
  if (!owning_) return;
  try {
    destroy(prefix_);
  } catch (...) {
    // Best effort: destroy() already tried every step; leftovers go at the next up().
  }
}

Lab Lab::up(const std::string& prefix) {
  check_prefix(prefix);
  destroy(prefix);
  Lab lab(prefix, true);  // from here on, a failure tears down what was built
  LabState(prefix).create();
  create_netns(lab.host_netns());
  create_netns(lab.inet_netns());
  build_host_and_inet(lab.host_netns(), lab.inet_netns());
  return lab;
}

Lab Lab::attach(const std::string& prefix) {
  check_prefix(prefix);
  Lab lab(prefix, false);
  LabState state(prefix);
  if (!state.exists() || !netns_exists(lab.host_netns()))
    throw std::runtime_error("no lab with prefix '" + prefix + "' (run: zn-lab --prefix " + prefix + " up)");
  NetnsScope in_host(lab.host_netns());
  RouteNetlink nl;
  for (const auto& name : state.guests()) {
    LabGuest g = lab_plan::guest(prefix, name, static_cast<unsigned>(lab.guests_.size()));
    if (auto tap = nl.find_link(g.tap_name)) g.tap_ifindex = tap->ifindex;
    lab.guests_.push_back(std::move(g));
  }
  return lab;
}

void Lab::destroy(const std::string& prefix) {
  check_prefix(prefix);
  LabState state(prefix);
  std::exception_ptr first_error;
  auto attempt = [&](auto&& step) {
    try {
      step();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  };
  // Pumps first: their TAP fds keep the namespaces alive after `ip netns del`.
  for (pid_t pid : state.pump_pids()) attempt([&] { stop_pump_process(pid); });
  std::vector<std::string> namespaces = {prefix + "-host", prefix + "-inet"};
  for (const auto& g : state.guests()) namespaces.push_back(prefix + "-" + g);
  for (const auto& ns : namespaces) attempt([&] { delete_netns(ns); });
  state.remove();
  if (first_error) std::rethrow_exception(first_error);
}

LabGuest Lab::add_guest(const std::string& name) {
  if (!valid_name(name, kMaxGuestName) || name == "host" || name == "inet")
    throw std::invalid_argument("bad guest name '" + name + "': 1-15 of [A-Za-z0-9_], not host/inet");
  for (const auto& g : guests_)
    if (g.name == name) throw std::invalid_argument("guest '" + name + "' already exists");
  LabGuest g = lab_plan::guest(prefix_, name, static_cast<unsigned>(guests_.size()));

  LabState state(prefix_);
  state.add_guest(name);  // before creating anything, so destroy() finds it
  create_netns(g.netns);

  net::UniqueFd host_tap, guest_tap;
  {
    NetnsScope in_host(host_netns());
    g.tap_ifindex = create_tap(g.tap_name, {g.host_mac,
                                            lab_plan::kGuestMtu,
                                            {cidr(g.gateway_ip4, lab_plan::kGuestPrefix4),
                                             cidr(g.gateway_ip6, lab_plan::kGuestPrefix6)}});
    host_tap = open_tap(g.tap_name);
  }
  {
    NetnsScope in_guest(g.netns);
    skip_dad();
    RouteNetlink nl;
    bring_up_loopback(nl);
    create_tap(lab_plan::kGuestEth,
               {g.guest_mac,
                lab_plan::kGuestMtu,
                {cidr(g.guest_ip4, lab_plan::kGuestPrefix4), cidr(g.guest_ip6, lab_plan::kGuestPrefix6)}});
    guest_tap = open_tap(lab_plan::kGuestEth);
    nl.add_route("0.0.0.0/0", net::to_string(g.gateway_ip4));
    nl.add_route("::/0", net::to_string(g.gateway_ip6));
  }
  pid_t pump = spawn_pump_process(host_tap.get(), guest_tap.get());
  try {
    state.write_pump_pid(name, pump);
  } catch (...) {
    stop_pump_process(pump);  // unrecorded, nothing else could ever stop it
    throw;
  }
  // Both TAPs have carrier since their fds were opened above.
  wait_settled(host_netns(), {g.tap_name});
  wait_settled(g.netns, {"lo", lab_plan::kGuestEth});
  guests_.push_back(g);
  return g;
}

const LabGuest& Lab::guest(const std::string& name) const {
  for (const auto& g : guests_)
    if (g.name == name) return g;
  throw std::out_of_range("lab '" + prefix_ + "' has no guest '" + name + "'");
}

std::optional<pid_t> Lab::pump_pid(const std::string& guest) const {
  auto pid = LabState(prefix_).pump_pid(guest);
  if (pid && pump_process_running(*pid)) return pid;
  return std::nullopt;
}

}  // namespace zn::vmm
