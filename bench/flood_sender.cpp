// The flood comparison's tools (bench/sections/flood.sh): a guest that floods
// TCP SYNs through an AF_PACKET socket, the host's listeners that steered
// packets land on, and the zeroness datapath attached to the host side of the
// veth with N sessions. The kernel has no pktgen, so the guest is this.
//
//   flood_sender send --iface IF --src-mac M --dst-mac M --src-ip A --dst-ip A
//                     --dport P --seconds S
//       sendmmsg() of 64 prebuilt SYNs per call (source ports cycling over
//       1024) until S seconds pass; prints "SENT <packets> <seconds>".
//   flood_sender listen
//       transparent TCP 127.0.0.1:15001 (the proxy) and TCP+UDP :15053 (DNS),
//       marked ZN_MARK_HOST_REPLY like the real ones; until killed.
//   flood_sender zeroness --iface IF --guest-mac M --guest-ip A --gateway-ip A
//                         --sessions N
//       loads the datapath (unpinned), writes N sessions (the veth's and N-1
//       on ifindexes no device has), attaches to IF, then answers each
//       "counters" line on stdin with "COUNTERS steer=<n> drop=<n>" (the
//       veth session's pass:steer and drop:tcp_port); detaches at EOF.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "userspace/datapath/datapath.h"
#include "userspace/datapath/maps.h"
#include "userspace/datapath/tc_attachment.h"
#include "userspace/net/transparent_socket.h"
#include "userspace/net/unique_fd.h"
#include "zn_abi.h"

namespace {

using Bytes = std::vector<uint8_t>;
using Args = std::map<std::string, std::string>;

Args parse_args(int argc, char** argv, int first) {
  Args out;
  for (int i = first; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0)
      throw std::invalid_argument(std::string("bad argument ") + argv[i]);
    out[argv[i] + 2] = argv[i + 1];
  }
  return out;
}

const std::string& need(const Args& a, const char* name) {
  auto it = a.find(name);
  if (it == a.end()) throw std::invalid_argument(std::string("missing --") + name);
  return it->second;
}

std::array<uint8_t, 6> mac(const std::string& text) {
  std::array<uint8_t, 6> m{};
  unsigned v[6];
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6)
    throw std::invalid_argument("bad MAC " + text);
  for (int i = 0; i < 6; ++i) m[i] = static_cast<uint8_t>(v[i]);
  return m;
}

in_addr ip4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) throw std::invalid_argument("bad IPv4 " + text);
  return a;
}

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

uint32_t add_words(const uint8_t* p, size_t len, uint32_t sum = 0) {
  for (size_t i = 0; i + 1 < len; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  if (len & 1) sum += static_cast<uint32_t>(p[len - 1] << 8);
  return sum;
}

// Ethernet + IPv4 + TCP SYN, checksums right (the host stack checks the TCP
// one when the SYN reaches a listener), padded to the 60-byte minimum.
Bytes syn_frame(const std::array<uint8_t, 6>& src_mac, const std::array<uint8_t, 6>& dst_mac, in_addr src,
                in_addr dst, uint16_t sport, uint16_t dport) {
  Bytes f(14 + 20 + 20, 0);
  std::memcpy(&f[0], dst_mac.data(), 6);
  std::memcpy(&f[6], src_mac.data(), 6);
  f[12] = 0x08;
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  ip[2] = 0;
  ip[3] = 40;    // total length
  ip[6] = 0x40;  // DF
  ip[8] = 64;
  ip[9] = IPPROTO_TCP;
  std::memcpy(&ip[12], &src, 4);
  std::memcpy(&ip[16], &dst, 4);
  const uint16_t ip_sum = fold(add_words(ip, 20));
  ip[10] = static_cast<uint8_t>(ip_sum >> 8);
  ip[11] = static_cast<uint8_t>(ip_sum);
  uint8_t* tcp = &f[34];
  tcp[0] = static_cast<uint8_t>(sport >> 8);
  tcp[1] = static_cast<uint8_t>(sport);
  tcp[2] = static_cast<uint8_t>(dport >> 8);
  tcp[3] = static_cast<uint8_t>(dport);
  tcp[4] = static_cast<uint8_t>(sport);  // some sequence number
  tcp[12] = 5 << 4;
  tcp[13] = 0x02;  // SYN
  tcp[14] = 0xff;  // window
  tcp[15] = 0xff;
  uint32_t sum = add_words(&ip[12], 8);  // pseudo-header: addresses, proto, length
  sum += IPPROTO_TCP + 20;
  const uint16_t tcp_sum = fold(add_words(tcp, 20, sum));
  tcp[16] = static_cast<uint8_t>(tcp_sum >> 8);
  tcp[17] = static_cast<uint8_t>(tcp_sum);
  f.resize(60, 0);
  return f;
}

int cmd_send(const Args& a) {
  const std::string& iface = need(a, "iface");
  const int ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  if (ifindex == 0) throw std::system_error(errno, std::generic_category(), "if_nametoindex " + iface);
  const auto src_mac = mac(need(a, "src-mac")), dst_mac = mac(need(a, "dst-mac"));
  const in_addr src = ip4(need(a, "src-ip")), dst = ip4(need(a, "dst-ip"));
  const auto dport = static_cast<uint16_t>(std::stoi(need(a, "dport")));
  const double seconds = std::stod(need(a, "seconds"));

  constexpr unsigned kFrames = 1024, kBatch = 64;
  std::vector<Bytes> frames;
  for (unsigned i = 0; i < kFrames; ++i)
    frames.push_back(syn_frame(src_mac, dst_mac, src, dst, static_cast<uint16_t>(20000 + i), dport));

  zn::net::UniqueFd fd(::socket(AF_PACKET, SOCK_RAW, 0));
  if (fd.get() < 0) throw std::system_error(errno, std::generic_category(), "socket(AF_PACKET)");
  // Straight to the driver: the guest's own qdisc is not what is measured.
  int one = 1;
  ::setsockopt(fd.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_ifindex = ifindex;
  ll.sll_protocol = 0;  // send only: receive nothing
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ll), sizeof(ll)) != 0)
    throw std::system_error(errno, std::generic_category(), "bind AF_PACKET");

  std::vector<iovec> iov(kFrames);
  std::vector<mmsghdr> msgs(kFrames);
  for (unsigned i = 0; i < kFrames; ++i) {
    iov[i] = {frames[i].data(), frames[i].size()};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::duration<double>(seconds);
  uint64_t sent = 0;
  unsigned next = 0;
  for (unsigned n = 0;; ++n) {
    if ((n & 63) == 0 && std::chrono::steady_clock::now() >= until) break;
    const int rc = ::sendmmsg(fd.get(), &msgs[next], kBatch, 0);
    if (rc > 0) {
      sent += static_cast<uint64_t>(rc);
      next = (next + static_cast<unsigned>(rc)) % (kFrames - kBatch + 1);
    } else if (errno != ENOBUFS && errno != EAGAIN) {
      throw std::system_error(errno, std::generic_category(), "sendmmsg");
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("SENT %llu %.3f\n", static_cast<unsigned long long>(sent), took);
  return 0;
}

// Where steered packets land: the proxy's and the DNS responder's stand-ins,
// transparent and marked like them, with room for a SYN flood's backlog.
std::vector<zn::net::UniqueFd> open_listeners() {
  std::vector<zn::net::UniqueFd> out;
  const auto proxy = zn::net::make_endpoint("127.0.0.1", ZN_DEFAULT_PROXY_PORT);
  const auto dns = zn::net::make_endpoint("127.0.0.1", ZN_DEFAULT_DNS_PORT);
  out.emplace_back(zn::net::open_transparent_listener(proxy, SOCK_STREAM, 4096));
  out.emplace_back(zn::net::open_transparent_listener(dns, SOCK_STREAM, 4096));
  out.emplace_back(zn::net::open_transparent_listener(dns, SOCK_DGRAM));
  for (auto& fd : out) {
    int mark = ZN_MARK_HOST_REPLY;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) != 0)
      throw std::system_error(errno, std::generic_category(), "SO_MARK");
  }
  return out;
}

