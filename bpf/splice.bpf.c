// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The kernel-side relay of passthrough connections: each skb received on a
 * socket of a relayed pair goes to the egress of its peer, never through
 * user memory. Map layout and the rules in zn_splice.h. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "zn_splice.h"

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, ZN_SPLICE_MAX_SOCKETS);
	__type(key, __u64);
	__type(value, __u64);
} zn_splice_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, ZN_SPLICE_MAX_SOCKETS);
	__type(key, __u64);
	__type(value, __u64);
} zn_splice_armed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ZN_SPLICE_MAX_SOCKETS);
	__type(key, __u64);
	__type(value, struct zn_splice_side);
} zn_splice_sides SEC(".maps");

SEC("sk_skb/stream_verdict")
int zn_splice_verdict(struct __sk_buff *skb)
{
	__u64 cookie = bpf_get_socket_cookie(skb);
	struct zn_splice_side *side;
	__u64 peer;

	/* An skb with no payload is a FIN's own: TCP has already noted the
	 * FIN (the proxy propagates it), and redirecting it would have the
	 * peer's backlog send zero bytes, which it takes for a broken pipe. */
	if (!skb->len)
		return SK_DROP;
	side = bpf_map_lookup_elem(&zn_splice_sides, &cookie);
	/* Not a relayed socket: its bytes stay its own. */
	if (!side)
		return SK_PASS;
	peer = side->peer;
	/* The peer is gone (closed sockets leave the sockhash): a failed
	 * redirect would drop the skb, so hand it to this socket's own reader
	 * instead. The relay is being torn down by then. */
	if (bpf_sk_redirect_hash(skb, &zn_splice_targets, &peer, 0) != SK_PASS)
		return SK_PASS;
	__sync_fetch_and_add(&side->bytes, skb->len);
	side->last_ns = bpf_ktime_get_ns();
	return SK_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
