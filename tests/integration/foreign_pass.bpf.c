// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A program that is not npf's: npfctl must refuse to replace it without --force. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int itest_foreign(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
