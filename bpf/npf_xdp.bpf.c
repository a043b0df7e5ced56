// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * npf_xdp: steers the UDP datagrams of npf flows into AF_XDP sockets.
 *
 * A datagram of a flow claims the flow's next posted buffer (its seq), and
 * goes to the queue's primary socket when every destination page is
 * resident, else to the backup socket. Everything that is not a flow
 * datagram passes to the kernel untouched. See docs/architecture.md.
 */
#include "lib/npf_maps.h"
#include "lib/npf_parse.h"

#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))

static __always_inline void npf_count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&npf_stats, &stat);

	if (v)
		*v += 1;
}

static __always_inline int npf_out(__u32 stat, int verdict)
{
	npf_count(stat);
	return verdict;
}

/* Where a flow datagram may go, found before anything is claimed. */
struct npf_route {
	struct npf_ring *ring; /* the flow's post ring */
	__u64 region;          /* region size (npf_flow.region_size) */
	__u32 fid, gen;        /* flow id and generation */
	__u32 queue;           /* RX queue: its sockets are NPF_XSK_PRIMARY/BACKUP(queue) */
};

/* The flow's npf_flow_stats entry (this CPU's) if it is of the datagram's
 * generation, else NULL: its outcomes count for no flow. */
static __always_inline struct npf_flow_stats *npf_flow_entry(const struct npf_route *r)
{
	struct npf_flow_stats *fs = bpf_map_lookup_elem(&npf_flow_stats, &r->fid);

	return fs && fs->gen == r->gen ? fs : NULL;
}

/* A counter of the flow's own (abi.h: from NPF_STAT_FLOW_FIRST on), in its
 * npf_flow_stats entry if that is of the datagram's generation. */
static __always_inline void npf_flow_count(const struct npf_route *r, __u32 stat)
{
	struct npf_flow_stats *fs;

	if (stat < NPF_STAT_FLOW_FIRST || stat >= NPF_STAT_MAX)
		return;
	fs = npf_flow_entry(r);
	if (fs)
		fs->n[stat - NPF_STAT_FLOW_FIRST] += 1;
}

/* The outcome of a datagram whose flow was looked up: npf_stats, and the
 * flow's own counter. */
static __always_inline int npf_flow_out(const struct npf_route *r, __u32 stat, int verdict)
{
	npf_flow_count(r, stat);
	return npf_out(stat, verdict);
}

static __always_inline struct npf_flow *npf_flow_lookup(struct npf_flow_key *key)
{
	struct npf_flow *f = bpf_map_lookup_elem(&npf_flows, key);

	if (f)
		return f;
	__builtin_memset(key->addr, 0, sizeof(key->addr));
	key->family = NPF_FAMILY_ANY;
	return bpf_map_lookup_elem(&npf_flows, key);
}

/* The size class of a region's bitmap (abi.h): the smallest that fits. */
static __always_inline __u32 npf_bitmap_class(__u64 region_size)
{
	__u64 pages = region_size >> NPF_PAGE_SHIFT;
	__u32 c;

	for (c = 0; c < NPF_BITMAP_CLASSES - 1; c++)
		if (pages <= NPF_BITMAP_CLASS_PAGES(c))
			break;
	return c;
}

/* 1 if every page of [off, off + len) is resident in the region's bitmap.
 * The caller has checked that the range lies inside the region. */
static __always_inline int npf_resident_range(void *bitmap, __u64 off, __u32 len)
{
	__u64 first, last;

	if (len == 0)
		return 1;
	first = off >> NPF_PAGE_SHIFT;
	last = (off + len - 1) >> NPF_PAGE_SHIFT;
	for (__u32 i = 0; i < NPF_MAX_PKT_PAGES; i++) {
		__u64 page = first + i;
		__u32 word;
		__u64 *bits;

		if (page > last)
			break;
		word = page >> 6;
		bits = bpf_map_lookup_elem(bitmap, &word);
		if (!bits || !(READ_ONCE(*bits) & (1ull << (page & 63))))
			return 0;
	}
	return 1;
}

struct npf_claim {
	__u64 seq;
	__u64 offset;
	__u32 copy_len;
	__u8 flags;
};

/*
 * Claims the next posted buffer of the flow whose bitmap is regions[fid].
 * Returns -1 with *c filled, or the outcome to count. Everything that
 * decides where the packet goes is computed from the slot at cons before the
 * CAS commits it, so a lost race just recomputes from the new cons; a won CAS
 * is final. prod is read before the slot: the application fills the slot,
 * then publishes prod.
 *
 * Expanded once per bitmap size class (the caller switches on it): each
 * expansion reads one outer map, so the verifier inlines the lookups into
 * its bitmaps (maps of one size).
 */
