// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The listener lookup of the host's namespace (BPF_SK_LOOKUP) for TCP from a
 * governed device: zerod's own listener, as TC ingress (tap_ingress.bpf.c)
 * would have chosen.
 *
 * Why: TC ingress assigns each steered packet to the socket that holds its
 * four-tuple, else to the listener. When zerod closed a guest's connection
 * first (Connection: close, a refusal), the host holds that four-tuple in
 * TIME_WAIT for 60 s, and a guest that opens its next connection from the
 * same port sends a SYN that TC hands to the TIME_WAIT socket. The kernel
 * would accept that SYN for a listener bound to the original destination
 * (tcp_v4_rcv: TCP_TW_SYN, then a listener lookup), but zerod's transparent
 * listener is bound elsewhere: none is found, the SYN is answered with the
 * old connection's ACK, the guest resets and retries its SYN later (measured
 * on veth guests: a third of all connects took 10-16 ms instead of 0.1).
 * This program is that listener lookup: the TIME_WAIT is retired and the
 * SYN reaches zerod's listener. TC ingress has judged every packet that gets
 * here: a governed device's TCP is delivered locally only where it steered
 * it, so the port decides which listener (53: DNS, else the proxy), never
 * the policy. With no such listener the packet is dropped (fail closed),
 * never handed to whatever else the host listens on. TC ingress's own
 * lookups of a listener's address (bpf_skc_lookup_tcp) run this program as
 * well: those are left to the kernel's lookup.
 */
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "zn_abi.h"
#include "zn_maps.h"
#include "zn_listener_slots.h"

#define ZN_AF_INET6 10

/* The host's listeners, by slot (zn_listener_slots.h); zerod fills it. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, ZN_LISTENER_SLOTS);
} zn_listen_socks SEC(".maps");

/* The lookup's local (or remote) address against an address of the maps
 * (network order). */
static __always_inline int zn_addr_is(const struct bpf_sk_lookup *ctx, int remote, __u32 ip4, const __u8 *ip6)
{
	int i;

	if (ctx->family != ZN_AF_INET6)
		return (remote ? ctx->remote_ip4 : ctx->local_ip4) == ip4;
	for (i = 0; i < 4; i++) {
		__u32 w;

		__builtin_memcpy(&w, ip6 + 4 * i, 4);
		if ((remote ? ctx->remote_ip6[i] : ctx->local_ip6[i]) != w)
			return 0;
	}
	return 1;
}

/* Whether the lookup asks for a listener's own address and port: TC
 * ingress's bpf_skc_lookup_tcp of the listener tuple runs this program too,
 * and must find exactly the listener it named (the kernel's lookup does). */
static __always_inline int zn_names_listener(const struct bpf_sk_lookup *ctx, __u32 ip4, const __u8 *ip6,
					     __u16 port_be)
{
	return ctx->local_port == bpf_ntohs(port_be) && zn_addr_is(ctx, 0, ip4, ip6);
}

SEC("sk_lookup")
int zn_listener_lookup(struct bpf_sk_lookup *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex, slot, zero = 0;
	const struct zn_listeners *ln;
	const struct zn_session *s;
	struct bpf_sock *sk;
	long err;

	if (ctx->protocol != IPPROTO_TCP)
		return SK_PASS;
	s = bpf_map_lookup_elem(&zn_sessions, &ifindex);
	if (!s)
		return SK_PASS; /* not a governed device: the host's own lookup */
	/* Only the guest's own packets (TC ingress drops any other source):
	 * the host's connections to its own address on the device (ingress
	 * ifindex is the device's there too) are the host's own lookup. */
	if (!zn_addr_is(ctx, 1, s->guest_ip4, s->guest_ip6))
		return SK_PASS;
	ln = bpf_map_lookup_elem(&zn_listeners, &zero);
	if (!ln)
		return SK_DROP;
	if (zn_names_listener(ctx, ln->proxy_ip4, ln->proxy_ip6, ln->proxy_port) ||
	    zn_names_listener(ctx, ln->dns_ip4, ln->dns_ip6, ln->dns_port))
		return SK_PASS; /* TC ingress looking its listener up */
	slot = ctx->local_port == ZN_DNS_PORT ? ZN_LISTENER_DNS4 : ZN_LISTENER_PROXY4;
	if (ctx->family == ZN_AF_INET6)
		slot += 1;
	sk = bpf_map_lookup_elem(&zn_listen_socks, &slot);
	if (!sk)
		return SK_DROP;
	err = bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	return err ? SK_DROP : SK_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
