/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * IPv6 neighbour discovery between a guest and its gateway, for both TAP
 * programs. ND is the only traffic either program passes without steering it
 * to a host socket, and a forwarding host routes whatever it is not the
 * destination of: so ND passes only when its destination keeps it on the
 * link (link-local unicast, ff02:: groups, the gateway's own addresses) and
 * its shape is exactly what RFC 4861 describes, with no room for payload.
 */
#ifndef ZN_ND_H
#define ZN_ND_H

#include <linux/bpf.h>
#include <linux/icmpv6.h>
#include <linux/ipv6.h>
#include "zn_abi.h"
#include "zn_parse.h"

/* ICMPv6 neighbour discovery types (RFC 4861), named as in the kernel's
 * net/ndisc.h; the UAPI headers lack them. */
#define NDISC_ROUTER_SOLICITATION 133
#define NDISC_ROUTER_ADVERTISEMENT 134
#define NDISC_NEIGHBOUR_SOLICITATION 135
#define NDISC_NEIGHBOUR_ADVERTISEMENT 136
#define NDISC_REDIRECT 137
/* ND option types (RFC 4861 4.6, RFC 7527 for the DAD nonce), as in net/ndisc.h. */
#define ND_OPT_SOURCE_LL_ADDR 1
#define ND_OPT_TARGET_LL_ADDR 2
#define ND_OPT_NONCE 14
/* Bytes of an RS (ICMPv6 header + reserved) and of an NS/NA (+ target)
 * before their options; the one option a message may carry is 8 bytes. */
#define ZN_ND_RS_LEN 8
#define ZN_ND_NSNA_LEN 24
#define ZN_ND_OPT_LEN 8
/* A router decrements the hop limit, so ND sent with 255 and received with
 * 255 comes from the link itself (RFC 4861 6.1.1, 7.1.1). */
#define ZN_ND_HOP_LIMIT 255

/* RS, RA, NS, NA and redirect: the ICMPv6 types judged as neighbour discovery. */
static __always_inline int zn_icmp6_is_nd(__u8 type)
{
	return type >= NDISC_ROUTER_SOLICITATION && type <= NDISC_REDIRECT;
}

static __always_inline int zn_is_guest_ip6(const struct zn_session *s, const struct in6_addr *a)
{
	return (!zn_ip6_is_zero(s->guest_ip6) && zn_ip6_eq(a, s->guest_ip6)) ||
	       (!zn_ip6_is_zero(s->guest_ip6_ll) && zn_ip6_eq(a, s->guest_ip6_ll));
}

/* The host's addresses on the TAP. When the session does not know the host's
 * link-local (zero), any link-local unicast address stands for it: wrong only
 * in being generous, and still an address the kernel never routes off-link. */
static __always_inline int zn_is_gateway_ip6(const struct zn_session *s, const struct in6_addr *a)
{
	if (!zn_ip6_is_zero(s->gateway_ip6) && zn_ip6_eq(a, s->gateway_ip6))
		return 1;
	if (zn_ip6_is_zero(s->gateway_ip6_ll))
		return zn_ip6_is_link_local(a);
	return zn_ip6_eq(a, s->gateway_ip6_ll);
}

/* A neighbour solicitation's destination: the target's solicited-node group
 * (address resolution) or the target itself (unreachability detection). */
static __always_inline int zn_nd_ns_dest_ok(const struct in6_addr *dst, const struct in6_addr *target)
{
	return zn_ip6_is_solicited_node_of(dst, target->in6_u.u6_addr8) ||
	       zn_ip6_eq(dst, target->in6_u.u6_addr8);
}

/* The frame carries exactly the IPv6 packet (no trailing bytes), and the
 * message is its fixed part alone or followed by one 8-byte option.
 * Returns 0, 1 (one option follows) or -1 (wrong length). */
static __always_inline int zn_nd_option_count(const struct __sk_buff *skb, const struct ipv6hdr *ip6h,
					      __u32 fixed_len)
{
	__u32 payload_len = bpf_ntohs(ip6h->payload_len);

	if (skb->len != sizeof(struct ethhdr) + sizeof(*ip6h) + payload_len)
		return -1;
	if (payload_len == fixed_len)
		return 0;
	if (payload_len == fixed_len + ZN_ND_OPT_LEN)
		return 1;
	return -1;
}

/* The one option a message may carry, at opt: inside the packet and 8 bytes
 * long (length field 1). Returns 0 or the drop reason. */
static __always_inline __u32 zn_nd_option_shape(const __u8 *opt, const void *data_end)
{
	if ((void *)(opt + ZN_ND_OPT_LEN) > data_end)
		return ZN_DROP_TRUNCATED_L4;
	if (opt[1] != 1)
		return ZN_DROP_ND_MALFORMED;
	return 0;
}

/* The 32 bits after the ICMPv6 header (RFC 4861 4.1-4.4): reserved, all zero,
 * for RS and NS; an NA may set only its R, S and O flags. */
static __always_inline int zn_nd_reserved_ok(const struct icmp6hdr *icmp6)
{
	__u32 word = icmp6->icmp6_dataun.un_data32[0];

	if (icmp6->icmp6_type == NDISC_NEIGHBOUR_ADVERTISEMENT)
		return !(word & bpf_htonl(0x1fffffff));
	return word == 0;
}

#endif /* ZN_ND_H */