static __always_inline int npf_claim(void *regions, __u32 fid, __u32 gen, __u64 region, __u32 payload_len,
				     struct npf_ring *ring, struct npf_claim *c)
{
	struct npf_cursor *cur = &ring->cursor;
	void *bitmap = bpf_map_lookup_elem(regions, &fid);
	__u32 i;

	/* No bitmap bound (no region yet, or unbound meanwhile): nothing is
	 * claimed, the datagram fails open. */
	if (!bitmap)
		return NPF_STAT_PASS_NO_SOCKET;
	for (i = 0; i < NPF_CAS_RETRIES; i++) {
		__u64 cons = READ_ONCE(cur->cons);
		__u64 prod = READ_ONCE(cur->prod);
		struct npf_post *post;
		__u64 offset;
		__u32 len;
		int bad;

		/* Again after prod (the id may have been handed over since the
		 * check above): a new flow's gen is set before its first post is
		 * published. */
		if (READ_ONCE(cur->gen) != gen)
			return NPF_STAT_PASS_BAD_FLOW;
		if ((__s64)(prod - cons) <= 0)
			return NPF_STAT_DROP_RNR;
		post = &ring->posts[cons & (NPF_POST_RING_SIZE - 1)];
		offset = READ_ONCE(post->offset);
		len = READ_ONCE(post->len);
		/* A bad slot is consumed too, or it would stall the flow forever;
		 * the service completes its seq as LOST. So is a cursor pair
		 * further apart than the ring (the application overwrote slots). */
		bad = prod - cons > NPF_POST_RING_SIZE || len > region || offset > region - len;
		c->offset = offset;
		c->copy_len = payload_len < len ? payload_len : len;
		c->flags = c->copy_len < payload_len ? NPF_META_F_TRUNCATED : 0;
		if (!bad && !npf_resident_range(bitmap, offset, c->copy_len))
			c->flags |= NPF_META_F_BACKUP;
		if (__sync_val_compare_and_swap(&cur->cons, cons, cons + 1) != cons)
			continue;
		if (bad)
			return NPF_STAT_DROP_BAD_DESC;
		c->seq = cons;
		return -1;
	}
	return NPF_STAT_DROP_CONTENDED;
}

/* The flow of the datagram and its queue, both of whose sockets are bound.
 * -1 with r's fid, gen, region and queue filled, or the PASS_* outcome. */
static __always_inline int npf_route_flow(struct xdp_md *ctx, struct npf_pkt *pkt, struct npf_route *r)
{
	struct npf_flow *flow = npf_flow_lookup(&pkt->key);
	__u32 slot;

	if (!flow)
		return NPF_STAT_PASS_NO_FLOW;
	r->fid = flow->id;
	r->gen = flow->gen;
	r->region = flow->region_size;
	if (r->fid >= NPF_MAX_FLOWS)
		return NPF_STAT_PASS_BAD_FLOW;
	if (pkt->payload_len > NPF_MAX_PAYLOAD)
		return NPF_STAT_PASS_TOO_BIG;
	r->queue = ctx->rx_queue_index;
	if (r->queue >= NPF_MAX_QUEUES)
		return NPF_STAT_PASS_BAD_QUEUE;

	/* Fail open before anything is claimed: both sockets of the queue must be bound. */
	slot = NPF_XSK_PRIMARY(r->queue);
	if (!bpf_map_lookup_elem(&npf_xsks, &slot))
		return NPF_STAT_PASS_NO_SOCKET;
	slot = NPF_XSK_BACKUP(r->queue);
	if (!bpf_map_lookup_elem(&npf_xsks, &slot))
		return NPF_STAT_PASS_NO_SOCKET;
	return -1;
}

/* The flow's post ring, still of its generation and served by an engine,
 * with a region bound. -1 with r->ring set, or the PASS_* outcome. */
