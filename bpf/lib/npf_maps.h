/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps and load-time config of npf_xdp. Layouts are in include/npf/abi.h. */
#ifndef NPF_BPF_MAPS_H
#define NPF_BPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "npf/abi.h"
#include "lib/npf_xsks.h"

/* UDP destination (port, optional address) -> flow (id, gen, region size).
 * Not preallocated: a replaced value is freed after an RCU grace period, so
 * XDP never reads a value while it is being reused. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, NPF_MAX_FLOWS);
	__type(key, struct npf_flow_key);
	__type(value, struct npf_flow);
} npf_flows SEC(".maps");

/* A flow's post ring: one struct npf_ring (mmapable), a map of its own per
 * flow. (value_size, not __type: clang emits a struct reached only through
 * an inner map definition as a forward declaration, and libbpf cannot size it.) */
struct npf_ring_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct npf_ring));
};

/* Flow id -> its post ring map. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, NPF_MAX_FLOWS);
	__type(key, __u32);
	__array(values, struct npf_ring_map);
} npf_rings SEC(".maps");

/* Flow id -> the resident bitmap of the region the flow receives into (the
 * flows of one region share one bitmap map): bit p of word p/64 set = page p
 * is present (mmapable, written by the region's pager). One outer array per
 * size class (NPF_BITMAP_CLASS_PAGES in abi.h), each holding maps of one
 * size, so that XDP's lookups into them are inlined. */
#define NPF_REGIONS_MAP(c)                                                        \
	struct {                                                                  \
		__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);                         \
		__uint(max_entries, NPF_MAX_FLOWS);                               \
		__type(key, __u32);                                               \
		__array(values, struct {                                          \
			__uint(type, BPF_MAP_TYPE_ARRAY);                         \
			__uint(map_flags, BPF_F_MMAPABLE);                        \
			__uint(max_entries, NPF_BITMAP_CLASS_PAGES(c) / 64);      \
			__type(key, __u32);                                       \
			__type(value, __u64);                                     \
		});                                                               \
	}
NPF_REGIONS_MAP(0) npf_regions_0 SEC(".maps");
NPF_REGIONS_MAP(1) npf_regions_1 SEC(".maps");
NPF_REGIONS_MAP(2) npf_regions_2 SEC(".maps");
NPF_REGIONS_MAP(3) npf_regions_3 SEC(".maps");
NPF_REGIONS_MAP(4) npf_regions_4 SEC(".maps");

/* Outcome counters (enum npf_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NPF_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} npf_stats SEC(".maps");

/* Flow id -> the outcomes of that flow's datagrams (struct npf_flow_stats:
 * the counters of npf_stats from NPF_STAT_FLOW_FIRST on, of one generation),
 * per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NPF_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct npf_flow_stats);
} npf_flow_stats SEC(".maps");

/* Load-time: 1 if npf_xdp tail-calls npf_next at all (set by the loader
 * when it chains a program); 0 lets the verifier drop the call, which costs
 * the pass path ~7 ns even with an empty slot (docs/architecture.md). */
const volatile __u32 npf_chain = 0;

/* Slot NPF_NEXT_SLOT: the XDP program that gets what npf_xdp passes (empty:
 * the kernel stack gets it). A program array takes only programs of its
 * owner's kind: XDP, and frags-aware exactly when npf_xdp is loaded so. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} npf_next SEC(".maps");

#endif /* NPF_BPF_MAPS_H */
