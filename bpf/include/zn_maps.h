/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of the TAP datapath. Both programs include this file; userspace
 * pins the ingress object's maps and hands the same fds to the egress object,
 * so the definitions here must stay identical for both. */
#ifndef ZN_MAPS_H
#define ZN_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "zn_abi.h"

/* TAP ifindex -> the session (guest identity, steered ports) on that TAP. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, struct zn_session);
	__uint(max_entries, ZN_MAX_SESSIONS);
} zn_sessions SEC(".maps");

/* Single entry: addresses of the host's proxy and DNS sockets. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct zn_listeners);
	__uint(max_entries, 1);
} zn_listeners SEC(".maps");

/* (session, family, proto, address prefix) -> the TCP ports allowed there. */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__type(key, struct zn_l4_key);
	__type(value, struct zn_l4_value);
	__uint(max_entries, ZN_MAX_L4_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} zn_l4_allow SEC(".maps");

/* [session] -> its zn_l4_allow entries in summary (count, any-port, ports
 * seen): lets most denied TCP skip the trie lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct zn_l4_summary);
	__uint(max_entries, ZN_MAX_SESSIONS);
} zn_l4_count SEC(".maps");

/* [session * ZN_STATS_PER_SESSION + verdict] -> packets, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
	__uint(max_entries, ZN_COUNTER_ENTRIES);
} zn_counters SEC(".maps");

/* Drop events for userspace (struct zn_drop_event records). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ZN_EVENTS_RINGBUF_BYTES);
} zn_events SEC(".maps");

/* [session] -> token bucket that rate-limits drop events. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct zn_event_bucket);
	__uint(max_entries, ZN_MAX_SESSIONS);
} zn_ev_bucket SEC(".maps");

/* [session] -> token bucket that rate-limits the guest's DNS datagrams. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct zn_event_bucket);
	__uint(max_entries, ZN_MAX_SESSIONS);
} zn_dns_bucket SEC(".maps");

/* Single entry: ZN_ABI_VERSION of the maps pinned beside it, written by
 * userspace after loading; no program reads it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} zn_abi SEC(".maps");

#endif /* ZN_MAPS_H */