int cmd_listen() {
  auto listeners = open_listeners();
  std::printf("LISTENING\n");
  std::fflush(stdout);
  for (;;) ::pause();  // until killed: nothing is ever accepted
}

int cmd_zeroness(const Args& a) {
  const std::string& iface = need(a, "iface");
  const int ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  if (ifindex == 0) throw std::system_error(errno, std::generic_category(), "if_nametoindex " + iface);
  const unsigned sessions = static_cast<unsigned>(std::stoul(need(a, "sessions")));
  if (sessions == 0 || sessions >= ZN_MAX_SESSIONS) throw std::invalid_argument("--sessions out of range");

  auto datapath = zn::dp::Datapath::load({});
  zn::dp::DatapathMaps maps(datapath->map_fds());
  maps.set_listeners({});  // 127.0.0.1 / ::1, the default ports: open_listeners()' own
  zn::dp::SessionEntry s;
  s.session_idx = 1;
  const auto gm = mac(need(a, "guest-mac"));
  std::memcpy(s.guest_mac.data(), gm.data(), 6);
  s.guest_ip4 = ip4(need(a, "guest-ip"));
  s.gateway_ip4 = ip4(need(a, "gateway-ip"));
  maps.put_session(ifindex, s);
  // The other sessions: same shape, addresses of their own, on ifindexes
  // no device has, so they fill the session table the lookups go through.
  for (unsigned i = 2; i <= sessions; ++i) {
    zn::dp::SessionEntry o = s;
    o.session_idx = i;
    o.guest_ip4 = in_addr{htonl(ntohl(s.guest_ip4->s_addr) + 4 * i)};
    maps.put_session(static_cast<int>(1000000 + i), o);
  }
  auto attachment =
      zn::dp::TcAttachment::attach(ifindex, datapath->ingress_prog_fd(), datapath->egress_prog_fd());
  std::printf("ATTACHED\n");
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line != "counters") continue;
    const auto c = maps.counters(1);
    std::printf("COUNTERS steer=%llu drop=%llu\n", static_cast<unsigned long long>(c[ZN_PASS_STEER]),
                static_cast<unsigned long long>(c[ZN_DROP_TCP_PORT]));
    std::fflush(stdout);
  }
  attachment.detach();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: flood_sender send|listen|zeroness [--option value]...\n");
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    const Args args = parse_args(argc, argv, 2);
    if (cmd == "send") return cmd_send(args);
    if (cmd == "listen") return cmd_listen();
    if (cmd == "zeroness") return cmd_zeroness(args);
    std::fprintf(stderr, "flood_sender: unknown command %s\n", cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flood_sender: %s\n", e.what());
    return 1;
  }
}
