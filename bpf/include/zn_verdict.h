/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counting verdicts and raising rate-limited drop events. */
#ifndef ZN_VERDICT_H
#define ZN_VERDICT_H

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include "zn_abi.h"
#include "zn_maps.h"
#include "zn_parse.h"

#define ZN_NSEC_PER_EVENT 1000000000ULL
/* Longest idle time credited to a bucket; caps elapsed * rate well below 2^64. */
#define ZN_MAX_REFILL_NS 100000000000ULL

enum zn_direction { ZN_DIR_INGRESS = 0, ZN_DIR_EGRESS = 1 };

/* The session on the packet's interface, noted in p for counters and events;
 * NULL (and session index 0) when the interface has none. */
static __always_inline const struct zn_session *zn_lookup_session(struct __sk_buff *skb, struct zn_pkt *p)
{
	__u32 ifindex = skb->ifindex;
	const struct zn_session *s;

	p->ifindex = ifindex;
	s = bpf_map_lookup_elem(&zn_sessions, &ifindex);
	if (s) {
		p->sidx = s->session_idx;
		p->event_rate = s->event_rate;
		p->event_burst = s->event_burst;
	}
	return s;
}

static __always_inline void zn_count(__u32 sidx, __u32 stat)
{
	__u32 key;
	__u64 *value;

	if (sidx >= ZN_MAX_SESSIONS || stat >= ZN_STATS_PER_SESSION)
		return;
	key = sidx * ZN_STATS_PER_SESSION + stat;
	value = bpf_map_lookup_elem(&zn_counters, &key);
	if (value)
		*value += 1;
}

/* Token bucket per session: a flood of drops still counts every packet but
 * sends userspace at most event_rate events per second (plus a burst). Races
 * between CPUs can at worst let a few extra events through. */
static __always_inline int zn_event_allowed(const struct zn_pkt *p, __u64 now)
{
	__u32 sidx = p->sidx;
	__u64 rate = p->event_rate ? p->event_rate : ZN_DEFAULT_EVENT_RATE;
	__u64 burst = p->event_burst ? p->event_burst : ZN_DEFAULT_EVENT_BURST;
	struct zn_event_bucket *b;
	__u64 elapsed, credit, cap;

	b = bpf_map_lookup_elem(&zn_ev_bucket, &sidx);
	if (!b)
		return 0;
	elapsed = now - b->last_ns;
	if (elapsed > ZN_MAX_REFILL_NS)
		elapsed = ZN_MAX_REFILL_NS;
	credit = b->credit_ns + elapsed * rate;
	cap = burst * ZN_NSEC_PER_EVENT;
	if (credit > cap)
		credit = cap;
	b->last_ns = now;
	if (credit < ZN_NSEC_PER_EVENT) {
		b->credit_ns = credit;
		return 0;
	}
	b->credit_ns = credit - ZN_NSEC_PER_EVENT;
	return 1;
}

static __always_inline int zn_pass(const struct zn_pkt *p, __u32 verdict)
{
	zn_count(p->sidx, verdict);
	return TC_ACT_OK;
}

static __always_inline int zn_drop(struct __sk_buff *skb, const struct zn_pkt *p, __u32 reason,
				   __u8 direction)
{
	struct zn_drop_event *e;
	/* Coarse time (tick resolution) is plenty for a per-second budget and
	 * much cheaper than reading the clocksource on every dropped packet. */
	__u64 now_ns = bpf_ktime_get_coarse_ns();

	zn_count(p->sidx, reason);
	if (!zn_event_allowed(p, now_ns)) {
		zn_count(p->sidx, ZN_STAT_EVENTS_SUPPRESSED);
		return TC_ACT_SHOT;
	}
	e = bpf_ringbuf_reserve(&zn_events, sizeof(*e), 0);
	if (!e) {
		zn_count(p->sidx, ZN_STAT_EVENTS_SUPPRESSED);
		return TC_ACT_SHOT;
	}
	e->ts_ns = now_ns;
	e->session_idx = p->sidx;
	e->ifindex = p->ifindex;
	e->reason = reason;
	e->family = p->family;
	e->proto = p->proto;
	e->sport = p->sport;
	e->dport = p->dport;
	e->ethertype = p->ethertype;
	e->direction = direction;
	e->pad0 = 0;
	__builtin_memcpy(e->saddr, &p->saddr, sizeof(e->saddr));
	__builtin_memcpy(e->daddr, &p->daddr, sizeof(e->daddr));
	bpf_ringbuf_submit(e, 0);
	return TC_ACT_SHOT;
}

#endif /* ZN_VERDICT_H */
