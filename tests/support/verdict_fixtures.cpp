#include "support/verdict_fixtures.h"

#include <bpf/bpf.h>
#include <linux/pkt_cls.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace zn::test {
namespace {

constexpr uint16_t kArp = 0x0806, kIp4 = 0x0800, kIp6 = 0x86dd;
constexpr uint8_t kNs = 135, kNa = 136, kRs = 133, kRa = 134;

// IPv6 neighbour discovery, both ways. A forwarding host routes whatever ND
// it is not the destination of, so every form the guest may send is listed
// as a positive fixture and everything around it as a hostile one: off-link
// and beyond-link-scope destinations, foreign targets and groups, and room
// for payload (options, trailing bytes, reserved bits, codes).
std::vector<VerdictFixture> nd_fixtures(const FixtureGuest& g) {
  const auto in = Direction::kIngress;
  const auto out = Direction::kEgress;
  const in6_addr unspecified = ip6("::");
  const in6_addr all_nodes = ip6("ff02::1");
  const in6_addr all_routers = ip6("ff02::2");
  const in6_addr offlink = ip6("2001:db8:18::13");       // the lab's stand-in internet
  const in6_addr other_guest = ip6("2001:db8:19:1::2");  // the next slot's guest
  const Mac attacker{0x02, 0x66, 0x66, 0x66, 0x66, 0x66};
  const Bytes slla = nd_lladdr(1, g.guest_mac);
  const Bytes tlla = nd_lladdr(2, g.guest_mac);
  const Bytes nonce = nd_option(14, Bytes{1, 2, 3, 4, 5, 6});
  auto frame = [&](const in6_addr& src, const in6_addr& dst, const Bytes& icmp, uint8_t hop = 255) {
    return eth(g.guest_mac, g.host_mac, kIp6, ipv6(src, dst, IPPROTO_ICMPV6, icmp, hop));
  };
  auto rs = [&](const in6_addr& src, const in6_addr& dst, const Bytes& options = {}) {
    return frame(src, dst, icmp6(kRs, concat(Bytes(4, 0), options)));
  };
  auto ns = [&](const in6_addr& src, const in6_addr& dst, const in6_addr& target, const Bytes& options = {}) {
    return frame(src, dst, icmp6(kNs, concat(nd_target(target), options)));
  };
  auto na = [&](const in6_addr& src, const in6_addr& dst, const in6_addr& target, const Bytes& options = {},
                uint8_t flags = 0x60) {
    return frame(src, dst, icmp6(kNa, concat(nd_target(target, flags), options)));
  };
  auto to_guest = [&](const in6_addr& src, const in6_addr& dst, uint8_t type, const Bytes& body,
                      uint8_t hop = 255) {
    return eth(g.host_mac, g.guest_mac, kIp6, ipv6(src, dst, IPPROTO_ICMPV6, icmp6(type, body), hop));
  };
  const Bytes host_slla = nd_lladdr(1, g.host_mac), host_tlla = nd_lladdr(2, g.host_mac);
  auto with_code = [](Bytes f, uint8_t code) {
    f[14 + 40 + 1] = code;
    return f;
  };
  auto with_trailer = [](Bytes f) {
    f.insert(f.end(), 8, 0xaa);
    return f;
  };

  return {
      // What a guest's stack sends: every form passes.
      {"nd_rs_all_routers", in, rs(g.guest_ip6_ll, all_routers, slla), ZN_PASS_ND, 0,
       "router solicitation to ff02::2 with the guest's link-layer address"},
      {"nd_rs_unspecified", in, rs(unspecified, all_routers), ZN_PASS_ND, 0,
       "router solicitation from :: (no address yet), no option"},
      {"nd_ns_gateway_group", in, ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, slla),
       ZN_PASS_ND, 0, "who has the gateway: its solicited-node group"},
      {"nd_ns_gateway_ll_group", in,
       ns(g.guest_ip6_ll, solicited_node(g.gateway_ip6_ll), g.gateway_ip6_ll, slla), ZN_PASS_ND, 0,
       "who has the gateway's link-local"},
      {"nd_ns_nud_gateway", in, ns(g.guest_ip6, g.gateway_ip6, g.gateway_ip6), ZN_PASS_ND, 0,
       "unreachability probe unicast to the gateway"},
      {"nd_ns_nud_gateway_ll", in, ns(g.guest_ip6_ll, g.gateway_ip6_ll, g.gateway_ip6_ll, slla), ZN_PASS_ND,
       0, "unreachability probe unicast to the gateway's link-local"},
      {"nd_ns_dad", in, ns(unspecified, solicited_node(g.guest_ip6), g.guest_ip6), ZN_PASS_ND, 0,
       "duplicate address detection from ::"},
      {"nd_ns_dad_nonce", in, ns(unspecified, solicited_node(g.guest_ip6_ll), g.guest_ip6_ll, nonce),
       ZN_PASS_ND, 0, "DAD with the nonce Linux adds (RFC 7527)"},
      {"nd_na_to_gateway", in, na(g.guest_ip6, g.gateway_ip6, g.guest_ip6, tlla), ZN_PASS_ND, 0,
       "solicited advertisement answering the gateway"},
      {"nd_na_to_gateway_ll", in, na(g.guest_ip6_ll, g.gateway_ip6_ll, g.guest_ip6_ll), ZN_PASS_ND, 0,
       "advertisement to the gateway's link-local"},
      {"nd_na_unsolicited", in, na(g.guest_ip6, all_nodes, g.guest_ip6, tlla, 0x20), ZN_PASS_ND, 0,
       "unsolicited advertisement to ff02::1"},
      // Off the link: these are what a forwarding host would route away.
      {"nd_ns_offlink_global", in, ns(g.guest_ip6, offlink, offlink), ZN_DROP_ND_SCOPE, 0,
       "solicitation to an internet address"},
      {"nd_ns_offlink_gateway_target", in, ns(g.guest_ip6, offlink, g.gateway_ip6, slla), ZN_DROP_ND_SCOPE, 0,
       "the gateway as target, an internet address as destination"},
      {"nd_rs_offlink_global", in, rs(g.guest_ip6, offlink, slla), ZN_DROP_ND_SCOPE, 0,
       "router solicitation to an internet address"},
      {"nd_na_offlink_global", in, na(g.guest_ip6, offlink, g.guest_ip6, tlla), ZN_DROP_ND_SCOPE, 0,
       "advertisement to an internet address"},
      {"nd_rs_site_multicast", in, rs(g.guest_ip6, ip6("ff05::2"), slla), ZN_DROP_ND_SCOPE, 0,
       "all site routers: beyond link scope"},
      {"nd_na_global_multicast", in, na(g.guest_ip6, ip6("ff0e::1"), g.guest_ip6, tlla), ZN_DROP_ND_SCOPE, 0,
       "global-scope multicast"},
      {"nd_ns_site_solicited_group", in, ns(g.guest_ip6, ip6("ff05::1:ff00:1"), g.gateway_ip6),
       ZN_DROP_ND_SCOPE, 0, "the gateway's solicited-node group number at site scope"},
      {"nd_ns_other_guest", in, ns(g.guest_ip6, other_guest, other_guest, slla), ZN_DROP_ND_SCOPE, 0,
       "solicitation to another guest"},
      {"nd_na_other_guest", in, na(g.guest_ip6, other_guest, g.guest_ip6, tlla), ZN_DROP_ND_SCOPE, 0,
       "advertisement to another guest"},
      {"nd_ns_all_nodes", in, ns(g.guest_ip6, all_nodes, g.gateway_ip6), ZN_DROP_ND_SCOPE, 0,
       "a solicitation goes to a solicited-node group or the target"},
      {"nd_ns_foreign_target", in, ns(g.guest_ip6, solicited_node(offlink), offlink, slla), ZN_DROP_ND_SCOPE,
       0, "who has an internet address: the gateway is the only neighbour"},
      {"nd_ns_foreign_target_to_gateway", in, ns(g.guest_ip6, g.gateway_ip6, offlink), ZN_DROP_ND_SCOPE, 0,
       "unicast to the gateway asking for another address"},
      {"nd_dad_foreign_group", in, ns(unspecified, solicited_node(g.gateway_ip6), g.guest_ip6),
       ZN_DROP_ND_SCOPE, 0, "DAD sent to another address's solicited-node group"},
      {"nd_dad_offlink", in, ns(unspecified, offlink, g.guest_ip6), ZN_DROP_ND_SCOPE, 0,
       "DAD sent to an internet address"},
      {"nd_dad_foreign_target", in, ns(unspecified, solicited_node(g.gateway_ip6), g.gateway_ip6),
       ZN_DROP_ND_SPOOF, 0, "DAD for the gateway's address"},
      // Spoofing.
      {"nd_na_claims_gateway", in, na(g.guest_ip6, all_nodes, g.gateway_ip6, tlla), ZN_DROP_ND_SPOOF, 0,
       "the guest claims the gateway's address"},
      {"nd_na_from_unspecified", in, na(unspecified, all_nodes, g.guest_ip6), ZN_DROP_ND_SPOOF, 0,
       "an advertisement needs a source"},
      {"nd_router_advert", in, frame(g.guest_ip6_ll, all_nodes, icmp6(kRa, Bytes(12, 0))), ZN_DROP_ND_SPOOF,
       0, "a guest is no router"},
      {"nd_redirect", in, frame(g.guest_ip6_ll, g.gateway_ip6_ll, icmp6(137, Bytes(36, 0))), ZN_DROP_ND_SPOOF,
       0, "redirects are a router's"},
      {"nd_hop_limit_64", in,
       frame(g.guest_ip6, solicited_node(g.gateway_ip6), icmp6(kNs, nd_target(g.gateway_ip6)), 64),
       ZN_DROP_ND_SPOOF, 0, "routed (off-link) neighbour discovery"},
      {"nd_foreign_source", in, ns(ip6("fe80::1"), solicited_node(g.gateway_ip6), g.gateway_ip6),
       ZN_DROP_ND_SPOOF, 0, "solicitation from a link-local that is not the guest's"},
      {"nd_ns_slla_foreign_mac", in,
       ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, nd_lladdr(1, attacker)),
       ZN_DROP_ND_SPOOF, 0, "source link-layer address of another MAC"},
      {"nd_na_tlla_foreign_mac", in, na(g.guest_ip6, g.gateway_ip6, g.guest_ip6, nd_lladdr(2, attacker)),
       ZN_DROP_ND_SPOOF, 0, "target link-layer address of another MAC"},
      // Room for payload.
      {"nd_ns_two_options", in,
       ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, concat(slla, slla)),
       ZN_DROP_ND_MALFORMED, 0, "two source link-layer options"},
      {"nd_ns_oversized_option", in,
       ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, nd_option(1, Bytes(14, 0x41), 2)),
       ZN_DROP_ND_MALFORMED, 0, "a 16-byte link-layer option"},
      {"nd_na_large_option", in, na(g.guest_ip6, all_nodes, g.guest_ip6, nd_option(2, Bytes(1014, 0x41))),
       ZN_DROP_ND_MALFORMED, 0, "a kilobyte of option"},
      {"nd_ns_unknown_option", in,
       ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, nd_option(200, Bytes(6, 0x41))),
       ZN_DROP_ND_MALFORMED, 0, "option type 200"},
      {"nd_rs_mtu_option", in, rs(g.guest_ip6, all_routers, nd_option(5, Bytes(6, 0))), ZN_DROP_ND_MALFORMED,
       0, "an MTU option has no place in a solicitation"},
      {"nd_na_source_ll_option", in, na(g.guest_ip6, all_nodes, g.guest_ip6, slla), ZN_DROP_ND_MALFORMED, 0,
       "an advertisement carries the target link-layer option, not the source's"},
      {"nd_ns_nonce_from_address", in, ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6, nonce),
       ZN_DROP_ND_MALFORMED, 0, "a nonce belongs to DAD only"},
      {"nd_dad_slla", in, ns(unspecified, solicited_node(g.guest_ip6), g.guest_ip6, slla),
       ZN_DROP_ND_MALFORMED, 0, "DAD must not carry a link-layer address (RFC 4861 4.3)"},
      {"nd_rs_unspecified_slla", in, rs(unspecified, all_routers, slla), ZN_DROP_ND_MALFORMED, 0,
       "a solicitation from :: must not carry a link-layer address"},
      {"nd_ns_trailing_bytes", in,
       with_trailer(ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6)), ZN_DROP_ND_MALFORMED, 0,
       "8 bytes after the IPv6 payload"},
      {"nd_ns_code_1", in, with_code(ns(g.guest_ip6, solicited_node(g.gateway_ip6), g.gateway_ip6), 1),
       ZN_DROP_ND_MALFORMED, 0, "ICMPv6 code 1"},
      {"nd_rs_reserved_bits", in, frame(g.guest_ip6, all_routers, icmp6(kRs, Bytes{0xde, 0xad, 0xbe, 0xef})),
       ZN_DROP_ND_MALFORMED, 0, "32 reserved bits carrying data"},
      {"nd_na_reserved_bits", in, na(g.guest_ip6, all_nodes, g.guest_ip6, tlla, 0x3f), ZN_DROP_ND_MALFORMED,
       0, "reserved bits set beside the flags"},
      {"nd_ns_short", in, frame(g.guest_ip6, solicited_node(g.gateway_ip6), icmp6(kNs, Bytes(12, 0))),
       ZN_DROP_ND_MALFORMED, 0, "solicitation shorter than its target"},
      // From the host to the guest.
      {"egress_nd_advert", out,
       to_guest(g.gateway_ip6, g.guest_ip6, kNa, concat(nd_target(g.gateway_ip6, 0xc0), host_tlla)),
       ZN_PASS_ND, 0, "the host answers neighbour discovery"},
      {"egress_nd_advert_all_nodes", out,
       to_guest(g.gateway_ip6_ll, all_nodes, kNa, nd_target(g.gateway_ip6_ll, 0xa0)), ZN_PASS_ND, 0,
       "unsolicited advertisement of the gateway's link-local"},
      {"egress_nd_solicit_group", out,
       to_guest(g.gateway_ip6, solicited_node(g.guest_ip6), kNs, concat(nd_target(g.guest_ip6), host_slla)),
       ZN_PASS_ND, 0, "the host resolves the guest"},
      {"egress_nd_solicit_ll", out,
       to_guest(g.gateway_ip6_ll, solicited_node(g.guest_ip6_ll), kNs,
                concat(nd_target(g.guest_ip6_ll), host_slla)),
       ZN_PASS_ND, 0, "the host resolves the guest's link-local"},
      {"egress_nd_nud", out, to_guest(g.gateway_ip6, g.guest_ip6, kNs, nd_target(g.guest_ip6)), ZN_PASS_ND, 0,
       "the host probes the guest unicast"},
      {"egress_nd_host_dad", out,
       to_guest(ip6("::"), solicited_node(g.gateway_ip6_ll), kNs,
                concat(nd_target(g.gateway_ip6_ll), nd_option(14, Bytes(6, 7)))),
       ZN_PASS_ND, 0, "the host's DAD for its link-local on the TAP"},
      {"egress_nd_host_dad_foreign_target", out,
       to_guest(ip6("::"), solicited_node(g.guest_ip6), kNs, nd_target(g.guest_ip6)), ZN_DROP_ND_SPOOF, 0,
       "DAD from :: towards the guest for the guest's own address"},
      {"egress_nd_forwarded", out, to_guest(offlink, g.guest_ip6, kNs, nd_target(g.guest_ip6), 254),
       ZN_DROP_UNSOLICITED, 0, "ND-shaped packet routed in from the internet"},
      {"egress_nd_from_internet_source", out, to_guest(offlink, g.guest_ip6, kNa, nd_target(offlink, 0x60)),
       ZN_DROP_ND_SPOOF, 0, "hop limit 255 but a source that is not the gateway"},
      {"egress_nd_router_advert", out, to_guest(g.gateway_ip6_ll, all_nodes, kRa, Bytes(12, 0)),
       ZN_DROP_ND_SPOOF, ZN_MARK_HOST_REPLY, "no router advertisements, marked or not"},
      {"egress_nd_redirect", out, to_guest(g.gateway_ip6_ll, g.guest_ip6_ll, 137, Bytes(36, 0)),
       ZN_DROP_ND_SPOOF, 0, "no redirects"},
      {"egress_nd_advert_claims_guest", out,
       to_guest(g.gateway_ip6, all_nodes, kNa, nd_target(g.guest_ip6, 0x20)), ZN_DROP_ND_SPOOF, 0,
       "the host's side claiming the guest's address"},
      {"egress_nd_solicit_foreign_target", out,
       to_guest(g.gateway_ip6, solicited_node(offlink), kNs, nd_target(offlink)), ZN_DROP_ND_SCOPE, 0,
       "asking the guest about an address it does not have"},
      {"egress_nd_advert_other_guest", out,
       to_guest(g.gateway_ip6, other_guest, kNa, nd_target(g.gateway_ip6, 0x40)), ZN_DROP_ND_SCOPE, 0,
       "advertisement addressed to another guest"},
      {"egress_nd_unknown_option", out,
       to_guest(g.gateway_ip6, g.guest_ip6, kNa,
                concat(nd_target(g.gateway_ip6, 0x40), nd_option(200, Bytes(6, 0)))),
       ZN_DROP_ND_MALFORMED, 0, "option type 200 towards the guest"},
  };
}

}  // namespace

