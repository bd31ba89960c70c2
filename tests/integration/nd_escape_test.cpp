// Neighbour discovery as a covert channel, with real traffic: a guest sends
// RS/NS/NA with hop limit 255 from its own address to an internet address
// (the lab host forwards, as a VM host does) and a raw ICMPv6 socket in the
// stand-in internet records what arrives. With the datapath attached nothing
// may arrive; with it detached from the same TAP the same messages do arrive,
// which shows the listener, the route and the host's forwarding all work.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "common/netns.h"
#include "integration/lab_datapath.h"
#include "support/packet_builder.h"
#include "userspace/datapath/tc_attachment.h"
#include "userspace/datapath/verdict_names.h"
#include "userspace/net/address.h"
#include "userspace/net/unique_fd.h"

namespace zn::test {
namespace {

using namespace std::chrono_literals;

constexpr char kOffLink[] = "2001:db8:18::13";  // on the stand-in internet's lo
constexpr uint8_t kRs = 133, kNs = 135, kNa = 136;

sockaddr_in6 sockaddr6(const in6_addr& a) {
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = a;
  return sa;
}

// Every ICMPv6 message delivered to the namespace it was opened in, with the
// source address; raw delivery happens before neighbour discovery would
// discard a message whose hop limit says it was routed.
class Icmp6Recorder {
 public:
  explicit Icmp6Recorder(const std::string& netns) {
    NetnsScope in_ns(netns);
    fd_ = zn::net::UniqueFd(::socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
    if (!fd_) throw std::system_error(errno, std::generic_category(), "raw ICMPv6 socket");
    timeval tv{0, 100000};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    thread_ = std::thread([this] { loop(); });
  }
  ~Icmp6Recorder() {
    stop_ = true;
    thread_.join();
  }
  // ND messages (types 133-137) received so far from source `from`.
  size_t nd_from(const in6_addr& from) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& [src, type] : seen_)
      if (std::memcmp(&src, &from, sizeof from) == 0 && type >= kRs && type <= 137) ++n;
    return n;
  }

 private:
  void loop() {
    uint8_t buf[2048];
    while (!stop_) {
      sockaddr_in6 from{};
      socklen_t len = sizeof from;
      ssize_t n = ::recvfrom(fd_.get(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 1) continue;
      std::lock_guard lock(mu_);
      seen_.emplace_back(from.sin6_addr, buf[0]);
    }
  }
  zn::net::UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::pair<in6_addr, uint8_t>> seen_;
  std::thread thread_;
};

class NdEscapeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { env_ = new LabDatapath({"g0"}, 31); }
  static void TearDownTestSuite() {
    delete env_;
    env_ = nullptr;
  }
  static const vmm::LabGuest& g0() { return env_->guest(0); }

  // The messages of the reported escape, each to an internet address, from
  // the guest's own global address, hop limit 255: well-formed RS, NS and NA,
  // and one NS carrying 64 arbitrary bytes in an option. Returns how many.
  static size_t send_nd_offlink() {
    const vmm::LabGuest& g = g0();
    const in6_addr offlink = ip6(kOffLink);
    const Bytes slla = nd_lladdr(1, g.guest_mac), tlla = nd_lladdr(2, g.guest_mac);
    const std::vector<Bytes> messages = {
        icmp6(kNs, concat(nd_target(offlink), slla)),
        icmp6(kNs, concat(nd_target(g.gateway_ip6), slla)),
        icmp6(kNa, concat(nd_target(g.guest_ip6, 0x60), tlla)),
        icmp6(kRs, concat(Bytes(4, 0), slla)),
        icmp6(kNs, concat(nd_target(offlink), nd_option(0x99, Bytes(62, 'x')))),
    };
    NetnsScope in_guest(g.netns);
    zn::net::UniqueFd fd(::socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6));
    if (!fd) throw std::system_error(errno, std::generic_category(), "raw ICMPv6 socket");
    const int hops = 255;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_UNICAST_HOPS, &hops, sizeof hops);
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof hops);
    const sockaddr_in6 dst = sockaddr6(offlink);
    for (const Bytes& m : messages)  // the kernel fills in the ICMPv6 checksum
      if (::sendto(fd.get(), m.data(), m.size(), 0, reinterpret_cast<const sockaddr*>(&dst), sizeof dst) !=
          static_cast<ssize_t>(m.size()))
        throw std::system_error(errno, std::generic_category(), "sendto " + std::string(kOffLink));
    return messages.size();
  }

  static void set_attached(bool attached) {
    NetnsScope in_host(env_->lab().host_netns());
    auto a = dp::TcAttachment::attach(g0().tap_ifindex, env_->datapath().ingress_prog_fd(),
                                      env_->datapath().egress_prog_fd());
    if (attached)
      a.release();  // the environment's own attachment removes it at teardown
    else
      a.detach();
  }

  static uint64_t nd_drops() {
    auto c = env_->maps().counters(env_->session_idx(0));
    return c[ZN_DROP_ND_SCOPE] + c[ZN_DROP_ND_MALFORMED] + c[ZN_DROP_ND_SPOOF];
  }

  // Waits (bounded) until the recorder holds at least `want` ND messages from the guest.
  static bool arrives(Icmp6Recorder& inet, size_t want) {
    for (int i = 0; i < 60 && inet.nd_from(g0().guest_ip6) < want; ++i) std::this_thread::sleep_for(100ms);
    return inet.nd_from(g0().guest_ip6) >= want;
  }

  static LabDatapath* env_;
};
LabDatapath* NdEscapeTest::env_ = nullptr;