static __always_inline int npf_route_ring(struct npf_route *r)
{
	struct npf_cursor *cur;
	__u32 zero = 0;
	void *inner;

	/* An entry whose id was freed and handed to another flow since. */
	inner = bpf_map_lookup_elem(&npf_rings, &r->fid);
	if (!inner)
		return NPF_STAT_PASS_BAD_FLOW;
	r->ring = bpf_map_lookup_elem(inner, &zero);
	if (!r->ring)
		return NPF_STAT_PASS_BAD_FLOW;
	cur = &r->ring->cursor;
	if (READ_ONCE(cur->gen) != r->gen)
		return NPF_STAT_PASS_BAD_FLOW;
	/* Sockets bound, but no engine serves this flow (yet), or it has no
	 * region bound: fail open too. */
	if (!(READ_ONCE(cur->flags) & NPF_CURSOR_F_SERVED) || r->region == 0)
		return NPF_STAT_PASS_NO_SOCKET;
	return -1;
}

/* Room for struct npf_meta in front of the packet: the frame the AF_XDP
 * socket gets starts with it (bpf_xdp_adjust_head, which every XDP driver
 * and kernel has; XDP metadata, bpf_xdp_adjust_meta, is not there on every
 * driver, and some kernels refuse the helper outright). Metadata an earlier
 * program left stays in front of it, unread. -1, or NPF_STAT_PASS_META_FAIL
 * (no headroom left). */
static __always_inline int npf_meta_room(struct xdp_md *ctx)
{
	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct npf_meta)))
		return NPF_STAT_PASS_META_FAIL;
	return -1;
}

/* npf_claim on the outer map of the region's bitmap size class. */
static __always_inline int npf_claim_post(const struct npf_route *r, __u32 payload_len, struct npf_claim *c)
{
	switch (npf_bitmap_class(r->region)) {
	case 0: return npf_claim(&npf_regions_0, r->fid, r->gen, r->region, payload_len, r->ring, c);
	case 1: return npf_claim(&npf_regions_1, r->fid, r->gen, r->region, payload_len, r->ring, c);
	case 2: return npf_claim(&npf_regions_2, r->fid, r->gen, r->region, payload_len, r->ring, c);
	case 3: return npf_claim(&npf_regions_3, r->fid, r->gen, r->region, payload_len, r->ring, c);
	default: return npf_claim(&npf_regions_4, r->fid, r->gen, r->region, payload_len, r->ring, c);
	}
}

/* Writes the claimed buffer's npf_meta (room made by npf_meta_room) and
 * returns its flags, or -1 if the room is not there (cannot happen after
 * adjust_head; the verifier wants the check). */
static __always_inline int npf_write_meta(struct xdp_md *ctx, const struct npf_route *r, const struct npf_pkt *pkt,
					  const struct npf_claim *c)
{
	struct npf_meta *meta = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 flags = c->flags;

	if ((void *)(meta + 1) > data_end)
		return -1;
	meta->magic = NPF_META_MAGIC;
	meta->version = NPF_META_VERSION;
	meta->flow = r->fid;
	meta->payload_off = pkt->payload_off;
	meta->seq = (__u32)c->seq;
	meta->len = c->copy_len;
	meta->offset = c->offset;
	/* The clock read costs ~27 ns here (a fifth of the program on a VM):
	 * the fast path's latency is sampled, the fault path's always taken. */
	meta->tstamp = (flags & NPF_META_F_BACKUP) || c->seq % NPF_FAST_STAMP_EVERY == 0 ? (__u32)bpf_ktime_get_ns() : 0;
	meta->gen = (__u16)r->gen;
	meta->csum = npf_csum_fold(pkt->csum_partial);
	if (pkt->udp_csum_none)
		flags |= NPF_META_F_NO_CSUM;
	meta->flags = flags;
	return flags;
}

/* Redirects a datagram with its meta written to the queue's backup socket
 * (a destination page not resident) or primary socket. */
static __always_inline int npf_redirect(const struct npf_route *r, __u8 flags)
{
	__u32 slot = (flags & NPF_META_F_BACKUP) ? NPF_XSK_BACKUP(r->queue) : NPF_XSK_PRIMARY(r->queue);
	/* Looked up once, before the redirect: the flow's counter of the
	 * outcome is then one increment. */
	struct npf_flow_stats *fs = npf_flow_entry(r);
	__u32 stat;

	if (flags & NPF_META_F_TRUNCATED) {
		npf_count(NPF_STAT_TRUNCATED);
		if (fs)
			fs->n[NPF_STAT_TRUNCATED - NPF_STAT_FLOW_FIRST] += 1;
	}
	if (bpf_redirect_map(&npf_xsks, slot, XDP_PASS) != XDP_REDIRECT) {
		if (fs)
			fs->n[NPF_STAT_REDIR_FAIL - NPF_STAT_FLOW_FIRST] += 1;
		return npf_out(NPF_STAT_REDIR_FAIL, XDP_PASS);
	}
	stat = (flags & NPF_META_F_BACKUP) ? NPF_STAT_REDIR_BACKUP : NPF_STAT_REDIR_PRIMARY;
	if (fs)
		fs->n[stat - NPF_STAT_FLOW_FIRST] += 1;
	return npf_out(stat, XDP_REDIRECT);
}

