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

/* Longest idle time credited to a bucket, in seconds; caps elapsed * rate
 * well below 2^64. */
#define ZN_MAX_REFILL_S 100ULL

/* The kernel's tick rate, from its config (libbpf fills it in at load; 0 if
 * no config can be found). */
extern const unsigned int CONFIG_HZ __kconfig __weak;

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

/* The buckets' clock: jiffies where HZ is known (the verifier inlines
 * bpf_jiffies64 to one load, where a coarse-ns read is a helper call and a
 * timespec conversion: on a flood of drops this is per packet), else coarse
 * ns. Both tick at the same resolution, plenty for a per-second budget.
 * CONFIG_HZ is constant at load, so the verifier drops the other branch. */
static __always_inline __u64 zn_bucket_now(void)
{
	return CONFIG_HZ ? bpf_jiffies64() : bpf_ktime_get_coarse_ns();
}

/* Clock units per second: what one event costs at a rate of 1/s. */
static __always_inline __u64 zn_bucket_unit(void)
{
	return CONFIG_HZ ? CONFIG_HZ : 1000000000ULL;
}

/* One token of a per-session bucket (zn_ev_bucket, zn_dns_bucket) refilled
 * at `rate` per second up to `burst`; 0 when it is empty. Races between CPUs
 * can at worst let a few extra through. */
static __always_inline int zn_bucket_take(void *buckets, __u32 sidx, __u64 rate, __u64 burst)
{
	__u64 unit = zn_bucket_unit();
	struct zn_event_bucket *b;
	__u64 now, elapsed, credit, cap;

	b = bpf_map_lookup_elem(buckets, &sidx);
	if (!b)
		return 0;
	now = zn_bucket_now();
	elapsed = now - b->last;
	if (elapsed > ZN_MAX_REFILL_S * unit)
		elapsed = ZN_MAX_REFILL_S * unit;
	credit = b->credit + elapsed * rate;
	cap = burst * unit;
	if (credit > cap)
		credit = cap;
	b->last = now;
	if (credit < unit) {
		b->credit = credit;
		return 0;
	}
	b->credit = credit - unit;
	return 1;
}

/* A flood of drops still counts every packet but sends userspace at most
 * event_rate events per second (plus a burst). */
static __always_inline int zn_event_allowed(const struct zn_pkt *p)
{
	return zn_bucket_take(&zn_ev_bucket, p->sidx, p->event_rate ? p->event_rate : ZN_DEFAULT_EVENT_RATE,
			      p->event_burst ? p->event_burst : ZN_DEFAULT_EVENT_BURST);
}

/* A guest's DNS datagram within its session's rate. */
static __always_inline int zn_dns_allowed(const struct zn_session *s, const struct zn_pkt *p)
{
	return zn_bucket_take(&zn_dns_bucket, p->sidx, s->dns_rate ? s->dns_rate : ZN_DEFAULT_DNS_RATE,
			      s->dns_burst ? s->dns_burst : ZN_DEFAULT_DNS_BURST);
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

	zn_count(p->sidx, reason);
	if (!zn_event_allowed(p)) {
		zn_count(p->sidx, ZN_STAT_EVENTS_SUPPRESSED);
		return TC_ACT_SHOT;
	}
	e = bpf_ringbuf_reserve(&zn_events, sizeof(*e), 0);
	if (!e) {
		zn_count(p->sidx, ZN_STAT_EVENTS_SUPPRESSED);
		return TC_ACT_SHOT;
	}
	/* Coarse time: tick resolution, without reading the clocksource. */
	e->ts_ns = bpf_ktime_get_coarse_ns();
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