void PrintTo(const VerdictFixture& f, std::ostream* os) { *os << f.name << " (" << f.why << ")"; }

dp::SessionEntry FixtureGuest::session() const {
  dp::SessionEntry s;
  s.session_idx = kSessionIdx;
  s.guest_mac = guest_mac;
  s.guest_ip4 = guest_ip4;
  s.gateway_ip4 = gateway_ip4;
  s.guest_ip6 = guest_ip6;
  s.guest_ip6_ll = guest_ip6_ll;
  s.gateway_ip6 = gateway_ip6;
  s.gateway_ip6_ll = gateway_ip6_ll;
  s.steered_ports = {80, 443};
  s.exposed_ports = {8080};
  s.event_rate = 1000;
  s.event_burst = 100000;
  return s;
}

std::vector<VerdictFixture> verdict_fixtures() {
  const FixtureGuest g;
  const auto in = Direction::kIngress;
  const auto out = Direction::kEgress;
  const in_addr upstream = ip4("198.18.0.10");
  const in_addr google = ip4("8.8.8.8");
  const in6_addr upstream6 = ip6("2001:db8:18::10");
  const in6_addr google6 = ip6("2001:4860:4860::8888");
  const Mac bcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const Mac zero{};
  const Mac attacker{0x02, 0x66, 0x66, 0x66, 0x66, 0x66};
  auto from_guest4 = [&](uint8_t proto, const Bytes& l4, Ip4Options o = {}) {
    return eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, upstream, proto, l4, o));
  };
  auto to_guest4 = [&](const Bytes& l4) {
    return eth(g.host_mac, g.guest_mac, kIp4, ipv4(upstream, g.guest_ip4, IPPROTO_TCP, l4));
  };
  auto from_guest6 = [&](const in6_addr& dst, uint8_t nh, const Bytes& payload, uint8_t hop = 64,
                         const in6_addr* src = nullptr) {
    return eth(g.guest_mac, g.host_mac, kIp6, ipv6(src ? *src : g.guest_ip6, dst, nh, payload, hop));
  };
  const Bytes arp_req = arp(1, g.guest_mac, g.guest_ip4, zero, g.gateway_ip4);
  const Bytes tcp443 = ipv4(g.guest_ip4, upstream, IPPROTO_TCP, tcp(40000, 443));
  // Tags followed by a whole packet: the stack strips well-formed tags before
  // TC ingress, and the program must still see that there was one.
  auto vlan_tagged = [&](Bytes tags) {
    tags.insert(tags.end(), tcp443.begin(), tcp443.end());
    return tags;
  };

  std::vector<VerdictFixture> fixtures = {
      // ARP
      {"arp_request", in, eth(g.guest_mac, bcast, kArp, arp_req), ZN_PASS_ARP, 0,
       "the guest asks for its gateway"},
      {"arp_probe", in, eth(g.guest_mac, bcast, kArp, arp(1, g.guest_mac, ip4("0.0.0.0"), zero, g.guest_ip4)),
       ZN_PASS_ARP, 0, "address-conflict probe from 0.0.0.0"},
      {"arp_claims_gateway", in,
       eth(g.guest_mac, bcast, kArp, arp(2, g.guest_mac, g.gateway_ip4, zero, g.gateway_ip4)),
       ZN_DROP_ARP_SPOOF, 0, "gratuitous ARP taking over the gateway address"},
      {"arp_foreign_sender_mac", in,
       eth(g.guest_mac, bcast, kArp, arp(1, attacker, g.guest_ip4, zero, g.gateway_ip4)),
       ZN_DROP_ARP_SPOOF, 0, "ARP sender MAC that is not the guest's"},
      {"arp_bad_hlen", in,
       eth(g.guest_mac, bcast, kArp, [&] { Bytes b = arp_req; b[4] = 8; return b; }()),
       ZN_DROP_ARP_MALFORMED, 0, "hardware length 8"},
      {"arp_truncated", in, eth(g.guest_mac, bcast, kArp, truncate(arp_req, 20)),
       ZN_DROP_TRUNCATED_ARP, 0, "ARP cut after 20 bytes"},
      // Ethernet
      {"eth_foreign_source_mac", in, eth(attacker, g.host_mac, kIp4, tcp443), ZN_DROP_MAC_SPOOF, 0,
       "frame from a MAC that is not the guest's"},
      {"vlan_8021q", in, eth(g.guest_mac, g.host_mac, 0x8100, vlan_tagged(Bytes{0, 5, 0x08, 0x00})),
       ZN_DROP_VLAN, 0, "802.1Q tag"},
      {"vlan_8021ad", in,
       eth(g.guest_mac, g.host_mac, 0x88a8, vlan_tagged(Bytes{0, 5, 0x81, 0x00, 0, 6, 0x08, 0x00})),
       ZN_DROP_VLAN, 0, "802.1ad (QinQ) tag"},
      {"ethertype_lldp", in, eth(g.guest_mac, g.host_mac, 0x88cc, Bytes(40, 0)), ZN_DROP_ETHERTYPE, 0,
       "neither ARP nor IP"},
      // IPv4
      {"ip4_spoofed_source", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(ip4("198.19.0.99"), upstream, IPPROTO_TCP, tcp(40000, 443))),
       ZN_DROP_IP4_SPOOF, 0, "source is another address"},
      {"ip4_more_fragments", in, from_guest4(IPPROTO_TCP, tcp(40000, 443), {.frag_off = 0x2000}),
       ZN_DROP_FRAGMENT, 0, "first fragment (MF set)"},
      {"ip4_fragment_offset", in, from_guest4(IPPROTO_TCP, tcp(40000, 443), {.frag_off = 0x0010}),
       ZN_DROP_FRAGMENT, 0, "later fragment (offset 16)"},
      {"ip4_options", in, from_guest4(IPPROTO_TCP, tcp(40000, 443), {.ihl = 6}), ZN_DROP_IP4_OPTIONS, 0,
       "IHL 6: options"},
      {"ip4_bad_version", in, from_guest4(IPPROTO_TCP, tcp(40000, 443), {.version = 5}),
       ZN_DROP_IP_MALFORMED, 0, "version 5 under the IPv4 ethertype"},
      {"ip4_ihl_too_small", in, from_guest4(IPPROTO_TCP, tcp(40000, 443), {.ihl = 4}),
       ZN_DROP_IP_MALFORMED, 0, "IHL 4"},
      {"ip4_truncated_header", in, truncate(from_guest4(IPPROTO_TCP, tcp(40000, 443)), 14 + 12),
       ZN_DROP_TRUNCATED_IP4, 0, "IPv4 header cut at 12 bytes", true},
      {"ip4_total_length_past_frame", in,
       from_guest4(IPPROTO_TCP, tcp(40000, 443), {.tot_len_delta = 100}), ZN_DROP_TRUNCATED_IP4, 0,
       "total length claims 100 bytes more than were sent"},
      {"tcp_truncated", in, from_guest4(IPPROTO_TCP, truncate(tcp(40000, 443), 12)),
       ZN_DROP_TRUNCATED_L4, 0, "TCP header cut at 12 bytes"},
      {"udp_truncated", in, from_guest4(IPPROTO_UDP, truncate(udp(40000, 53), 4)),
       ZN_DROP_TRUNCATED_L4, 0, "UDP header cut at 4 bytes"},
      {"udp53_to_8888", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, google, IPPROTO_UDP, udp(40000, 53, Bytes(30, 0)))),
       ZN_DROP_ASSIGN_FAILED, 0, "DNS to a hard-coded resolver reaches the DNS socket lookup"},
      {"tcp53_to_8888", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, google, IPPROTO_TCP, tcp(40000, 53))),
       ZN_DROP_ASSIGN_FAILED, 0, "DNS over TCP reaches the DNS listener lookup"},
      {"udp443_quic", in, from_guest4(IPPROTO_UDP, udp(40000, 443, Bytes(30, 0))), ZN_DROP_UDP, 0,
       "QUIC is not steered"},
      {"icmp_echo", in, from_guest4(IPPROTO_ICMP, icmp_echo()), ZN_DROP_ICMP, 0, "ping"},
      {"gre", in, from_guest4(47, Bytes(8, 0)), ZN_DROP_PROTO, 0, "GRE tunnel"},
      {"tcp22", in, from_guest4(IPPROTO_TCP, tcp(40000, 22)), ZN_DROP_TCP_PORT, 0, "ssh out"},
      {"tcp443_to_gateway", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, g.gateway_ip4, IPPROTO_TCP, tcp(40000, 443))),
       ZN_DROP_HOST_SERVICE, 0, "the host's own services on the TAP address"},
      {"tcp443_steered", in, eth(g.guest_mac, g.host_mac, kIp4, tcp443), ZN_DROP_ASSIGN_FAILED, 0,
       "HTTPS reaches the proxy listener lookup"},
      {"tcp5432_l4_allowed", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, ip4("198.18.0.20"), IPPROTO_TCP, tcp(40000, 5432))),
       ZN_DROP_ASSIGN_FAILED, 0, "L4 rule 198.18.0.20/32 tcp/5432 reaches the proxy lookup"},
      {"tcp5433_not_l4_allowed", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, ip4("198.18.0.20"), IPPROTO_TCP, tcp(40000, 5433))),
       ZN_DROP_TCP_PORT, 0, "the L4 rule names port 5432 only"},
      {"tcp_any_port_prefix", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, ip4("198.18.1.77"), IPPROTO_TCP, tcp(40000, 9999))),
       ZN_DROP_ASSIGN_FAILED, 0, "L4 rule 198.18.1.0/24 any port"},
      // IPv6
      {"ip6_spoofed_source", in,
       [&] { in6_addr other = ip6("2001:db8:19::99"); return from_guest6(upstream6, IPPROTO_TCP, tcp(40000, 443), 64, &other); }(),
       ZN_DROP_IP6_SPOOF, 0, "source is another address"},
      {"ip6_fragment_header", in, from_guest6(upstream6, IPPROTO_FRAGMENT, Bytes(8 + 20, 0)),
       ZN_DROP_FRAGMENT, 0, "IPv6 fragment header"},
      {"ip6_hop_by_hop", in, from_guest6(upstream6, IPPROTO_HOPOPTS, Bytes(8 + 20, 0)),
       ZN_DROP_IP6_EXTHDR, 0, "extension headers are not parsed, so refused"},
      {"ip6_truncated_header", in, truncate(from_guest6(upstream6, IPPROTO_TCP, tcp(40000, 443)), 14 + 30),
       ZN_DROP_TRUNCATED_IP6, 0, "IPv6 header cut at 30 bytes", true},
      {"ip6_payload_past_frame", in,
       [&] { Bytes b = from_guest6(upstream6, IPPROTO_TCP, tcp(40000, 443)); b.resize(b.size() - 8); return b; }(),
       ZN_DROP_TRUNCATED_IP6, 0, "payload length larger than the frame"},
      {"ip6_tcp22_outside", in, from_guest6(upstream6, IPPROTO_TCP, tcp(40000, 22)), ZN_DROP_TCP_PORT, 0,
       "ssh to an outside IPv6 address"},
      {"ip6_tcp443_steered", in, from_guest6(upstream6, IPPROTO_TCP, tcp(40000, 443)), ZN_DROP_ASSIGN_FAILED, 0,
       "HTTPS over IPv6 reaches the proxy lookup"},
      {"ip6_tcp443_to_gateway", in, from_guest6(g.gateway_ip6, IPPROTO_TCP, tcp(40000, 443)),
       ZN_DROP_HOST_SERVICE, 0, "the host's TAP address over IPv6"},
      {"ip6_udp53", in, from_guest6(google6, IPPROTO_UDP, udp(40000, 53, Bytes(30, 0))), ZN_DROP_ASSIGN_FAILED, 0,
       "DNS over IPv6 reaches the DNS socket lookup"},
      {"ip6_udp443", in, from_guest6(upstream6, IPPROTO_UDP, udp(40000, 443, Bytes(30, 0))), ZN_DROP_UDP, 0,
       "QUIC over IPv6"},
      {"ip6_mld_report", in,
       from_guest6(ip6("ff02::16"), IPPROTO_HOPOPTS, Bytes{58, 0, 5, 2, 0, 0, 1, 0, 143, 0, 0, 0, 0, 0, 0, 0},
                   1, &g.guest_ip6_ll),
       ZN_DROP_IP6_MULTICAST, 0, "MLD report (hop-by-hop + ICMPv6 143) to ff02::16"},
      {"ip6_mdns", in, from_guest6(ip6("ff02::fb"), IPPROTO_UDP, udp(5353, 5353, Bytes(20, 0))),
       ZN_DROP_IP6_MULTICAST, 0, "mDNS query"},
      {"ip6_echo", in, from_guest6(upstream6, IPPROTO_ICMPV6, icmp6(128, Bytes(4, 0))), ZN_DROP_ICMP, 0,
       "ping6"},
      // Egress (towards the guest)
      {"egress_arp", out, eth(g.host_mac, g.guest_mac, kArp, arp(2, g.host_mac, g.gateway_ip4, g.guest_mac, g.guest_ip4)),
       ZN_PASS_ARP, 0, "the host answers ARP"},
      {"egress_host_reply", out, to_guest4(tcp(443, 40000, 0x12)), ZN_PASS_HOST_REPLY, ZN_MARK_HOST_REPLY,
       "SYN-ACK from the proxy's marked socket"},
      {"egress_unmarked", out, to_guest4(tcp(443, 40000, 0x12)), ZN_DROP_UNSOLICITED, 0,
       "forwarded or unmarked traffic"},
      {"egress_steer_mark_only", out, to_guest4(tcp(22, 40000, 0x02)), ZN_DROP_UNSOLICITED, ZN_MARK_STEER,
       "the steering mark is no licence to reach the guest"},
      {"egress_ip6_unmarked", out,
       eth(g.host_mac, g.guest_mac, kIp6, ipv6(upstream6, g.guest_ip6, IPPROTO_UDP, udp(53, 40000))),
       ZN_DROP_UNSOLICITED, 0, "unsolicited IPv6"},
      // Declared ports: zerod's marked connection from the gateway, and nothing else.
      {"egress_exposed", out,
       eth(g.host_mac, g.guest_mac, kIp4, ipv4(g.gateway_ip4, g.guest_ip4, IPPROTO_TCP, tcp(40000, 8080, 0x02))),
       ZN_PASS_EXPOSED, ZN_MARK_EXPOSE, "zerod's SYN to a declared port"},
      {"egress_exposed_ip6", out,
       eth(g.host_mac, g.guest_mac, kIp6, ipv6(g.gateway_ip6, g.guest_ip6, IPPROTO_TCP, tcp(40000, 8080, 0x02))),
       ZN_PASS_EXPOSED, ZN_MARK_EXPOSE, "zerod's SYN to a declared port over IPv6"},
      {"egress_exposed_undeclared_port", out,
       eth(g.host_mac, g.guest_mac, kIp4, ipv4(g.gateway_ip4, g.guest_ip4, IPPROTO_TCP, tcp(40000, 9090, 0x02))),
       ZN_DROP_NOT_EXPOSED, ZN_MARK_EXPOSE, "the mark opens declared ports only"},
      {"egress_exposed_not_from_gateway", out, to_guest4(tcp(40000, 8080, 0x02)), ZN_DROP_NOT_EXPOSED,
       ZN_MARK_EXPOSE, "a declared port from an address other than the gateway's"},
      {"egress_exposed_udp", out,
       eth(g.host_mac, g.guest_mac, kIp4, ipv4(g.gateway_ip4, g.guest_ip4, IPPROTO_UDP, udp(40000, 8080))),
       ZN_DROP_NOT_EXPOSED, ZN_MARK_EXPOSE, "declared ports are TCP"},
      {"egress_exposed_port_unmarked", out,
       eth(g.host_mac, g.guest_mac, kIp4, ipv4(g.gateway_ip4, g.guest_ip4, IPPROTO_TCP, tcp(40000, 8080, 0x02))),
       ZN_DROP_UNSOLICITED, 0, "a declared port is no opening for anything but zerod's socket"},
      {"ingress_from_exposed_port_without_socket", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, g.gateway_ip4, IPPROTO_TCP, tcp(8080, 40000, 0x12))),
       ZN_DROP_HOST_SERVICE, 0, "from a declared port to the gateway with no connection of zerod's"},
      {"ingress_from_exposed_port_syn_to_host", in,
       eth(g.guest_mac, g.host_mac, kIp4, ipv4(g.guest_ip4, g.gateway_ip4, IPPROTO_TCP, tcp(8080, 22, 0x02))),
       ZN_DROP_HOST_SERVICE, 0, "a declared source port opens no host service"},
      {"egress_lldp", out, eth(g.host_mac, g.guest_mac, 0x88cc, Bytes(40, 0)), ZN_DROP_ETHERTYPE, 0,
       "neither ARP nor IP towards the guest"},
  };
  auto nd = nd_fixtures(g);
  fixtures.insert(fixtures.end(), nd.begin(), nd.end());
  return fixtures;
}