TEST_F(NdEscapeTest, NeighbourDiscoveryToAnInternetAddressNeverArrives) {
  Icmp6Recorder inet(env_->lab().inet_netns());

  // Positive control first: the same TAP without the datapath. The host
  // forwards every message, the listener sees them; this also settles the
  // host's neighbour entries, so a leak below would arrive within moments.
  set_attached(false);
  const size_t sent = send_nd_offlink();
  ASSERT_TRUE(arrives(inet, sent)) << "without the datapath the listener saw " << inet.nd_from(g0().guest_ip6)
                                   << " of " << sent << ": the control proves nothing";
  set_attached(true);
  const size_t control = inet.nd_from(g0().guest_ip6);

  const uint64_t drops_before = nd_drops();
  send_nd_offlink();
  for (int i = 0; i < 50 && nd_drops() - drops_before < sent; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(nd_drops() - drops_before, sent) << "each message judged and dropped as neighbour discovery";
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(inet.nd_from(g0().guest_ip6), control) << "neighbour discovery left the link";
  EXPECT_GT(env_->maps().counters(env_->session_idx(0))[ZN_DROP_ND_SCOPE], 0u);

  // And the listener was still listening: detached again, the messages arrive.
  set_attached(false);
  send_nd_offlink();
  EXPECT_TRUE(arrives(inet, control + sent));
  set_attached(true);
}

// The link-scoped forms still work for real: the guest's kernel resolves its
// gateway and answers the host's solicitations through the datapath, so IPv6
// to and from the TAP's address keeps working, and pass:nd counts it.
TEST_F(NdEscapeTest, GuestKernelNeighbourDiscoveryStillPasses) {
  const auto before = env_->maps().counters(env_->session_idx(0));
  // Flush the guest's entry for the gateway so its kernel must solicit again.
  std::string cmd = "ip netns exec " + g0().netns + " ip -6 neigh flush dev eth0";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  cmd = "ip netns exec " + g0().netns + " ping -6 -c 1 -W 2 " + zn::net::to_string(g0().gateway_ip6) +
        " >/dev/null 2>&1";
  (void)std::system(cmd.c_str());  // the echo itself is dropped (drop:icmp); resolution is what counts
  bool resolved = false;
  for (int i = 0; i < 30 && !resolved; ++i) {
    std::this_thread::sleep_for(100ms);
    auto c = env_->maps().counters(env_->session_idx(0));
    resolved = c[ZN_PASS_ND] > before[ZN_PASS_ND] && c[ZN_DROP_ICMP] > before[ZN_DROP_ICMP];
  }
  EXPECT_TRUE(resolved) << "the guest's solicitation for its gateway did not pass";
  const auto after = env_->maps().counters(env_->session_idx(0));
  EXPECT_EQ(after[ZN_DROP_ND_SCOPE], before[ZN_DROP_ND_SCOPE]);
  EXPECT_EQ(after[ZN_DROP_ND_MALFORMED], before[ZN_DROP_ND_MALFORMED]);
  EXPECT_EQ(after[ZN_DROP_ND_SPOOF], before[ZN_DROP_ND_SPOOF]);
}

}  // namespace
}  // namespace zn::test
