// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * npfb_gen: the traffic generator, run with bpf_prog_test_run_opts and
 * BPF_F_TEST_XDP_LIVE_FRAMES on the tx veth. Every run stamps the template
 * frame with the next sequence number and the time, picks a source port
 * (flow) and transmits it (XDP_TX = out of the tx veth into its peer).
 * Live frames are not re-initialised between runs, so everything that
 * varies is rewritten every time.
 */
#include <linux/bpf.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "../bench_abi.h"

const volatile __u16 sport_base = 40000;
const volatile __u32 nflows = 1;

/* Packets generated (the next sequence number). */
__u64 npfb_seq = 0;

SEC("xdp")
int npfb_gen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct npfb_hdr *h = data + NPFB_PAYLOAD_OFF;
	struct udphdr *udp = data + NPFB_UDP_OFF;

	if ((void *)(h + 1) > end)
		return XDP_ABORTED;
	__u64 seq = __sync_fetch_and_add(&npfb_seq, 1);
	__u32 flow = nflows > 1 ? (__u32)(seq % nflows) : 0;

	h->magic = NPFB_MAGIC;
	h->flow = flow;
	h->seq = seq;
	h->tstamp = bpf_ktime_get_ns();
	udp->source = bpf_htons(sport_base + flow); /* UDP checksum is 0 (not used) */
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
