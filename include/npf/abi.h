/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * npf ABI: the one definition of everything shared by the XDP program
 * (bpf/npf_xdp.bpf.c) and userspace (libnpf, npfctl, npfd, tests).
 *
 * Fixed-width types, explicit padding, no pointers. The C++ side checks
 * every size with static_assert at the bottom of this file.
 */
#ifndef NPF_ABI_H
#define NPF_ABI_H

#include <linux/types.h>

#define NPF_ABI_VERSION 5

/* The layouts an npfd client maps, apart from the library's interface: the
 * post ring (npf_ring: npf_cursor, npf_post) and the completion ring
 * (npf_completion_ring, npf_completion). It changes only when one of them
 * does, and the npfd protocol with it (kProtocolVersion in
 * userspace/ipc/protocol.h, docs/protocol.md "Versioning");
 * npf_completion_ring.version carries it. Numbered on from ABI 5's layouts,
 * whose number it keeps. */
#define NPF_RING_LAYOUT_VERSION 5

/* ---- limits --------------------------------------------------------- */

/* Flows a program instance can serve (flow ids are 0 .. NPF_MAX_FLOWS-1). */
#define NPF_MAX_FLOWS 1024
/* RX queues a program instance can serve (AF_XDP socket pairs). */
#define NPF_MAX_QUEUES 64
/* Posted receive buffers per flow; a power of two. */
#define NPF_POST_RING_SIZE 4096
/* Residency granule: one bit of the resident bitmap per 4 KiB page. */
#define NPF_PAGE_SHIFT 12
#define NPF_PAGE_SIZE (1u << NPF_PAGE_SHIFT)
/* Largest datagram payload npf steers: jumbo frames (MTU 9000) fit; a
 * larger payload passes to the kernel (NPF_STAT_PASS_TOO_BIG). Above ~3.5 KB
 * a packet arrives in several XDP buffers (frags) and AF_XDP descriptors. */
#define NPF_MAX_PAYLOAD 9216
/* Pages one payload can touch: NPF_MAX_PAYLOAD spread over page borders. */
#define NPF_MAX_PKT_PAGES ((NPF_MAX_PAYLOAD + NPF_PAGE_SIZE - 1) / NPF_PAGE_SIZE + 1)
/* CAS attempts on a contended flow cursor before the packet is dropped
 * (counted NPF_STAT_DROP_CONTENDED). */
#define NPF_CAS_RETRIES 8
/* Largest region (1 TiB; its bitmap is 32 MiB). */
#define NPF_MAX_REGION_PAGES (1ull << 28)
/* Resident bitmaps come in size classes: XDP's lookups into an inner map are
 * inlined only when every map of its outer array has one size. A region of
 * up to NPF_BITMAP_CLASS_PAGES(c) pages (the smallest class that fits) has a
 * bitmap of NPF_BITMAP_CLASS_PAGES(c) / 64 words, bound to its flows in
 * npf_regions_<c>: 64 MiB, 1 GiB, 16 GiB, 256 GiB, 1 TiB. */
#define NPF_BITMAP_CLASSES 5
#define NPF_BITMAP_CLASS_PAGES(c) (1ull << ((c) < 4 ? 14 + 4 * (c) : 28))

/* ---- pins: NPF_PIN_ROOT/netns-<inode>/<ifname>/<map name> ----------- */
/* <inode>: the network namespace's nsfs inode, so that same-named interfaces
 * of two namespaces each have an instance (docs/cli.md, "Pins and network
 * namespaces"). Beside the maps: the program itself (NPF_PROG_NAME) and each
 * flow's post ring map (ring-<flow id>, the map npf_rings[id] holds). */

#define NPF_PIN_ROOT "/sys/fs/bpf/npf"
#define NPF_PROG_NAME "npf_xdp"

/* ---- the program chained behind npf_xdp (npfctl attach --then) ----- */
/* npf_next (a BPF_MAP_TYPE_PROG_ARRAY, pinned under its name) holds it at
 * slot NPF_NEXT_SLOT: every packet npf_xdp passes is tail-called into it;
 * an empty slot passes to the kernel. The program itself is pinned beside
 * it (NPF_NEXT_PROG_PIN) so that detach can put it back on the interface. */
#define NPF_NEXT_MAP "npf_next"
#define NPF_NEXT_SLOT 0
#define NPF_NEXT_PROG_PIN "npf_next_prog"

