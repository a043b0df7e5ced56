// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Another's XDP program (a CNI's, say) for npf to chain behind npf_xdp:
 * counts every packet it sees and passes it. Two kinds, one counter: a
 * program array takes one kind only (xdp_chain_test.cpp). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* [0]: packets seen by either program. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} count_seen SEC(".maps");

static __always_inline int count_pass(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&count_seen, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return XDP_PASS;
}

SEC("xdp")
int count_plain(struct xdp_md *ctx)
{
	return count_pass();
}

SEC("xdp.frags")
int count_frags(struct xdp_md *ctx)
{
	return count_pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
