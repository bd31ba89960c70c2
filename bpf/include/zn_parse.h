/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Packet parsing helpers shared by the TAP programs. */
#ifndef ZN_PARSE_H
#define ZN_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ZN_ETH_P_8021AD 0x88A8
/* ARP (RFC 826) names from linux/if_arp.h, which BPF code cannot include: it
 * pulls in the C library's sys/socket.h. */
#ifndef ARPHRD_ETHER
#define ARPHRD_ETHER 1
#endif
#ifndef ARPOP_REQUEST
#define ARPOP_REQUEST 1
#endif
#ifndef ARPOP_REPLY
#define ARPOP_REPLY 2
#endif
/* IPv6 extension headers that linux/in.h and linux/in6.h do not name:
 * HIP (RFC 7401) and shim6 (RFC 5533). */
#define ZN_IPPROTO_HIP 139
#define ZN_IPPROTO_SHIM6 140
/* Enough linear bytes for Ethernet + IPv6 + the longest ND message passed
 * (86 bytes) or a TCP header. */
#define ZN_PULL_LEN 128

/* ARP for Ethernet/IPv4, addresses included. */
struct zn_arp {
	__be16 hrd;
	__be16 pro;
	__u8 hln;
	__u8 pln;
	__be16 op;
	__u8 sha[6];
	__u8 sip[4];
	__u8 tha[6];
	__u8 tip[4];
} __attribute__((packed));

/* An address of either family, as the packet carried it: an IPv4 (or ARP)
 * address is the first word and the rest stays zero, as in Katran's flow_key. */
union zn_addr {
	__be32 v4;
	__be32 words[4];
	struct in6_addr v6;
};

/* What is known of the packet being judged, for counters and events. */
struct zn_pkt {
	__u32 sidx;
	__u32 ifindex;
	__u32 event_rate;
	__u32 event_burst;
	__u16 ethertype;
	__u16 sport;
	__u16 dport;
	__u8 family;
	__u8 proto;
	union zn_addr saddr;
	union zn_addr daddr;
};

static __always_inline int zn_mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

static __always_inline int zn_ip6_eq(const struct in6_addr *a, const __u8 *b)
{
	const __u32 *bw = (const __u32 *)b;

	return a->in6_u.u6_addr32[0] == bw[0] && a->in6_u.u6_addr32[1] == bw[1] &&
	       a->in6_u.u6_addr32[2] == bw[2] && a->in6_u.u6_addr32[3] == bw[3];
}

static __always_inline int zn_ip6_is_zero(const __u8 *a)
{
	const __u32 *w = (const __u32 *)a;

	return (w[0] | w[1] | w[2] | w[3]) == 0;
}

static __always_inline int zn_ip6_is_unspecified(const struct in6_addr *a)
{
	return (a->in6_u.u6_addr32[0] | a->in6_u.u6_addr32[1] | a->in6_u.u6_addr32[2] |
		a->in6_u.u6_addr32[3]) == 0;
}

/* fe80::/10: never routed off the link it was received on. */
static __always_inline int zn_ip6_is_link_local(const struct in6_addr *a)
{
	return a->in6_u.u6_addr8[0] == 0xfe && (a->in6_u.u6_addr8[1] & 0xc0) == 0x80;
}

/* ff02::1 (all nodes) and ff02::2 (all routers): link-scoped groups. */
static __always_inline int zn_ip6_is_ff02(const struct in6_addr *a, __u8 last)
{
	return a->in6_u.u6_addr32[0] == bpf_htonl(0xff020000) && a->in6_u.u6_addr32[1] == 0 &&
	       a->in6_u.u6_addr32[2] == 0 && a->in6_u.u6_addr32[3] == bpf_htonl(last);
}

/* ff02::1:ffXX:XXXX, the solicited-node group of addr (RFC 4291 2.7.1). */
static __always_inline int zn_ip6_is_solicited_node_of(const struct in6_addr *group, const __u8 *addr)
{
	return group->in6_u.u6_addr32[0] == bpf_htonl(0xff020000) && group->in6_u.u6_addr32[1] == 0 &&
	       group->in6_u.u6_addr32[2] == bpf_htonl(1) && group->in6_u.u6_addr8[12] == 0xff &&
	       group->in6_u.u6_addr8[13] == addr[13] && group->in6_u.u6_addr8[14] == addr[14] &&
	       group->in6_u.u6_addr8[15] == addr[15];
}

/* Makes the first ZN_PULL_LEN bytes (or the whole packet) directly readable. */
static __always_inline void zn_pull_headers(struct __sk_buff *skb)
{
	__u32 len = skb->len;
	__u32 linear = skb->data_end - skb->data;

	if (len > ZN_PULL_LEN)
		len = ZN_PULL_LEN;
	if (linear < len)
		bpf_skb_pull_data(skb, len);
}

#endif /* ZN_PARSE_H */
