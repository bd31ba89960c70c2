// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * TC ingress on a microVM's TAP: everything the guest sends. Default deny.
 *
 * The host forwards (a VM host must), so every pass below answers one
 * question: can this packet leave the link? None can:
 *
 *  pass:arp        ARP from the guest's MAC and IPv4 address (or a 0.0.0.0
 *                  probe). ARP is not IP: no host routes it, and the TAP has
 *                  no proxy ARP or bridge to relay it.
 *  pass:nd         RS/NS/NA (zn_ingress_nd) only to destinations the kernel
 *                  never forwards: ff02::1, ff02::2 and solicited-node groups
 *                  (link scope), and the gateway's own addresses, global or
 *                  link-local (delivered locally). Hop limit 255, exact
 *                  length, at most one option, so no payload rides along.
 *  pass:dns        UDP/TCP 53 to any destination, and
 *  pass:steer      TCP to the session's steered ports, and
 *  pass:exposed    TCP from a declared port (zn_exposed.h) to the gateway,
 *                  for which an established host socket with the exact
 *                  four-tuple exists and carries ZN_MARK_EXPOSE: the guest's
 *                  side of a connection zerod opened. Delivered locally (the
 *                  gateway address is the host's), never forwarded; a
 *                  listener never matches.
 *  pass:l4         TCP to an L4-allowed prefix: each is assigned to a host
 *                  socket (bpf_sk_assign) and marked ZN_MARK_STEER, which the
 *                  policy rule routes to the local table, so the stack
 *                  delivers it to that socket; the forwarding path drops any
 *                  packet that carries an assigned socket besides
 *                  (ip_forward/ip6_forward: skb->sk). What leaves the host
 *                  afterwards is the proxy's or DNS responder's own traffic.
 *
 * Every other exit is a named drop reason.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zn_abi.h"
#include "zn_exposed.h"
#include "zn_maps.h"
#include "zn_nd.h"
#include "zn_parse.h"
#include "zn_verdict.h"

#define ZN_IP_MF 0x2000
#define ZN_IP_OFFSET 0x1FFF

/* Every drop of this program: counted, and reported with what p notes. */
static __always_inline int zn_ingress_drop(struct __sk_buff *skb, const struct zn_pkt *p, __u32 reason)
{
	return zn_drop(skb, p, reason, ZN_DIR_INGRESS);
}

static __always_inline void zn_mark_steered(struct __sk_buff *skb)
{
	skb->mark = (skb->mark & ~ZN_MARK_MASK) | ZN_MARK_STEER;
}

/* A socket lookup tuple for either family, from addresses as network-order
 * words (one for IPv4, four for IPv6). Returns the length the lookup helpers
 * take for that family. A listener's tuple has no source: saddr NULL. */
static __always_inline __u32 zn_sock_tuple(struct bpf_sock_tuple *t, bool is_ipv6, const __be32 *saddr,
					   __be16 sport, const __be32 *daddr, __be16 dport)
{
	if (is_ipv6) {
		if (saddr)
			__builtin_memcpy(t->ipv6.saddr, saddr, sizeof(t->ipv6.saddr));
		__builtin_memcpy(t->ipv6.daddr, daddr, sizeof(t->ipv6.daddr));
		t->ipv6.sport = sport;
		t->ipv6.dport = dport;
		return sizeof(t->ipv6);
	}
	if (saddr)
		t->ipv4.saddr = *saddr;
	t->ipv4.daddr = *daddr;
	t->ipv4.sport = sport;
	t->ipv4.dport = dport;
	return sizeof(t->ipv4);
}

/* The host socket a packet is steered to, the DNS responder's or the proxy's,
 * as a lookup tuple; returns its length. */
static __always_inline __u32 zn_listener_tuple(struct bpf_sock_tuple *t, const struct zn_listeners *ln,
					       bool is_ipv6, bool to_dns)
{
	if (to_dns)
		return zn_sock_tuple(t, is_ipv6, NULL, 0,
				     is_ipv6 ? (const __be32 *)ln->dns_ip6 : &ln->dns_ip4, ln->dns_port);
	return zn_sock_tuple(t, is_ipv6, NULL, 0, is_ipv6 ? (const __be32 *)ln->proxy_ip6 : &ln->proxy_ip4,
			     ln->proxy_port);
}

/* Assigns a TCP packet to its existing host socket (later packets of a steered
 * flow) or else to the listener. Returns 0 or a drop reason. The pattern is the
 * kernel selftest test_sk_assign. */
static __always_inline __u32 zn_assign_tcp(struct __sk_buff *skb, struct bpf_sock_tuple *flow,
					   struct bpf_sock_tuple *listener, __u32 tuple_len)
{
	struct bpf_sock *sk;
	long err;

	sk = bpf_skc_lookup_tcp(skb, flow, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (sk) {
		if (sk->state != BPF_TCP_LISTEN)
			goto assign;
		bpf_sk_release(sk);
	}
	sk = bpf_skc_lookup_tcp(skb, listener, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return ZN_DROP_NO_LISTENER;
	if (sk->state != BPF_TCP_LISTEN) {
		bpf_sk_release(sk);
		return ZN_DROP_NO_LISTENER;
	}
assign:
	err = bpf_sk_assign(skb, sk, 0);
	bpf_sk_release(sk);
	return err ? ZN_DROP_ASSIGN_FAILED : 0;
}

static __always_inline __u32 zn_assign_udp(struct __sk_buff *skb, struct bpf_sock_tuple *listener,
					   __u32 tuple_len)
{
	struct bpf_sock *sk;
	long err;

	sk = bpf_sk_lookup_udp(skb, listener, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return ZN_DROP_NO_LISTENER;
	err = bpf_sk_assign(skb, sk, 0);
	bpf_sk_release(sk);
	return err ? ZN_DROP_ASSIGN_FAILED : 0;
}

static __always_inline int zn_port_steered(const struct zn_session *s, __u16 dport)
{
	/* 0 marks an unused slot: a packet to port 0 must match none of them. */
	if (!dport)
		return 0;
#pragma unroll
	for (int i = 0; i < ZN_MAX_STEERED_PORTS; i++) {
		if (s->steered_ports[i] == dport)
			return 1;
	}
	return 0;
}

/* One trie lookup: the longest prefix holding the destination carries every
 * port the session allows there, covering prefixes' included (zn_abi.h). */
static __always_inline int zn_l4_allowed(const struct zn_pkt *p)
{
	struct zn_l4_key key = {};
	const struct zn_l4_value *v;
	__u32 sidx = p->sidx;
	const struct zn_l4_summary *sum = bpf_map_lookup_elem(&zn_l4_count, &sidx);
	__u32 n;

	if (!sum || sum->entries == 0)
		return 0;
	/* No rule names this port (nor allows any): no entry can allow it. */
	if (!sum->any_port && !(sum->port_bits & (1ULL << (bpf_ntohs(p->dport) & 63))))
		return 0;

	key.prefixlen = ZN_L4_KEY_FIXED_BITS + (p->family == 4 ? 32 : 128);
	key.session_idx = p->sidx;
	key.family = p->family;
	key.proto = IPPROTO_TCP;
	__builtin_memcpy(key.addr, &p->daddr, sizeof(key.addr));
	v = bpf_map_lookup_elem(&zn_l4_allow, &key);
	if (!v)
		return 0;
	if (v->any_port)
		return 1;
	/* A bounded loop the verifier walks (an early exit cannot be unrolled);
	 * the common entry holds one or two ports. */
	n = v->nports;
	for (int i = 0; i < ZN_L4_MAX_PORTS; i++) {
		if (i >= n)
			break;
		if (v->ports[i] == p->dport)
			return 1;
	}
	return 0;
}

static __always_inline const struct zn_listeners *zn_get_listeners(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&zn_listeners, &zero);
}

/* The gateway's own address on the TAP: its services are not the guest's to
 * reach, DNS aside. */
static __always_inline int zn_to_gateway(const struct zn_session *s, const struct zn_pkt *p, bool is_ipv6)
{
	if (is_ipv6)
		return zn_ip6_eq(&p->daddr.v6, s->gateway_ip6);
	return p->daddr.v4 == s->gateway_ip4;
}

/* ---- TCP and UDP, either family ----
 *
 * Past the IP header, both families take one path (as Katran's does). Each IP
 * function passes is_ipv6 as a constant, so the compiler still gives each
 * family its own straight-line copy and the verifier sees no mixed paths. */

/* A TCP packet the verdict lets through: onto its host socket. */
static __always_inline int zn_ingress_tcp_assign(struct __sk_buff *skb, struct zn_pkt *p, bool is_ipv6,
						 __u32 verdict)
{
	const struct zn_listeners *ln = zn_get_listeners();
	struct bpf_sock_tuple flow = {}, listener = {};
	__u32 reason, tuple_len;

	if (!ln)
		return zn_ingress_drop(skb, p, ZN_DROP_NO_LISTENER);
	tuple_len = zn_sock_tuple(&flow, is_ipv6, p->saddr.words, p->sport, p->daddr.words, p->dport);
	zn_listener_tuple(&listener, ln, is_ipv6, verdict == ZN_PASS_DNS);
	reason = zn_assign_tcp(skb, &flow, &listener, tuple_len);
	if (reason)
		return zn_ingress_drop(skb, p, reason);
	zn_mark_steered(skb);
	return zn_pass(p, verdict);
}

/* The guest's side of a connection zerod opened to a declared port: a full
 * host socket owns exactly this four-tuple, is not listening, and carries
 * the exposure mark (only a CAP_NET_ADMIN process can set it). */
static __always_inline int zn_exposed_reply(struct __sk_buff *skb, const struct zn_pkt *p, bool is_ipv6)
{
	struct bpf_sock_tuple flow = {};
	struct bpf_sock *sk;
	__u32 tuple_len;
	int ok;

	tuple_len = zn_sock_tuple(&flow, is_ipv6, p->saddr.words, p->sport, p->daddr.words, p->dport);
	sk = bpf_sk_lookup_tcp(skb, &flow, tuple_len, BPF_F_CURRENT_NETNS, 0);
	if (!sk)
		return 0;
	ok = sk->state != BPF_TCP_LISTEN && (sk->mark & ZN_MARK_MASK) == ZN_MARK_EXPOSE;
	bpf_sk_release(sk);
	return ok;
}

/* The verdict first, the socket work only for what passes: a denied packet
 * (the flood case) costs no listener lookup or tuple setup. */
static __always_inline int zn_ingress_tcp(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					  bool is_ipv6)
{
	__u32 verdict;

	if (p->dport == bpf_htons(ZN_DNS_PORT))
		verdict = ZN_PASS_DNS;
	else if (zn_to_gateway(s, p, is_ipv6)) {
		if (zn_port_exposed(s, p->sport) && zn_exposed_reply(skb, p, is_ipv6))
			return zn_pass(p, ZN_PASS_EXPOSED);
		return zn_ingress_drop(skb, p, ZN_DROP_HOST_SERVICE);
	} else if (zn_port_steered(s, p->dport))
		verdict = ZN_PASS_STEER;
	else if (zn_l4_allowed(p))
		verdict = ZN_PASS_L4;
	else
		return zn_ingress_drop(skb, p, ZN_DROP_TCP_PORT);
	return zn_ingress_tcp_assign(skb, p, is_ipv6, verdict);
}

static __always_inline int zn_ingress_udp_dns(struct __sk_buff *skb, const struct zn_session *s,
					      struct zn_pkt *p, bool is_ipv6)
{
	const struct zn_listeners *ln = zn_get_listeners();
	struct bpf_sock_tuple listener = {};
	__u32 reason, tuple_len;

	/* Over the session's rate: dropped here, before the one socket every
	 * guest's queries share. */
	if (!zn_dns_allowed(s, p))
		return zn_ingress_drop(skb, p, ZN_DROP_DNS_RATE);
	if (!ln)
		return zn_ingress_drop(skb, p, ZN_DROP_NO_LISTENER);
	tuple_len = zn_listener_tuple(&listener, ln, is_ipv6, true);
	reason = zn_assign_udp(skb, &listener, tuple_len);
	if (reason)
		return zn_ingress_drop(skb, p, reason);
	zn_mark_steered(skb);
	return zn_pass(p, ZN_PASS_DNS);
}

/* The transport header at l4, of which the IP header says l4_len bytes follow;
 * p holds the addresses and protocol already. */
static __always_inline int zn_ingress_l4(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					 void *l4, __u32 l4_len, void *data_end, bool is_ipv6)
{
	switch (p->proto) {
	case IPPROTO_TCP: {
		struct tcphdr *th = l4;

		if ((void *)(th + 1) > data_end || l4_len < sizeof(*th))
			return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_L4);
		p->sport = th->source;
		p->dport = th->dest;
		if (th->doff < 5)
			return zn_ingress_drop(skb, p, ZN_DROP_IP_MALFORMED);
		return zn_ingress_tcp(skb, s, p, is_ipv6);
	}
	case IPPROTO_UDP: {
		struct udphdr *uh = l4;

		if ((void *)(uh + 1) > data_end || l4_len < sizeof(*uh))
			return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_L4);
		p->sport = uh->source;
		p->dport = uh->dest;
		if (uh->dest != bpf_htons(ZN_DNS_PORT))
			return zn_ingress_drop(skb, p, ZN_DROP_UDP);
		return zn_ingress_udp_dns(skb, s, p, is_ipv6);
	}
	default:
		return zn_ingress_drop(skb, p, ZN_DROP_PROTO);
	}
}

/* ---- IPv4 ---- */

static __always_inline int zn_ingress_ip4(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					  void *data, void *data_end)
{
	struct iphdr *iph = data + sizeof(struct ethhdr);
	__u16 tot_len;

	if ((void *)(iph + 1) > data_end)
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_IP4);
	if (iph->version != 4 || iph->ihl < 5)
		return zn_ingress_drop(skb, p, ZN_DROP_IP_MALFORMED);
	p->family = 4;
	p->proto = iph->protocol;
	p->saddr.v4 = iph->saddr;
	p->daddr.v4 = iph->daddr;
	if (iph->ihl != 5)
		return zn_ingress_drop(skb, p, ZN_DROP_IP4_OPTIONS);
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < sizeof(*iph))
		return zn_ingress_drop(skb, p, ZN_DROP_IP_MALFORMED);
	if (tot_len > skb->len - sizeof(struct ethhdr))
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_IP4);
	if (s->guest_ip4 == 0 || iph->saddr != s->guest_ip4)
		return zn_ingress_drop(skb, p, ZN_DROP_IP4_SPOOF);
	if (iph->frag_off & bpf_htons(ZN_IP_MF | ZN_IP_OFFSET))
		return zn_ingress_drop(skb, p, ZN_DROP_FRAGMENT);
	if (iph->protocol == IPPROTO_ICMP)
		return zn_ingress_drop(skb, p, ZN_DROP_ICMP);
	return zn_ingress_l4(skb, s, p, iph + 1, tot_len - sizeof(*iph), data_end, false);
}

