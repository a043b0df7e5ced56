/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* npf-bench payload header, shared by the generator's XDP program
 * (bpf/bench_gen.bpf.c) and the receivers that verify what they got. */
#ifndef NPF_BENCH_ABI_H
#define NPF_BENCH_ABI_H

#include <linux/types.h>

#define NPFB_MAGIC 0x4250464eu /* "NFPB" little endian */
/* Ethernet + IPv4 (no options) + UDP: where the payload starts. */
#define NPFB_PAYLOAD_OFF (14 + 20 + 8)
#define NPFB_UDP_OFF (14 + 20)
/* Largest xskmap of the rx program. */
#define NPFB_MAX_QUEUES 64

/* First bytes of every generated payload; byte i >= sizeof(hdr) of the
 * payload is npfb_pattern(i). */
struct npfb_hdr {
	__u32 magic;
	__u32 flow;   /* source-port index */
	__u64 seq;    /* generator-wide sequence, 0, 1, 2, ... */
	__u64 tstamp; /* CLOCK_MONOTONIC ns when the packet was generated */
};

static inline __u8 npfb_pattern(__u32 i)
{
	return (__u8)(i * 31u + 7u);
}

#ifdef __cplusplus
static_assert(sizeof(struct npfb_hdr) == 24);
#endif

#endif
