/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* npf_xsks, the AF_XDP socket map: npf_xdp redirects into it; npfctl's
 * npf_xsk_probe (userspace/dataplane/xsk_probe.bpf.c) reads an instance's pinned
 * one through its own definition, which must match. */
#ifndef NPF_BPF_XSKS_H
#define NPF_BPF_XSKS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "npf/abi.h"

/* Slot NPF_XSK_PRIMARY(q) and NPF_XSK_BACKUP(q) per RX queue q. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, NPF_MAX_QUEUES * 2);
	__type(key, __u32);
	__type(value, __u32);
} npf_xsks SEC(".maps");

#endif /* NPF_BPF_XSKS_H */