/* ---- IPv6 ---- */

/* Neighbour discovery from the guest, passed only in the forms that stay on
 * the link (see the top of this file):
 *   RS  to ff02::2, from the guest's address (with its link-layer address)
 *       or from :: (without one);
 *   NS  for a gateway address, to that address's solicited-node group or to
 *       the address itself, from the guest's address, optionally with the
 *       guest's link-layer address;
 *   NS  for the guest's own address from :: (DAD) to that address's
 *       solicited-node group, with no option or one nonce (RFC 7527);
 *   NA  for the guest's own address, from it, to a gateway address or
 *       ff02::1, optionally with the guest's link-layer address.
 * Code 0, reserved bits 0, hop limit 255, no trailing bytes, nothing else. */
static __always_inline int zn_ingress_nd(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					 struct ipv6hdr *ip6h, struct icmp6hdr *icmp6, void *data_end)
{
	__u8 type = icmp6->icmp6_type;
	struct in6_addr *target = (void *)(icmp6 + 1);
	__u8 *opt;
	int from_unspec, options;

	/* A router decrements the hop limit: 255 proves the sender is on the link. */
	if (ip6h->hop_limit != ZN_ND_HOP_LIMIT)
		return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);
	/* RA and redirects are a router's to send, and a guest is no router. */
	if (type != NDISC_ROUTER_SOLICITATION && type != NDISC_NEIGHBOUR_SOLICITATION &&
	    type != NDISC_NEIGHBOUR_ADVERTISEMENT)
		return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);
	from_unspec = zn_ip6_is_unspecified(&ip6h->saddr);
	/* :: is a source only before the guest has an address (DAD, an early RS). */
	if (!zn_is_guest_ip6(s, &ip6h->saddr) && !(from_unspec && type != NDISC_NEIGHBOUR_ADVERTISEMENT))
		return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);

	if (icmp6->icmp6_code != 0)
		return zn_ingress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	if (type == NDISC_ROUTER_SOLICITATION) {
		options = zn_nd_option_count(skb, ip6h, ZN_ND_RS_LEN);
		opt = (void *)(icmp6 + 1);
	} else {
		options = zn_nd_option_count(skb, ip6h, ZN_ND_NSNA_LEN);
		opt = (void *)(target + 1);
	}
	if (options < 0)
		return zn_ingress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	if (type != NDISC_ROUTER_SOLICITATION && (void *)(target + 1) > data_end)
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_L4);
	if (options) {
		__u32 why = zn_nd_option_shape(opt, data_end);

		if (why)
			return zn_ingress_drop(skb, p, why);
		if (from_unspec) {
			/* RFC 4861 4.1, 7.2.2: no link-layer address from ::. */
			if (type != NDISC_NEIGHBOUR_SOLICITATION || opt[0] != ND_OPT_NONCE)
				return zn_ingress_drop(skb, p, ZN_DROP_ND_MALFORMED);
		} else {
			if (opt[0] != (type == NDISC_NEIGHBOUR_ADVERTISEMENT ? ND_OPT_TARGET_LL_ADDR
									     : ND_OPT_SOURCE_LL_ADDR))
				return zn_ingress_drop(skb, p, ZN_DROP_ND_MALFORMED);
			if (!zn_mac_eq(opt + 2, s->guest_mac))
				return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);
		}
	}

	if (!zn_nd_reserved_ok(icmp6))
		return zn_ingress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	switch (type) {
	case NDISC_ROUTER_SOLICITATION:
		if (!zn_ip6_is_ff02(&ip6h->daddr, 2))
			return zn_ingress_drop(skb, p, ZN_DROP_ND_SCOPE);
		return zn_pass(p, ZN_PASS_ND);
	case NDISC_NEIGHBOUR_SOLICITATION:
		if (from_unspec) {
			/* DAD: the guest asks whether its own address is taken. */
			if (!zn_is_guest_ip6(s, target))
				return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);
			if (!zn_ip6_is_solicited_node_of(&ip6h->daddr, target->in6_u.u6_addr8))
				return zn_ingress_drop(skb, p, ZN_DROP_ND_SCOPE);
			return zn_pass(p, ZN_PASS_ND);
		}
		/* The gateway is the guest's only neighbour. */
		if (!zn_is_gateway_ip6(s, target) || !zn_nd_ns_dest_ok(&ip6h->daddr, target))
			return zn_ingress_drop(skb, p, ZN_DROP_ND_SCOPE);
		return zn_pass(p, ZN_PASS_ND);
	default: /* NDISC_NEIGHBOUR_ADVERTISEMENT */
		/* Only its own addresses, so the guest cannot take over the gateway's. */
		if (!zn_is_guest_ip6(s, target))
			return zn_ingress_drop(skb, p, ZN_DROP_ND_SPOOF);
		if (!zn_is_gateway_ip6(s, &ip6h->daddr) && !zn_ip6_is_ff02(&ip6h->daddr, 1))
			return zn_ingress_drop(skb, p, ZN_DROP_ND_SCOPE);
		return zn_pass(p, ZN_PASS_ND);
	}
}

