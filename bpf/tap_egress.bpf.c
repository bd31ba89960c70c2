// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * TC egress on a microVM's TAP: everything that would reach the guest.
 *
 * A packet passed here ends at the guest, so the question for each pass is
 * whether something beyond the link could have sent it:
 *
 *  pass:arp         ARP is not routed: only the host itself puts ARP on the
 *                   TAP.
 *  pass:nd          NS and NA only (zn_egress_nd), hop limit 255 (a router
 *                   would have decremented it, so nothing forwarded passes),
 *                   from the gateway's addresses, to the guest's addresses,
 *                   its solicited-node groups or ff02::1, about the guest's
 *                   (NS) or the gateway's (NA) addresses, in RFC 4861's exact
 *                   shape; and the host's DAD for its own addresses (from ::
 *                   to their solicited-node groups). No RA or redirect: the
 *                   host does not send them.
 *  pass:host_reply  IP from host sockets that mark themselves as answering
 *                   guests (SO_MARK = ZN_MARK_HOST_REPLY: the proxy and the
 *                   DNS responder). Forwarded traffic carries no such mark,
 *                   so nothing unsolicited from the host or the internet
 *                   reaches the guest.
 *  pass:exposed     TCP from zerod's connections to the guest's declared
 *                   ports (SO_MARK = ZN_MARK_EXPOSE), from the gateway's
 *                   address, to the guest's, to a declared port
 *                   (zn_exposed.h); any other packet with that mark is
 *                   drop:not_exposed.
 */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zn_abi.h"
#include "zn_exposed.h"
#include "zn_maps.h"
#include "zn_nd.h"
#include "zn_parse.h"
#include "zn_verdict.h"

/* Every drop of this program: counted, and reported with what p notes. */
static __always_inline int zn_egress_drop(struct __sk_buff *skb, const struct zn_pkt *p, __u32 reason)
{
	return zn_drop(skb, p, reason, ZN_DIR_EGRESS);
}

/* Ports for events; TCP and UDP both start with source and destination. */
static __always_inline void zn_note_ports(struct zn_pkt *p, void *l4, void *data_end)
{
	struct udphdr *ports = l4;

	if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) && (void *)(ports + 1) <= data_end) {
		p->sport = ports->source;
		p->dport = ports->dest;
	}
}

static __always_inline void zn_note_ip4(struct zn_pkt *p, struct iphdr *iph, void *data_end)
{
	if ((void *)(iph + 1) > data_end)
		return;
	p->family = 4;
	p->proto = iph->protocol;
	p->saddr.v4 = iph->saddr;
	p->daddr.v4 = iph->daddr;
	if (iph->ihl == 5)
		zn_note_ports(p, iph + 1, data_end);
}

static __always_inline void zn_note_ip6(struct zn_pkt *p, struct ipv6hdr *ip6h, void *data_end)
{
	p->family = 6;
	p->proto = ip6h->nexthdr;
	p->saddr.v6 = ip6h->saddr;
	p->daddr.v6 = ip6h->daddr;
	zn_note_ports(p, ip6h + 1, data_end);
}

/* Neighbour discovery from the host to the guest (see the top of the file).
 * The host's MAC is not part of the session, so the link-layer option is
 * checked for type and size only. */
static __always_inline int zn_egress_nd(struct __sk_buff *skb, const struct zn_session *s, struct zn_pkt *p,
					struct ipv6hdr *ip6h, struct icmp6hdr *icmp6, void *data_end)
{
	__u8 type = icmp6->icmp6_type;
	struct in6_addr *target = (void *)(icmp6 + 1);
	__u8 *opt = (void *)(target + 1);
	/* The host's own DAD for its TAP addresses comes from ::. */
	int host_dad = type == NDISC_NEIGHBOUR_SOLICITATION && zn_ip6_is_unspecified(&ip6h->saddr);
	int options;