/* ---- per-packet metadata -------------------------------------------- */

#define NPF_META_MAGIC 0x4e50 /* "NP" */
#define NPF_META_VERSION 2

/* npf_meta.flags */
#define NPF_META_F_BACKUP    0x01 /* destination not resident: fault path */
#define NPF_META_F_TRUNCATED 0x02 /* payload longer than the posted buffer */
#define NPF_META_F_NO_CSUM   0x04 /* UDP over IPv4 with checksum 0: nothing to verify */

/* Primary frames XDP timestamps (npf_meta.tstamp): one seq in this many. */
#define NPF_FAST_STAMP_EVERY 16

/* Written by XDP in front of every steered packet (bpf_xdp_adjust_head):
 * the AF_XDP frame starts with these 32 bytes, the packet follows them. */
struct npf_meta {
	__u16 magic;       /* NPF_META_MAGIC */
	__u8 version;      /* NPF_META_VERSION */
	__u8 flags;        /* NPF_META_F_* */
	__u16 flow;        /* flow id */
	__u16 payload_off; /* UDP payload offset from the start of the packet */
	__u32 seq;         /* per-flow sequence = index of the consumed post */
	__u32 len;         /* bytes to place: min(payload, posted buffer) */
	__u64 offset;      /* destination offset in the region */
	__u32 tstamp;      /* low 32 bits of bpf_ktime_get_ns() when XDP steered the packet;
	                    * 0: not stamped. Every backup frame is; a primary frame only if
	                    * seq % NPF_FAST_STAMP_EVERY == 0 (the clock read is a fifth of
	                    * npf_xdp's cost on a VM: the fast path's latency is a sample) */
	__u16 gen;         /* low 16 bits of the flow's generation (npf_flow.gen) */
	__u16 csum;        /* ones' complement sum of the UDP pseudo-header and header, folded
	                    * to 16 bits, of the 16-bit words as they lie in memory: adding the
	                    * payload's sum must give 0xffff (unless NPF_META_F_NO_CSUM) */
};

/* ---- flows ---------------------------------------------------------- */

/* npf_flow_key.family: 0 matches any destination address. */
#define NPF_FAMILY_ANY  0
#define NPF_FAMILY_IPV4 4
#define NPF_FAMILY_IPV6 6

/* Key of npf_flows: UDP destination port, optionally with the address
 * (IPv4 in addr[0..3], rest zero). Lookup tries the exact address first,
 * then the wildcard {family 0, addr 0}. */
struct npf_flow_key {
	__u8 addr[16];
	__u16 port; /* network byte order */
	__u8 family;
	__u8 pad;
};

/* Value of npf_flows. gen must equal the cursor's gen: an entry whose id
 * was freed and handed to another flow no longer matches (XDP passes its
 * packets untouched), and the engine checks the gen in every npf_meta.
 * region_size bounds every posted buffer of the flow: the region whose
 * resident bitmap is npf_regions[id]. 0 = no engine has bound a region to
 * the flow: its datagrams pass to the kernel (NPF_STAT_PASS_NO_SOCKET). Only
 * the engine/daemon writes npf_flows; a client never holds its fd. */
struct npf_flow {
	__u32 id;          /* index into npf_rings and npf_regions, < NPF_MAX_FLOWS */
	__u32 gen;         /* generation of the id when this flow took it */
	__u64 region_size; /* bytes; a posted buffer outside [0, region_size) is NPF_STAT_DROP_BAD_DESC */
};

/* ---- post ring ------------------------------------------------------ */

/* A posted receive buffer: [offset, offset + len) in the flow's region.
 * Slot of seq s: posts[s & (NPF_POST_RING_SIZE - 1)] of the flow's npf_ring. */
struct npf_post {
	__u64 offset;
	__u32 len;
	__u32 pad;
};

/* Producer/consumer cursors of one flow's post ring, each on its own cache
 * line. The application writes the slot, then publishes prod (release);
 * XDP reads prod (acquire), then the slot, and claims it by CAS on cons.
 * cons is the next seq; cons <= prod always; prod - cons <= ring size.
 * gen counts the allocations of this flow id; it changes only under the
 * flow lock (flock on the pin directory), with prod and cons reset, and so
 * does NPF_CURSOR_F_ENGINE; NPF_CURSOR_F_SERVED belongs to the engine
 * serving the flow. */
