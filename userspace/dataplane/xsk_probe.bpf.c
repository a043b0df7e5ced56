// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * npf_xsk_probe: reports which slots of an instance's npf_xsks map hold a
 * socket, and the socket's queue. Userspace cannot read an XSKMAP, but an
 * XDP program can; npfctl runs this once with BPF_PROG_TEST_RUN after
 * pointing npf_xsks at the pinned map (bpf_map__reuse_fd). Never attached.
 */
#include "lib/npf_xsks.h"

/* Slots probed: max_entries of the reused map. */
const volatile __u32 npf_probe_slots = NPF_MAX_QUEUES * 2;

/* Per slot: 1 + the bound socket's queue id, or 0 if the slot is empty. */
__u32 npf_probe_out[NPF_MAX_QUEUES * 2];

SEC("xdp")
int npf_xsk_probe(struct xdp_md *ctx)
{
	for (__u32 i = 0; i < NPF_MAX_QUEUES * 2; i++) {
		struct bpf_xdp_sock *xs;
		__u32 key = i;

		if (i >= npf_probe_slots)
			break;
		xs = bpf_map_lookup_elem(&npf_xsks, &key);
		npf_probe_out[i] = xs ? xs->queue_id + 1 : 0;
	}
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
