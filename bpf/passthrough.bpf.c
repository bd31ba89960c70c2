// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The baseline for the verdict benchmark: a TC program that passes everything. */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

SEC("tc")
int zn_passthrough(struct __sk_buff *skb)
{
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