struct npf_cursor {
	__u64 prod;
	__u32 gen;
	__u32 flags; /* NPF_CURSOR_F_* */
	__u64 pad0[6];
	__u64 cons;
	__u64 pad1[7];
};

/* npf_cursor.flags: the flow was added by an engine, which removes it when
 * it exits (an engine that takes it over after a crash inherits that), not
 * by npfctl (left to the operator). */
#define NPF_CURSOR_F_ENGINE 0x1
/* npf_cursor.flags: an engine serves the flow (set with its first published
 * post, cleared when it stops or a new engine starts). XDP claims no post of
 * a flow without it: its datagrams pass to the kernel (pass_no_socket), as
 * when no socket is bound, so a restarting engine drops nothing. */
#define NPF_CURSOR_F_SERVED 0x2

/* One flow's post ring: the single value of the flow's own BPF array
 * (BPF_F_MMAPABLE), held in npf_rings[id]. Every flow has its own map, so
 * whoever may post to a flow (an npfd client gets this map's fd and nothing
 * else) can touch that flow's ring only. A fresh map is made each time an id
 * is handed to a flow. */
struct npf_ring {
	struct npf_cursor cursor;
	struct npf_post posts[NPF_POST_RING_SIZE];
};

/* ---- sockets -------------------------------------------------------- */

/* npf_xsks slot of a queue's primary and backup AF_XDP sockets. */
#define NPF_XSK_PRIMARY(q) ((q) * 2)
#define NPF_XSK_BACKUP(q)  ((q) * 2 + 1)

/* ---- counters (npf_stats, per CPU) ---------------------------------- */

/* Every packet the program sees lands in exactly one outcome counter, so
 * RX_TOTAL == sum of all outcomes. NPF_STAT_TRUNCATED is extra, not an
 * outcome.
 *
 * NPF_STATS(X) is the one list of the counters: X(ID, name, help) each, in
 * enum order. It makes enum npf_stat (NPF_STAT_<ID>) here, and in userspace
 * the names (dataplane::kStatNames: `npfctl stats` rows xdp.<name>, Prometheus
 * npf_xdp_<name>_total) and help lines (docs/cli.md "Counters", checked by
 * tests/counters/counters_test.cpp). Values and names are ABI: append only. A
 * help line is one line without '|' (it goes into a Markdown table). */
#define NPF_STATS(X)                                                                                    \
	X(RX_TOTAL, "rx_total", "every packet the program saw")                                         \
	/* outcomes: XDP_PASS, packet untouched */                                                      \
	X(PASS_NOT_IP, "pass_not_ip", "passed to the kernel: not IPv4/IPv6 (ARP, LLDP, ...)")           \
	X(PASS_NOT_UDP, "pass_not_udp", "passed to the kernel: IP but not UDP (ICMP, TCP, ...)")        \
	X(PASS_FRAGMENT, "pass_fragment",                                                               \
	  "passed to the kernel: an IPv4 fragment, or IPv6 with a fragment header")                     \
	X(PASS_IPV6_EXT, "pass_ipv6_ext", "passed to the kernel: IPv6 with extension headers")          \
	X(PASS_MALFORMED, "pass_malformed",                                                             \
	  "passed to the kernel: truncated or inconsistent headers")                                    \
	X(PASS_NO_FLOW, "pass_no_flow",                                                                 \
	  "passed to the kernel: UDP to a destination that is not a flow")                              \
	X(PASS_BAD_FLOW, "pass_bad_flow",                                                               \
	  "passed to the kernel: a flow entry with an id out of range or a stale gen")                  \
	X(PASS_BAD_QUEUE, "pass_bad_queue", "passed to the kernel: RX queue >= NPF_MAX_QUEUES")         \
	X(PASS_NO_SOCKET, "pass_no_socket",                                                             \
	  "passed to the kernel (fail open): no socket bound, or no engine serves the flow")            \
	X(PASS_TOO_BIG, "pass_too_big",                                                                 \
	  "passed to the kernel: a flow datagram with a payload > NPF_MAX_PAYLOAD")                     \
	X(PASS_META_FAIL, "pass_meta_fail",                                                             \
	  "passed to the kernel: no headroom for npf_meta (bpf_xdp_adjust_head refused)")               \
	/* outcomes: XDP_DROP, a flow datagram that cannot be placed */                                 \
	X(DROP_RNR, "drop_rnr", "dropped: no posted buffer")                                            \
	X(DROP_BAD_DESC, "drop_bad_desc",                                                               \
	  "dropped: the posted buffer lies outside the region (its seq completes LOST)")                \
	X(DROP_CONTENDED, "drop_contended",                                                             \
	  "dropped: the post ring's cursor CAS lost NPF_CAS_RETRIES times")                             \
	X(DROP_CSUM, "drop_csum",                                                                       \
	  "dropped: IPv4 header checksum wrong, or UDP checksum 0 over IPv6")                           \
	/* outcomes: XDP_REDIRECT */                                                                    \
	X(REDIR_PRIMARY, "redir_primary",                                                               \
	  "redirected to the primary socket: all destination pages resident")                           \
	X(REDIR_BACKUP, "redir_backup",                                                                 \
	  "redirected to the backup socket: a destination page not resident")                           \
	X(REDIR_FAIL, "redir_fail",                                                                     \
	  "passed to the kernel: the socket vanished after the buffer was claimed (its seq completes LOST)") \
	/* not an outcome */                                                                            \
	X(TRUNCATED, "truncated", "not an outcome: steered with a payload longer than its buffer")