FixtureDatapath::FixtureDatapath()
    : datapath_(dp::Datapath::load({})),
      maps_(datapath_->map_fds()),
      proxy4_("127.0.0.1", 0),
      proxy6_("::1", proxy4_.port()),
      dns_tcp4_("127.0.0.1", 0),
      dns_tcp6_("::1", dns_tcp4_.port()),
      dns_udp4_("127.0.0.1", dns_tcp4_.port()),
      dns_udp6_("::1", dns_tcp4_.port()) {
  dp::Listeners l;
  l.proxy_port = proxy4_.port();
  l.dns_port = dns_tcp4_.port();
  maps_.set_listeners(l);
  const FixtureGuest g;
  maps_.put_session(1, g.session());  // BPF_PROG_TEST_RUN runs on loopback
  auto allow = [&](const char* addr, uint8_t prefix_len, uint16_t port, uint32_t rule_id) {
    dp::L4Rule r;
    r.family = 4;
    in_addr a = ip4(addr);
    std::memcpy(r.addr.data(), &a, 4);
    r.prefix_len = prefix_len;
    r.port = port;
    r.rule_id = rule_id;
    maps_.put_l4_rule(FixtureGuest::kSessionIdx, r);
  };
  allow("198.18.0.20", 32, 5432, 1);  // one host, one port
  allow("198.18.1.0", 24, 0, 2);      // a prefix, any port
}

