// Builds Ethernet frames for BPF fixture tests. Checksums are left zero: the
// datapath never verifies them (the stack behind it does).
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace zn::test {

using Bytes = std::vector<uint8_t>;
using Mac = std::array<uint8_t, 6>;

in_addr ip4(const std::string& text);
in6_addr ip6(const std::string& text);

Bytes eth(const Mac& src, const Mac& dst, uint16_t ethertype, const Bytes& payload);
Bytes arp(uint16_t op, const Mac& sha, in_addr sip, const Mac& tha, in_addr tip);

struct Ip4Options {
  uint8_t ihl = 5;
  uint16_t frag_off = 0;  // host order: flags << 13 | offset
  int tot_len_delta = 0;  // added to the true total length
  uint8_t version = 4;
};
Bytes ipv4(in_addr src, in_addr dst, uint8_t proto, const Bytes& l4, const Ip4Options& o = {});
Bytes ipv6(const in6_addr& src, const in6_addr& dst, uint8_t nexthdr, const Bytes& payload,
           uint8_t hop_limit = 64);

Bytes tcp(uint16_t sport, uint16_t dport, uint8_t flags = 0x02 /* SYN */);
Bytes udp(uint16_t sport, uint16_t dport, const Bytes& payload = {});
Bytes icmp_echo();
Bytes icmp6(uint8_t type, const Bytes& body = Bytes(4, 0));
// Neighbour advertisement / solicitation body: 4 reserved/flag bytes + target.
Bytes nd_target(const in6_addr& target);
// The same with the NA flag bits (R 0x80, S 0x40, O 0x20) in the first byte.
Bytes nd_target(const in6_addr& target, uint8_t flags);
// One ND option: type, length in units of 8 bytes (len8 = 0: computed from
// data), then data, zero-padded to the length.
Bytes nd_option(uint8_t type, const Bytes& data, uint8_t len8 = 0);
// A source (type 1) or target (type 2) link-layer address option.
Bytes nd_lladdr(uint8_t type, const Mac& mac);
// ff02::1:ffXX:XXXX for addr.
in6_addr solicited_node(const in6_addr& addr);
Bytes concat(Bytes a, const Bytes& b);

Bytes truncate(Bytes b, size_t len);

}  // namespace zn::test