static __always_inline int zn_is_ip6_exthdr(__u8 nexthdr)
{
	switch (nexthdr) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
	case IPPROTO_AH:
	case IPPROTO_ESP:
	case IPPROTO_MH:
	case ZN_IPPROTO_HIP:
	case ZN_IPPROTO_SHIM6:
		return 1;
	default:
		return 0;
	}
}

static __always_inline int zn_ingress_ip6(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					  void *data, void *data_end)
{
	struct ipv6hdr *ip6h = data + sizeof(struct ethhdr);
	__u32 payload_len;

	if ((void *)(ip6h + 1) > data_end)
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_IP6);
	if (ip6h->version != 6)
		return zn_ingress_drop(skb, p, ZN_DROP_IP_MALFORMED);
	p->family = 6;
	p->proto = ip6h->nexthdr;
	p->saddr.v6 = ip6h->saddr;
	p->daddr.v6 = ip6h->daddr;
	payload_len = bpf_ntohs(ip6h->payload_len);
	if (payload_len + sizeof(*ip6h) > skb->len - sizeof(struct ethhdr))
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_IP6);

	if (ip6h->nexthdr == IPPROTO_ICMPV6) {
		struct icmp6hdr *icmp6 = (void *)(ip6h + 1);

		if ((void *)(icmp6 + 1) > data_end || payload_len < sizeof(*icmp6))
			return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_L4);
		if (zn_icmp6_is_nd(icmp6->icmp6_type))
			return zn_ingress_nd(skb, s, p, ip6h, icmp6, data_end);
	}
	/* Multicast (MLD reports, mDNS) has no business leaving the link; named
	 * apart so a guest's routine MLD does not read as spoofing. */
	if (ip6h->daddr.in6_u.u6_addr8[0] == 0xff)
		return zn_ingress_drop(skb, p, ZN_DROP_IP6_MULTICAST);
	if (zn_ip6_is_zero(s->guest_ip6) || !zn_ip6_eq(&ip6h->saddr, s->guest_ip6))
		return zn_ingress_drop(skb, p, ZN_DROP_IP6_SPOOF);

	switch (ip6h->nexthdr) {
	case IPPROTO_ICMPV6:
		return zn_ingress_drop(skb, p, ZN_DROP_ICMP);
	case IPPROTO_FRAGMENT:
		return zn_ingress_drop(skb, p, ZN_DROP_FRAGMENT);
	}
	if (zn_is_ip6_exthdr(ip6h->nexthdr))
		return zn_ingress_drop(skb, p, ZN_DROP_IP6_EXTHDR);
	return zn_ingress_l4(skb, s, p, ip6h + 1, payload_len, data_end, true);
}