int FixtureDatapath::run_prog(int prog_fd, const Bytes& frame, uint32_t mark, uint32_t repeat,
                              uint32_t* duration_ns) {
  __sk_buff ctx{};
  ctx.mark = mark;
  bpf_test_run_opts opts{};
  opts.sz = sizeof(opts);
  opts.data_in = frame.data();
  opts.data_size_in = static_cast<uint32_t>(frame.size());
  opts.ctx_in = &ctx;
  opts.ctx_size_in = sizeof(ctx);
  opts.repeat = repeat;
  int err = bpf_prog_test_run_opts(prog_fd, &opts);
  if (err)
    throw std::runtime_error("BPF_PROG_TEST_RUN: " + std::to_string(err) + " errno " + std::to_string(errno));
  if (duration_ns) *duration_ns = opts.duration;
  return static_cast<int>(opts.retval);
}

unsigned FixtureDatapath::verdict_of(const VerdictFixture& f) {
  const auto before = maps_.counters(FixtureGuest::kSessionIdx);
  run(f);
  const auto after = maps_.counters(FixtureGuest::kSessionIdx);
  for (unsigned v = 0; v < ZN_VERDICT_COUNT; ++v)
    if (after[v] != before[v]) return v;
  return ZN_VERDICT_COUNT;
}

int FixtureDatapath::run(const VerdictFixture& f, uint32_t repeat, uint32_t* duration_ns) {
  int fd = f.direction == Direction::kIngress ? datapath_->ingress_prog_fd() : datapath_->egress_prog_fd();
  return run_prog(fd, f.frame, f.mark, repeat, duration_ns);
}

}  // namespace zn::test