	if (type != NDISC_NEIGHBOUR_SOLICITATION && type != NDISC_NEIGHBOUR_ADVERTISEMENT)
		return zn_egress_drop(skb, p, ZN_DROP_ND_SPOOF);
	if (!zn_is_gateway_ip6(s, &ip6h->saddr) && !host_dad)
		return zn_egress_drop(skb, p, ZN_DROP_ND_SPOOF);
	if (icmp6->icmp6_code != 0)
		return zn_egress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	options = zn_nd_option_count(skb, ip6h, ZN_ND_NSNA_LEN);
	if (options < 0)
		return zn_egress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	if ((void *)(target + 1) > data_end)
		return zn_egress_drop(skb, p, ZN_DROP_TRUNCATED_L4);
	if (options) {
		__u32 why = zn_nd_option_shape(opt, data_end);

		if (why)
			return zn_egress_drop(skb, p, why);
		if (opt[0] != (host_dad				       ? ND_OPT_NONCE
			       : type == NDISC_NEIGHBOUR_ADVERTISEMENT ? ND_OPT_TARGET_LL_ADDR
								       : ND_OPT_SOURCE_LL_ADDR))
			return zn_egress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	}
	if (!zn_nd_reserved_ok(icmp6))
		return zn_egress_drop(skb, p, ZN_DROP_ND_MALFORMED);
	if (type == NDISC_NEIGHBOUR_SOLICITATION) {
		if (host_dad) {
			if (!zn_is_gateway_ip6(s, target))
				return zn_egress_drop(skb, p, ZN_DROP_ND_SPOOF);
			if (!zn_ip6_is_solicited_node_of(&ip6h->daddr, target->in6_u.u6_addr8))
				return zn_egress_drop(skb, p, ZN_DROP_ND_SCOPE);
			return zn_pass(p, ZN_PASS_ND);
		}
		if (!zn_is_guest_ip6(s, target))
			return zn_egress_drop(skb, p, ZN_DROP_ND_SCOPE);
		if (!zn_nd_ns_dest_ok(&ip6h->daddr, target))
			return zn_egress_drop(skb, p, ZN_DROP_ND_SCOPE);
		return zn_pass(p, ZN_PASS_ND);
	}
	if (!zn_is_gateway_ip6(s, target))
		return zn_egress_drop(skb, p, ZN_DROP_ND_SPOOF);
	if (!zn_is_guest_ip6(s, &ip6h->daddr) && !zn_ip6_is_ff02(&ip6h->daddr, 1))
		return zn_egress_drop(skb, p, ZN_DROP_ND_SCOPE);
	return zn_pass(p, ZN_PASS_ND);
}

/* A packet of zerod's connection to a declared port (see the top). */
static __always_inline int zn_egress_exposed(struct __sk_buff *skb, const struct zn_session *s,
					     const struct zn_pkt *p)
{
	if (p->proto != IPPROTO_TCP || !zn_port_exposed(s, p->dport))
		return zn_egress_drop(skb, p, ZN_DROP_NOT_EXPOSED);
	if (p->family == 4) {
		if (s->guest_ip4 == 0 || p->daddr.v4 != s->guest_ip4 || p->saddr.v4 != s->gateway_ip4)
			return zn_egress_drop(skb, p, ZN_DROP_NOT_EXPOSED);
	} else if (p->family == 6) {
		if (zn_ip6_is_zero(s->guest_ip6) || !zn_ip6_eq(&p->daddr.v6, s->guest_ip6) ||
		    !zn_ip6_eq(&p->saddr.v6, s->gateway_ip6))
			return zn_egress_drop(skb, p, ZN_DROP_NOT_EXPOSED);
	} else {
		return zn_egress_drop(skb, p, ZN_DROP_NOT_EXPOSED);
	}
	return zn_pass(p, ZN_PASS_EXPOSED);
}

SEC("tc")
int zn_tap_egress(struct __sk_buff *skb)
{
	struct zn_pkt pkt = {};
	struct zn_pkt *p = &pkt;
	const struct zn_session *s;
	struct ethhdr *eth;
	void *data, *data_end;

	s = zn_lookup_session(skb, p);
	if (!s)
		return zn_egress_drop(skb, p, ZN_DROP_NO_SESSION);

	zn_pull_headers(skb);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return zn_egress_drop(skb, p, ZN_DROP_TRUNCATED_ETH);
	pkt.ethertype = eth->h_proto;

	switch (eth->h_proto) {
	case bpf_htons(ETH_P_ARP):
		return zn_pass(p, ZN_PASS_ARP);
	case bpf_htons(ETH_P_IP):
		zn_note_ip4(p, data + sizeof(*eth), data_end);
		break;
	case bpf_htons(ETH_P_IPV6): {
		struct ipv6hdr *ip6h = data + sizeof(*eth);
		struct icmp6hdr *icmp6 = (void *)(ip6h + 1);

		if ((void *)(ip6h + 1) > data_end)
			return zn_egress_drop(skb, p, ZN_DROP_TRUNCATED_IP6);
		zn_note_ip6(p, ip6h, data_end);
		/* Any ND type with hop limit 255 is judged as ND, marked or not:
		 * the proxy and DNS responder never send it. */
		if (ip6h->nexthdr == IPPROTO_ICMPV6 && (void *)(icmp6 + 1) <= data_end &&
		    ip6h->hop_limit == ZN_ND_HOP_LIMIT && zn_icmp6_is_nd(icmp6->icmp6_type))
			return zn_egress_nd(skb, s, p, ip6h, icmp6, data_end);
		break;
	}
	default:
		return zn_egress_drop(skb, p, ZN_DROP_ETHERTYPE);
	}
	if ((skb->mark & ZN_MARK_MASK) == ZN_MARK_EXPOSE)
		return zn_egress_exposed(skb, s, p);
	if ((skb->mark & ZN_MARK_MASK) == ZN_MARK_HOST_REPLY)
		return zn_pass(p, ZN_PASS_HOST_REPLY);
	return zn_egress_drop(skb, p, ZN_DROP_UNSOLICITED);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
