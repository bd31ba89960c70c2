/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * zn_abi.h — the map layouts shared by the BPF programs and the C++ userspace.
 *
 * C-compatible, fixed-width, no implicit padding. Every address and port stored
 * in these structs is in network byte order, exactly as it appears on the wire,
 * so BPF compares packet fields without swapping and userspace converts once.
 */
#ifndef ZN_ABI_H
#define ZN_ABI_H

#include <linux/types.h>

/* Session index 0 means "no session": packets on an interface the datapath is
 * attached to but that has no session entry are counted there and dropped.
 * 16384 holds a /16 of /30 guests (issue 11). The maps sized by it cost
 * 19.4 MB of kernel memory on a 2-CPU host (2.7 MB at 2048), 15.7 MB of it
 * zn_counters (40 u64 per session per possible CPU, plus a pointer each)
 * and 3 MB the preallocated zn_sessions hash (measured at ABI 3; ABI 4's
 * 16-byte zn_l4_count summaries add 0.2 MB). */
#define ZN_MAX_SESSIONS 16384
#define ZN_MAX_STEERED_PORTS 8
#define ZN_MAX_EXPOSED_PORTS 8
#define ZN_MAX_L4_RULES 65536
#define ZN_EVENTS_RINGBUF_BYTES (256 * 1024)

/* Defaults the programs and userspace share (each said once). */
#define ZN_DEFAULT_EVENT_RATE 20 /* drop events per second, per session */
#define ZN_DEFAULT_EVENT_BURST 40
#define ZN_DEFAULT_DNS_RATE 1000 /* guest DNS datagrams per second, per session */
#define ZN_DEFAULT_DNS_BURST 4000
#define ZN_DEFAULT_PROXY_PORT 15001 /* the proxy's transparent listener */
#define ZN_DEFAULT_DNS_PORT 15053   /* the DNS responder, UDP and TCP */
#define ZN_DNS_PORT 53		    /* guest DNS (UDP and TCP, any destination) goes to the responder */

/* skb->mark bits. Ingress sets ZN_MARK_STEER on packets it assigns to a host
 * socket so the policy rule "fwmark 0x200/0xf00 lookup 100" routes them locally.
 * Host sockets allowed to answer a guest (proxy, DNS) set SO_MARK to
 * ZN_MARK_HOST_REPLY; egress passes IP packets only when they carry it.
 * zerod's connections to a guest's declared (exposed) ports set SO_MARK to
 * ZN_MARK_EXPOSE: egress passes them to those ports only, and ingress passes
 * the guest's side of them only to the socket carrying the mark. */
#define ZN_MARK_MASK 0xf00
#define ZN_MARK_STEER 0x200
#define ZN_MARK_HOST_REPLY 0x400
#define ZN_MARK_EXPOSE 0x800
#define ZN_STEER_ROUTE_TABLE 100

/* Every verdict: the passes first, then the drop reasons. X(ident, number,
 * "name"). Numbers are explicit and never reused or reordered: counters,
 * drop events and the audit key on them; a new verdict takes the next number
 * and ZN_VERDICT_COUNT moves with it (verdict_names.cpp checks the list is
 * 0..COUNT-1 in order). */
#define ZN_VERDICTS(X)                                  \
	X(PASS_ARP, 0, "pass:arp")                      \
	X(PASS_ND, 1, "pass:nd")                        \
	X(PASS_DNS, 2, "pass:dns")                      \
	X(PASS_STEER, 3, "pass:steer")                  \
	X(PASS_L4, 4, "pass:l4")                        \
	X(PASS_HOST_REPLY, 5, "pass:host_reply")        \
	X(DROP_NO_SESSION, 6, "drop:no_session")        \
	X(DROP_TRUNCATED_ETH, 7, "drop:truncated_eth")  \
	X(DROP_TRUNCATED_ARP, 8, "drop:truncated_arp")  \
	X(DROP_TRUNCATED_IP4, 9, "drop:truncated_ip4")  \
	X(DROP_TRUNCATED_IP6, 10, "drop:truncated_ip6") \
	X(DROP_TRUNCATED_L4, 11, "drop:truncated_l4")   \
	X(DROP_VLAN, 12, "drop:vlan")                   \
	X(DROP_ETHERTYPE, 13, "drop:ethertype")         \
	X(DROP_MAC_SPOOF, 14, "drop:mac_spoof")         \
	X(DROP_ARP_MALFORMED, 15, "drop:arp_malformed") \
	X(DROP_ARP_SPOOF, 16, "drop:arp_spoof")         \
	X(DROP_IP_MALFORMED, 17, "drop:ip_malformed")   \
	X(DROP_IP4_SPOOF, 18, "drop:ip4_spoof")         \
	X(DROP_IP6_SPOOF, 19, "drop:ip6_spoof")         \
	X(DROP_IP4_OPTIONS, 20, "drop:ip4_options")     \
	X(DROP_FRAGMENT, 21, "drop:fragment")           \
	X(DROP_IP6_EXTHDR, 22, "drop:ip6_exthdr")       \
	X(DROP_ND_SPOOF, 23, "drop:nd_spoof")           \
	X(DROP_IP6_MULTICAST, 24, "drop:ip6_multicast") \
	X(DROP_ICMP, 25, "drop:icmp")                   \
	X(DROP_UDP, 26, "drop:udp")                     \
	X(DROP_PROTO, 27, "drop:proto")                 \
	X(DROP_TCP_PORT, 28, "drop:tcp_port")           \
	X(DROP_HOST_SERVICE, 29, "drop:host_service")   \
	X(DROP_NO_LISTENER, 30, "drop:no_listener")     \
	X(DROP_ASSIGN_FAILED, 31, "drop:assign_failed") \
	X(DROP_UNSOLICITED, 32, "drop:unsolicited")     \
	X(DROP_ND_SCOPE, 33, "drop:nd_scope")           \
	X(DROP_ND_MALFORMED, 34, "drop:nd_malformed")   \
	X(PASS_EXPOSED, 35, "pass:exposed")             \
	X(DROP_NOT_EXPOSED, 36, "drop:not_exposed")     \
	X(DROP_DNS_RATE, 37, "drop:dns_rate")

