/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The slots of the listener lookup's socket map (listener_lookup.bpf.c),
 * shared with userspace (userspace/datapath/listener_lookup.h). The IPv6
 * listener of each kind is the slot after its IPv4 one. */
#ifndef ZN_LISTENER_SLOTS_H
#define ZN_LISTENER_SLOTS_H

#define ZN_LISTENER_PROXY4 0
#define ZN_LISTENER_PROXY6 1
#define ZN_LISTENER_DNS4 2
#define ZN_LISTENER_DNS6 3
#define ZN_LISTENER_SLOTS 4

#endif
