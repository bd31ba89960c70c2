#include "support/packet_builder.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace zn::test {
namespace {

void put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}

void append(Bytes& b, const void* p, size_t n) {
  const auto* c = static_cast<const uint8_t*>(p);
  b.insert(b.end(), c, c + n);
}

}  // namespace

in_addr ip4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) throw std::invalid_argument(text);
  return a;
}

in6_addr ip6(const std::string& text) {
  in6_addr a{};
  if (inet_pton(AF_INET6, text.c_str(), &a) != 1) throw std::invalid_argument(text);
  return a;
}

Bytes eth(const Mac& src, const Mac& dst, uint16_t ethertype, const Bytes& payload) {
  Bytes b;
  append(b, dst.data(), 6);
  append(b, src.data(), 6);
  put16(b, ethertype);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes arp(uint16_t op, const Mac& sha, in_addr sip, const Mac& tha, in_addr tip) {
  Bytes b;
  put16(b, 1);       // Ethernet
  put16(b, 0x0800);  // IPv4
  b.push_back(6);
  b.push_back(4);
  put16(b, op);
  append(b, sha.data(), 6);
  append(b, &sip, 4);
  append(b, tha.data(), 6);
  append(b, &tip, 4);
  return b;
}

Bytes ipv4(in_addr src, in_addr dst, uint8_t proto, const Bytes& l4, const Ip4Options& o) {
  Bytes b;
  const size_t hdr = static_cast<size_t>(o.ihl < 5 ? 5 : o.ihl) * 4;
  b.push_back(static_cast<uint8_t>(o.version << 4 | (o.ihl & 0xf)));
  b.push_back(0);
  put16(b, static_cast<uint16_t>(static_cast<int>(hdr + l4.size()) + o.tot_len_delta));
  put16(b, 0x1234);
  put16(b, o.frag_off);
  b.push_back(64);
  b.push_back(proto);
  put16(b, 0);
  append(b, &src, 4);
  append(b, &dst, 4);
  while (b.size() < hdr) b.push_back(1);  // NOP options
  b.insert(b.end(), l4.begin(), l4.end());
  return b;
}

Bytes ipv6(const in6_addr& src, const in6_addr& dst, uint8_t nexthdr, const Bytes& payload,
           uint8_t hop_limit) {
  Bytes b{0x60, 0, 0, 0};
  put16(b, static_cast<uint16_t>(payload.size()));
  b.push_back(nexthdr);
  b.push_back(hop_limit);
  append(b, &src, 16);
  append(b, &dst, 16);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes tcp(uint16_t sport, uint16_t dport, uint8_t flags) {
  Bytes b;
  put16(b, sport);
  put16(b, dport);
  b.insert(b.end(), {0, 0, 0, 1, 0, 0, 0, 0});  // seq, ack
  b.push_back(5 << 4);
  b.push_back(flags);
  put16(b, 65535);
  put16(b, 0);
  put16(b, 0);
  return b;
}

Bytes udp(uint16_t sport, uint16_t dport, const Bytes& payload) {
  Bytes b;
  put16(b, sport);
  put16(b, dport);
  put16(b, static_cast<uint16_t>(8 + payload.size()));
  put16(b, 0);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes icmp_echo() { return {8, 0, 0, 0, 0, 1, 0, 1}; }

// Reserved before the first byte: g++ 12 at -O3 warns (-Warray-bounds, a
// false positive) on growing a vector made from a short initializer list.
Bytes icmp6(uint8_t type, const Bytes& body) {
  Bytes b;
  b.reserve(4 + body.size());
  b.push_back(type);
  b.resize(4, 0);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

Bytes nd_target(const in6_addr& target) {
  Bytes b(4, 0);
  append(b, &target, 16);
  return b;
}

Bytes nd_target(const in6_addr& target, uint8_t flags) {
  Bytes b = nd_target(target);
  b[0] = flags;
  return b;
}

Bytes nd_option(uint8_t type, const Bytes& data, uint8_t len8) {
  if (len8 == 0) len8 = static_cast<uint8_t>((2 + data.size() + 7) / 8);
  Bytes b;
  b.reserve(std::max<size_t>(2 + data.size(), size_t{len8} * 8));
  b.push_back(type);
  b.push_back(len8);
  b.insert(b.end(), data.begin(), data.end());
  b.resize(std::max<size_t>(b.size(), size_t{len8} * 8), 0);
  return b;
}

Bytes nd_lladdr(uint8_t type, const Mac& mac) { return nd_option(type, Bytes(mac.begin(), mac.end())); }

in6_addr solicited_node(const in6_addr& addr) {
  in6_addr g = ip6("ff02::1:ff00:0");
  g.s6_addr[13] = addr.s6_addr[13];
  g.s6_addr[14] = addr.s6_addr[14];
  g.s6_addr[15] = addr.s6_addr[15];
  return g;
}

Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Bytes truncate(Bytes b, size_t len) {
  b.resize(len);
  return b;
}

}  // namespace zn::test