enum npf_stat {
#define NPF_STAT_ENUM(id, name, help) NPF_STAT_##id,
	NPF_STATS(NPF_STAT_ENUM)
#undef NPF_STAT_ENUM
	NPF_STAT_MAX
};

/* ---- per-flow counters (npf_flow_stats, per CPU) -------------------- */

/* The outcomes XDP decides once it has found a datagram's flow are counted
 * twice: in npf_stats, and in the flow's own entry of npf_flow_stats. They
 * are the tail of enum npf_stat from NPF_STAT_FLOW_FIRST on (pass_no_flow and
 * pass_bad_flow, just before it, are decided without a flow of the right
 * generation), so a counter appended to NPF_STATS is a flow's counter too. */
#define NPF_STAT_FLOW_FIRST NPF_STAT_PASS_BAD_QUEUE
#define NPF_FLOW_STAT_MAX (NPF_STAT_MAX - NPF_STAT_FLOW_FIRST)

/* Value of npf_flow_stats[flow id], per CPU. XDP counts into it only while
 * gen is the datagram's flow generation (npf_flow.gen). Whoever hands an id
 * to a new flow first zeroes the entry on every CPU with the new gen (under
 * the flow lock, before XDP can find the flow): a flow never inherits another
 * flow's counts, and datagrams of an older generation count for no flow. */
struct npf_flow_stats {
	__u32 gen;
	__u32 pad;
	__u64 n[NPF_FLOW_STAT_MAX]; /* n[s - NPF_STAT_FLOW_FIRST]: datagrams with outcome s */
};

/* ---- completions (service -> application, shared memory) ----------- */

/* npf_completion.status */
#define NPF_CS_OK        0 /* every byte of the datagram is in place */
#define NPF_CS_TRUNCATED 1 /* the first len bytes are in place; the datagram was longer */
#define NPF_CS_LOST      2 /* the datagram of this seq was dropped (see docs/architecture.md) */
#define NPF_CS_BAD_CSUM  3 /* the datagram failed its UDP checksum: the buffer holds no valid data */
#define NPF_CS_MAX       NPF_CS_BAD_CSUM

/* npf_completion.flags */
#define NPF_CF_FAULT 0x1 /* took the fault (backup) path */

/* One completion of a flow's posted buffer, published strictly in seq order. */
struct npf_completion {
	__u64 seq;    /* 64-bit per-flow sequence (post index) */
	__u64 offset; /* the posted buffer's offset in the region */
	__u32 len;    /* bytes placed (0 when LOST) */
	__u16 status; /* NPF_CS_* */
	__u16 flags;  /* NPF_CF_* */
	__u64 cookie; /* the application's, given with the post; filled in by the
	               * application's own side when it polls (never read from the
	               * shared ring: the service writes 0 there) */
};

/* Header of a completion ring in shared memory, followed by `size` entries.
 * Single producer (service), single consumer (application). */
struct npf_completion_ring {
	__u64 prod;      /* written by the producer (release) */
	__u64 pad0[7];
	__u64 cons;      /* written by the consumer (release) */
	__u64 waiting;   /* consumer asleep on its notifier (a pipe; see completion_ring.cpp) */
	__u64 pad1[6];
	__u32 size;      /* entries, a power of two */
	__u32 magic;     /* NPF_RING_MAGIC */
	__u32 version;   /* NPF_RING_LAYOUT_VERSION of the creator */
	__u32 pad2[13];
};