/* ---- ARP ---- */

static __always_inline int zn_ingress_arp(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					  void *data, void *data_end)
{
	struct zn_arp *arp = data + sizeof(struct ethhdr);
	__u32 sip;

	if ((void *)(arp + 1) > data_end)
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_ARP);
	if (arp->hrd != bpf_htons(ARPHRD_ETHER) || arp->pro != bpf_htons(ETH_P_IP) ||
	    arp->hln != sizeof(arp->sha) || arp->pln != sizeof(arp->sip))
		return zn_ingress_drop(skb, p, ZN_DROP_ARP_MALFORMED);
	if (arp->op != bpf_htons(ARPOP_REQUEST) && arp->op != bpf_htons(ARPOP_REPLY))
		return zn_ingress_drop(skb, p, ZN_DROP_ARP_MALFORMED);
	__builtin_memcpy(&sip, arp->sip, sizeof(sip));
	p->saddr.v4 = sip;
	__builtin_memcpy(&p->daddr.v4, arp->tip, sizeof(arp->tip));
	if (!zn_mac_eq(arp->sha, s->guest_mac))
		return zn_ingress_drop(skb, p, ZN_DROP_ARP_SPOOF);
	/* An ARP probe (sender 0.0.0.0) is how a guest checks its address is free. */
	if (!(sip != 0 && sip == s->guest_ip4) && !(sip == 0 && arp->op == bpf_htons(ARPOP_REQUEST)))
		return zn_ingress_drop(skb, p, ZN_DROP_ARP_SPOOF);
	return zn_pass(p, ZN_PASS_ARP);
}

