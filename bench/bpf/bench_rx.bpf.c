// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * npfb_rx: receive side of the non-npf contenders. UDP datagrams to `port`
 * go to the AF_XDP socket of the RX queue; with no socket in the slot (the
 * kernel-socket contenders) bpf_redirect_map falls back to XDP_PASS. Being
 * a native XDP program it also gives the veth the NAPI context that frames
 * redirected by the generator need.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "../bench_abi.h"

const volatile __u16 port = 0; /* host byte order */

/* AF_XDP socket per RX queue. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, NPFB_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} npfb_xsks SEC(".maps");

SEC("xdp")
int npfb_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct udphdr *udp;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || ip->protocol != IPPROTO_UDP)
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(port))
		return XDP_PASS;
	return bpf_redirect_map(&npfb_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