#define NPF_RING_MAGIC 0x4e504352 /* "NPCR" */

/* ---- an npfd client's installs (2 MiB pages) ------------------------- */

/* A huge page is charged to the hugetlb cgroup of the task that allocates
 * it, whichever mapping it enters; so that a client's pod pays for its 2 MiB
 * pages, a thread of the client (libnpf's) allocates them: UFFDIO_COPY into
 * its own region, through its own userfaultfd, of page images npfd writes.
 * The client hands npfd an install area with its region: a shmem memfd of
 * NPF_INSTALL_IMAGES + n * 2 MiB bytes (n >= 1) it allocated itself, this
 * control block at offset 0, the images from NPF_INSTALL_IMAGES on.
 *
 * npfd writes offset and len, then post (release) and wakes the futex on
 * post; the client copies, writes result, then done = post (release) and
 * wakes the futex on done. npfd waits for done a bounded time and trusts
 * none of it: it installs what the client did not, and checks what it says
 * it did (docs/protocol.md "Install area"). */
struct npf_install_ctl {
	__u32 post;   /* npfd: the job's number, a futex word */
	__u32 done;   /* client: the number of the last job it ended, a futex word */
	__u64 offset; /* npfd: the region offset of the job's first page */
	__u64 len;    /* npfd: bytes, whole pages, at most the area's images */
	__s64 result; /* client: bytes installed from offset on, or -errno */
};

#define NPF_INSTALL_IMAGES 4096 /* offset of the first image in the install area */

/* ---- credits (receiver -> sender, UDP) ------------------------------- */

/* A flow opened with credits tells the sender of its datagrams how many it
 * may send: npf_credit, the payload of a UDP datagram from the address the
 * flow's datagrams were sent to (an ephemeral port) to the address and port
 * they came from (docs/architecture.md, "Credits"). Every field is in network
 * byte order. Counts are the sender's datagrams since the receiver first saw
 * it (`epoch` names that start): the sender's first datagram is number 0.
 *
 * The receiver sends one when the grant grew by the flow's step, or grew at
 * all and the sender had used it up; at most one per the flow's interval, and
 * never more than one per NPF_CREDIT_EVERY datagrams the flow received (so a
 * forged source address cannot turn it into an amplifier). */
#define NPF_CREDIT_MAGIC 0x4e504347 /* "NPCG" */
#define NPF_CREDIT_VERSION 1
#define NPF_CREDIT_EVERY 16

struct npf_credit {
	__u32 magic;    /* NPF_CREDIT_MAGIC */
	__u8 version;   /* NPF_CREDIT_VERSION */
	__u8 flags;     /* 0 */
	__u16 port;     /* the flow's UDP port: where the datagrams went */
	__u32 epoch;    /* changes when the receiver starts counting a new sender */
	__u32 hint_us;  /* when the grant is expected to grow next, microseconds from now;
	                 * 0: unknown */
	__u64 received; /* the sender's datagrams that took a posted buffer */
	__u64 limit;    /* the sender may send datagrams numbered below this */
};

#ifdef __cplusplus
static_assert(sizeof(struct npf_meta) == 32, "npf_meta is the 32 bytes in front of a steered packet");
static_assert(sizeof(struct npf_flow_key) == 20);
static_assert(sizeof(struct npf_flow) == 16);
static_assert(sizeof(struct npf_ring) == 128 + 16 * NPF_POST_RING_SIZE);
static_assert(sizeof(struct npf_post) == 16);
static_assert(sizeof(struct npf_cursor) == 128);
static_assert(sizeof(struct npf_completion) == 32);
static_assert(NPF_STAT_FLOW_FIRST == NPF_STAT_PASS_BAD_FLOW + 1 && NPF_FLOW_STAT_MAX == 12);
static_assert(sizeof(struct npf_flow_stats) == 8 + 8 * NPF_FLOW_STAT_MAX);
static_assert(sizeof(struct npf_completion_ring) == 192);
static_assert(sizeof(struct npf_install_ctl) == 32);
static_assert(sizeof(struct npf_credit) == 32);
static_assert((NPF_POST_RING_SIZE & (NPF_POST_RING_SIZE - 1)) == 0);
#endif

#endif /* NPF_ABI_H */