SEC("tc")
int zn_tap_ingress(struct __sk_buff *skb)
{
	struct zn_pkt pkt = {};
	struct zn_pkt *p = &pkt;
	const struct zn_session *s;
	struct ethhdr *eth;
	void *data, *data_end;

	s = zn_lookup_session(skb, p);
	if (!s)
		return zn_ingress_drop(skb, p, ZN_DROP_NO_SESSION);

	/* The stack strips a VLAN tag into skb metadata before TC ingress. */
	if (skb->vlan_present)
		return zn_ingress_drop(skb, p, ZN_DROP_VLAN);
	zn_pull_headers(skb);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return zn_ingress_drop(skb, p, ZN_DROP_TRUNCATED_ETH);
	pkt.ethertype = eth->h_proto;
	if (eth->h_proto == bpf_htons(ETH_P_8021Q) || eth->h_proto == bpf_htons(ZN_ETH_P_8021AD))
		return zn_ingress_drop(skb, p, ZN_DROP_VLAN);
	if (!zn_mac_eq(eth->h_source, s->guest_mac))
		return zn_ingress_drop(skb, p, ZN_DROP_MAC_SPOOF);

	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
		return zn_ingress_arp(skb, s, p, data, data_end);
	case bpf_htons(ETH_P_IP):
		return zn_ingress_ip4(skb, s, p, data, data_end);
	case bpf_htons(ETH_P_IPV6):
		return zn_ingress_ip6(skb, s, p, data, data_end);
	default:
		return zn_ingress_drop(skb, p, ZN_DROP_ETHERTYPE);
	}
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
