/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps and load-time config of npf_xdp. Layouts are in include/npf/abi.h. */
#ifndef NPF_BPF_MAPS_H
#define NPF_BPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "npf/abi.h"

/* Region size in pages; set by the loader before load (bitmap is sized to match). */
const volatile __u64 npf_region_pages = NPF_DEFAULT_REGION_PAGES;

/* UDP destination (port, optional address) -> flow id. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, NPF_MAX_FLOWS);
	__type(key, struct npf_flow_key);
	__type(value, struct npf_flow);
} npf_flows SEC(".maps");

/* Post rings of all flows, written by the application (mmapable). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, NPF_MAX_FLOWS * NPF_POST_RING_SIZE);
	__type(key, __u32);
	__type(value, struct npf_post);
} npf_posts SEC(".maps");

/* Post ring cursors, one per flow (mmapable). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, NPF_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct npf_cursor);
} npf_cursors SEC(".maps");

/* Resident bitmap: bit p of word p/64 set = region page p is present (mmapable).
 * max_entries is resized by the loader to cover npf_region_pages. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, NPF_DEFAULT_REGION_PAGES / 64);
	__type(key, __u32);
	__type(value, __u64);
} npf_resident SEC(".maps");

/* AF_XDP sockets: slot NPF_XSK_PRIMARY(q) and NPF_XSK_BACKUP(q) per RX queue q. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, NPF_MAX_QUEUES * 2);
	__type(key, __u32);
	__type(value, __u32);
} npf_xsks SEC(".maps");

/* Outcome counters (enum npf_stat), per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NPF_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} npf_stats SEC(".maps");

#endif /* NPF_BPF_MAPS_H */
