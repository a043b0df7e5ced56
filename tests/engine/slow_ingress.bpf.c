// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* tc ingress program for tests: UDP datagrams to npf_slow_port spin for a
 * while in the kernel stack. The kernel delivers packets that XDP passes in
 * batches inside the same NAPI poll that redirected the frames before them,
 * and publishes those redirects to the AF_XDP rings only at the end of the
 * poll: slow packets after a flow datagram hold it between XDP's claim and
 * its ring, as a preempted or overloaded softirq does. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

const volatile __u16 npf_slow_port = 0;
const volatile __u32 npf_spin_loops = 1;
__u64 npf_slow_seen = 0; /* slow packets that entered the program */

static long spin(__u32 i, void *ctx)
{
	return 0;
}

SEC("tc")
int npf_slow_ingress(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 ||
	    ip->protocol != IPPROTO_UDP || udp->dest != bpf_htons(npf_slow_port))
		return TC_ACT_OK;
	__sync_fetch_and_add(&npf_slow_seen, 1);
	bpf_loop(npf_spin_loops, spin, NULL, 0);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
