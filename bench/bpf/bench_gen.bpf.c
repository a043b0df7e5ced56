// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * npfb_gen: the traffic generator, run with bpf_prog_test_run_opts and
 * BPF_F_TEST_XDP_LIVE_FRAMES on the tx veth. Every run stamps the template
 * frame with the next sequence number and the time, picks a source port
 * (flow), sets the UDP checksum and transmits it (XDP_TX = out of the tx
 * veth into its peer). Live frames are not re-initialised between runs, so
 * everything that varies is rewritten every time.
 */
#include <linux/bpf.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "../bench_abi.h"

const volatile __u16 sport_base = 40000;
const volatile __u32 nflows = 1;
/* Nonzero: write a correct UDP checksum; zero: leave the template's 0 ("none"). */
const volatile __u8 udp_csum = 0;
/* Ones' complement sum (memory byte order, folded) of the UDP pseudo-header,
 * header and payload with the fields this program writes taken as zero
 * (source port, checksum, npfb_hdr); computed by userspace from the template
 * (npf::bench::configureGenerator). */
const volatile __u16 csum_fixed = 0;

/* Packets generated (the next sequence number). */
__u64 npfb_seq = 0;

/* RFC 1624 incremental update against the template rather than against the
 * frame's previous content: checksum = ~(fixed part + the fields written
 * now). Memory-order 32-bit words folded to 16 bits give the same sum as the
 * 16-bit network-order words (RFC 1071, byte order independence). */
static __always_inline __u16 npfb_udp_csum(__u16 sport_be, __u32 flow, __u64 seq, __u64 tstamp)
{
	__u64 s = (__u64)csum_fixed + sport_be + NPFB_MAGIC + flow + (__u32)seq + (seq >> 32) +
		  (__u32)tstamp + (tstamp >> 32);

	s = (s & 0xffffffff) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	__u16 c = (__u16)~s;
	return c ? c : 0xffff; /* 0 would mean "no checksum" */
}

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
	__u64 tstamp = bpf_ktime_get_ns();
	__u16 sport_be = bpf_htons(sport_base + flow);

	h->magic = NPFB_MAGIC;
	h->flow = flow;
	h->seq = seq;
	h->tstamp = tstamp;
	udp->source = sport_be;
	if (udp_csum)
		udp->check = npfb_udp_csum(sport_be, flow, seq, tstamp);
	return XDP_TX;
}

/* Asks whether this kernel runs XDP live frames at all (some refuse them:
 * EPERM) without sending anything (npf::bench::liveFramesRefused). */
SEC("xdp")
int npfb_probe(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