#define ZN_VERDICT_ENUM_(ident, number, name) ZN_##ident = number,
enum zn_verdict { ZN_VERDICTS(ZN_VERDICT_ENUM_) ZN_VERDICT_COUNT = 38 };
#undef ZN_VERDICT_ENUM_

/* Passes are named "pass:", drops "drop:"; pass:exposed came after the
 * drops (numbers never move), so a verdict's kind is its name's, not its
 * number's (verdict_names.h). */
/* Extra per-session counters after the verdicts. */
#define ZN_STAT_EVENTS_SUPPRESSED ZN_VERDICT_COUNT
#define ZN_STATS_PER_SESSION 40
#define ZN_COUNTER_ENTRIES (ZN_MAX_SESSIONS * ZN_STATS_PER_SESSION)

/* zn_sessions: TAP ifindex -> what the guest on it is. */
struct zn_session {
	__u32 session_idx; /* 1..ZN_MAX_SESSIONS-1 */
	__u32 flags;	   /* reserved, 0 */
	__u8 guest_mac[6];
	__u8 pad0[2];
	__u32 guest_ip4;       /* 0 = the guest has no IPv4 */
	__u32 gateway_ip4;     /* the host's address on the TAP */
	__u8 guest_ip6[16];    /* all zero = the guest has no IPv6 */
	__u8 guest_ip6_ll[16]; /* the guest's link-local, for neighbour discovery */
	__u8 gateway_ip6[16];
	__u16 steered_ports[ZN_MAX_STEERED_PORTS]; /* TCP, network order, 0 = unused */
	__u32 event_rate;			   /* drop events per second to userspace */
	__u32 event_burst;
	/* The host's link-local on the TAP, the other address guests find the
	 * gateway by; all zero = not known (an adopted device), and then any
	 * link-local unicast address stands for it, which still cannot leave
	 * the link. Last, so the offsets of the fields above did not move. */
	__u8 gateway_ip6_ll[16];
	/* TCP ports zerod may connect to on the guest (znctl session expose),
	 * network order, 0 = unused. Nothing else ever opens a path inward. */
	__u16 exposed_ports[ZN_MAX_EXPOSED_PORTS];
	/* The guest's DNS datagrams per second to the host's resolver (plus a
	 * burst), 0 = the defaults: past it they are dropped here, before the
	 * responder's one socket shared by every guest (issue 32: a flood of
	 * random names from one guest starved the others' lookups). */
	__u32 dns_rate;
	__u32 dns_burst;
};

/* zn_listeners (one entry): where the host sockets live that guests reach. */
struct zn_listeners {
	__u32 proxy_ip4;
	__u32 dns_ip4;
	__u8 proxy_ip6[16];
	__u8 dns_ip6[16];
	__u16 proxy_port;
	__u16 dns_port; /* UDP and TCP */
};

/* zn_l4_allow (LPM trie): destinations a session may reach with raw TCP, one
 * entry per (session, family, address prefix) carrying the ports allowed there.
 * Matching: session, family and proto always match exactly (they are the first
 * ZN_L4_KEY_FIXED_BITS bits); the address matches by longest prefix, and the
 * port is then checked in the value: one trie lookup per packet. Longest-prefix
 * match alone would let a /32 entry hide the ports of a covering /16, so
 * userspace folds every covering prefix's ports into each entry
 * (dp::fold_l4_rules): an entry's value is everything the session allows for
 * the addresses it covers and no covering entry needs to be looked at. */
