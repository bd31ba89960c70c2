// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * TC egress on a microVM's TAP: everything that would reach the guest.
 *
 * Only ARP, neighbour discovery, and IP packets sent by host sockets that mark
 * themselves as answering guests (SO_MARK = ZN_MARK_HOST_REPLY: the proxy and
 * the DNS responder) pass. Forwarded traffic carries no such mark, so nothing
 * unsolicited from the host or the internet reaches the guest.
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
#include "zn_maps.h"
#include "zn_parse.h"
#include "zn_verdict.h"

#define DROP(reason) zn_drop(skb, p, (reason), ZN_DIR_EGRESS)

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
	__builtin_memcpy(p->saddr, &iph->saddr, 4);
	__builtin_memcpy(p->daddr, &iph->daddr, 4);
	if (iph->ihl == 5)
		zn_note_ports(p, iph + 1, data_end);
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
		return DROP(ZN_DROP_NO_SESSION);

	zn_pull_headers(skb);
	data = (void *)(long)skb->data;
	data_end = (void *)(long)skb->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return DROP(ZN_DROP_TRUNCATED_ETH);
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
			return DROP(ZN_DROP_TRUNCATED_IP6);
		p->family = 6;
		p->proto = ip6h->nexthdr;
		__builtin_memcpy(p->saddr, &ip6h->saddr, 16);
		__builtin_memcpy(p->daddr, &ip6h->daddr, 16);
		zn_note_ports(p, ip6h + 1, data_end);
		if (ip6h->nexthdr == IPPROTO_ICMPV6 && (void *)(icmp6 + 1) <= data_end &&
		    ip6h->hop_limit == 255 && icmp6->icmp6_type >= NDISC_ROUTER_SOLICITATION &&
		    icmp6->icmp6_type <= NDISC_NEIGHBOUR_ADVERTISEMENT)
			return zn_pass(p, ZN_PASS_ND);
		break;
	}
	default:
		return DROP(ZN_DROP_ETHERTYPE);
	}
	if ((skb->mark & ZN_MARK_MASK) == ZN_MARK_HOST_REPLY)
		return zn_pass(p, ZN_PASS_HOST_REPLY);
	return DROP(ZN_DROP_UNSOLICITED);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
