/* The kernel-side relay of passthrough connections (splice.bpf.c): its maps'
 * keys and values, shared by the program and the proxy (kernel_splice.cpp).
 * Separate from zn_abi.h: these maps are never pinned, each proxy loads its
 * own copy, so a layout change needs no ABI bump.
 *
 * Every socket is keyed by its socket cookie (SO_COOKIE,
 * bpf_get_socket_cookie): stable for the socket's life, never reused.
 *
 *   zn_splice_targets  SOCKHASH cookie -> socket: both sockets of every relayed
 *                      pair, the targets of bpf_sk_redirect_hash. No program.
 *   zn_splice_armed    SOCKHASH cookie -> socket: the same sockets once the
 *                      pair is complete; the stream verdict is attached here,
 *                      so it only runs on a socket whose peer is already a
 *                      target.
 *   zn_splice_sides    HASH cookie -> struct zn_splice_side: where a socket's
 *                      bytes go and what moved. A socket without an entry is
 *                      never redirected (SK_PASS: its own reader gets them).
 */
#pragma once

#include <linux/types.h>

/* Default capacity of each map (sockets, two per relayed connection); the
 * proxy sizes them from its connection cap before loading. */
#define ZN_SPLICE_MAX_SOCKETS 8192

struct zn_splice_side {
	__u64 peer;    /* the peer socket's cookie (its zn_splice_targets key) */
	__u64 bytes;   /* bytes received here and redirected to the peer */
	__u64 last_ns; /* bpf_ktime_get_ns() of the last redirect (CLOCK_MONOTONIC) */
};

#ifdef __cplusplus
static_assert(sizeof(struct zn_splice_side) == 24, "zn_splice_side layout");
#else
_Static_assert(sizeof(struct zn_splice_side) == 24, "zn_splice_side layout");
#endif