struct zn_l4_key {
	__u32 prefixlen; /* ZN_L4_KEY_FIXED_BITS + address prefix length */
	__u32 session_idx;
	__u8 family;   /* 4 or 6 */
	__u8 proto;    /* IPPROTO_TCP */
	__u16 pad0;    /* 0 */
	__u8 addr[16]; /* IPv4 in the first four bytes */
};
#define ZN_L4_KEY_FIXED_BITS 64
/* Distinct ports one prefix may allow after folding (any-port aside). */
#define ZN_L4_MAX_PORTS 28

struct zn_l4_value {
	__u32 rule_id;		      /* the first rule for exactly this prefix (for znctl) */
	__u8 any_port;		      /* 1: every port (this prefix's rule or a covering one's) */
	__u8 nports;		      /* ports[0..nports) are allowed (when !any_port) */
	__u8 own_any;		      /* this very prefix has an any-port rule */
	__u8 own_nports;	      /* ports[0..own_nports) are this very prefix's rules' */
	__u16 ports[ZN_L4_MAX_PORTS]; /* network order: own first, then inherited */
};

/* zn_l4_count: per session, what its zn_l4_allow entries can allow at all, so
 * most denied TCP skips the trie: a session without entries, or one without
 * an any-port rule whose rules name no port in the packet's port_bits slot.
 * A bit set is only a maybe (ports share slots); the trie decides. */
struct zn_l4_summary {
	__u32 entries;	 /* the session's zn_l4_allow entries */
	__u32 any_port;	 /* 1: some rule allows every port */
	__u64 port_bits; /* bit (port % 64), host-order port, for every port a rule names */
};

/* zn_ev_bucket: per-session token bucket limiting drop events, in the
 * programs' bucket clock (jiffies, or coarse ns where HZ is unknown). */
struct zn_event_bucket {
	__u64 last;
	__u64 credit; /* one event costs a second's worth of the clock */
};

/* zn_events (ring buffer): one record per (rate-limited) dropped packet. */
struct zn_drop_event {
	__u64 ts_ns; /* CLOCK_MONOTONIC_COARSE */
	__u32 session_idx;
	__u32 ifindex;
	__u16 reason; /* enum zn_verdict */
	__u8 family;  /* 4, 6, or 0 for non-IP frames */
	__u8 proto;
	__u16 sport;	 /* network order */
	__u16 dport;	 /* network order */
	__u16 ethertype; /* network order */
	__u8 direction;	 /* 0 ingress (from guest), 1 egress (to guest) */
	__u8 pad0;
	__u8 saddr[16];
	__u8 daddr[16];
};

/* The ABI of the pinned maps: bump whenever a shared struct, a map's key or
 * value, or the meaning of a verdict number changes. zerod records it in the
 * pinned zn_abi map and refuses to re-adopt pins of another version (their
 * maps cannot be reused) with a clear message instead of libbpf's.
 * 1: before the marker existed; 2: zn_session.gateway_ip6_ll; 3: the
 * per-session maps sized for 16384 sessions (was 2048); 4: zn_l4_allow keyed
 * by prefix alone, the (folded) ports in its value, zn_l4_count's value a
 * struct zn_l4_summary (was the entry count), zn_ev_bucket in jiffies;
 * 5: zn_session.exposed_ports, verdicts pass:exposed and drop:not_exposed
 * (events:suppressed moved to counter 37); 6: zn_session.dns_rate and
 * dns_burst, zn_dns_bucket, verdict drop:dns_rate (events:suppressed moved to
 * counter 38). */
#define ZN_ABI_VERSION 6

/* Layouts are fixed: a size change is an ABI change (bump ZN_ABI_VERSION). */
#ifdef __cplusplus
#define ZN_ABI_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define ZN_ABI_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
ZN_ABI_ASSERT(sizeof(struct zn_session) == 136, "struct zn_session layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_listeners) == 44, "struct zn_listeners layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_l4_key) == 28, "struct zn_l4_key layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_l4_value) == 64, "struct zn_l4_value layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_l4_summary) == 16, "struct zn_l4_summary layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_event_bucket) == 16, "struct zn_event_bucket layout changed");
ZN_ABI_ASSERT(sizeof(struct zn_drop_event) == 64, "struct zn_drop_event layout changed");
ZN_ABI_ASSERT(ZN_VERDICT_COUNT < ZN_STATS_PER_SESSION, "per-session counters have no room for the verdicts");

#endif /* ZN_ABI_H */
