/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Declared ports (znctl session expose): the one inward path to a guest.
 * zerod connects from the gateway address to the guest's declared port with
 * SO_MARK ZN_MARK_EXPOSE; egress passes that socket's packets to declared
 * ports only, and ingress passes the guest's side of the connection only to
 * a socket carrying the mark. No listener of the host is ever reachable.
 */
#ifndef ZN_EXPOSED_H
#define ZN_EXPOSED_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "zn_abi.h"

/* port: network order. 0 marks an unused slot and matches nothing. */
static __always_inline int zn_port_exposed(const struct zn_session *s, __u16 port)
{
	if (!port)
		return 0;
#pragma unroll
	for (int i = 0; i < ZN_MAX_EXPOSED_PORTS; i++) {
		if (s->exposed_ports[i] == port)
			return 1;
	}
	return 0;
}

#endif /* ZN_EXPOSED_H */