/* The verdict on one packet, counted. *own_meta: npf put its npf_meta in
 * front of the packet (a flow datagram). */
static __always_inline int npf_verdict(struct xdp_md *ctx, int *own_meta)
{
	struct npf_pkt pkt = {};
	struct npf_route r = {};
	struct npf_claim c = {};
	int rc;

	npf_count(NPF_STAT_RX_TOTAL);
	rc = npf_parse((void *)(long)ctx->data, (void *)(long)ctx->data_end, bpf_xdp_get_buff_len(ctx), &pkt);
	if (rc >= 0)
		return npf_out(rc, XDP_PASS);
	/* From here on every outcome is the flow's too (npf_flow_out; a stale
	 * entry's generation counts for no flow). */
	rc = npf_route_flow(ctx, &pkt, &r);
	if (rc >= 0)
		return npf_flow_out(&r, rc, XDP_PASS);

	/* What the kernel would drop as corrupt is dropped before it can take a
	 * buffer. The UDP payload's checksum is verified by the service as it
	 * copies (npf_meta.csum). */
	if (pkt.csum_bad || npf_ipv4_hdr_bad((void *)(long)ctx->data, (void *)(long)ctx->data_end, &pkt))
		return npf_flow_out(&r, NPF_STAT_DROP_CSUM, XDP_DROP);

	rc = npf_route_ring(&r);
	if (rc >= 0)
		return npf_flow_out(&r, rc, XDP_PASS);
	rc = npf_meta_room(ctx);
	if (rc >= 0)
		return npf_flow_out(&r, rc, XDP_PASS);
	*own_meta = 1;
	/* Claim the next posted buffer (on a failure a dropped packet keeps the
	 * room, a passed one loses it in npf_pass). */
	rc = npf_claim_post(&r, pkt.payload_len, &c);
	if (rc >= 0)
		return npf_flow_out(&r, rc, rc >= NPF_STAT_DROP_RNR && rc <= NPF_STAT_DROP_CSUM ? XDP_DROP : XDP_PASS);
	rc = npf_write_meta(ctx, &r, &pkt, &c);
	if (rc < 0)
		return npf_flow_out(&r, NPF_STAT_PASS_META_FAIL, XDP_PASS);
	return npf_redirect(&r, (__u8)rc);
}

/* A packet npf passes goes on as it came, without npf_meta (own_meta: a
 * flow datagram that passes after its room was made) to the program chained
 * behind npf_xdp (npf_next, when loaded to chain one: npf_chain), or to the
 * kernel stack when there is none (the tail call returns only then). */
static __always_inline int npf_pass(struct xdp_md *ctx, int own_meta)
{
	if (own_meta)
		bpf_xdp_adjust_head(ctx, (int)sizeof(struct npf_meta));
	if (npf_chain)
		bpf_tail_call(ctx, &npf_next, NPF_NEXT_SLOT);
	return XDP_PASS;
}

/*
 * A frags program as npf loads it (LoadConfig::frags: the loader sets
 * BPF_F_XDP_HAS_FRAGS, which libbpf can add to a SEC("xdp") program but not
 * take from a SEC("xdp.frags") one; it leaves it out only to chain a program
 * that lacks it, docs/architecture.md "Coexisting with other XDP programs").
 * With an MTU above what fits one buffer (on veth about 3.5 KB, jumbo frames
 * on NICs in multi-buffer mode) a packet arrives as a linear part plus
 * fragments. The headers are parsed from the linear part; lengths are
 * checked against the whole packet. The payload is never read here; the
 * AF_XDP socket (bound with XDP_USE_SG) gets a multi-buffer packet as
 * several descriptors, npf_meta at the start of the first.
 */
SEC("xdp")
int npf_xdp(struct xdp_md *ctx)
{
	int own_meta = 0;
	int verdict = npf_verdict(ctx, &own_meta);

	return verdict == XDP_PASS ? npf_pass(ctx, own_meta) : verdict;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
