/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Packet parsing for npf_xdp: Ethernet, one VLAN tag, IPv4/IPv6, UDP.
 * Every access is bounds-checked; a parse failure names the npf_stat
 * outcome it counts as. */
#ifndef NPF_BPF_PARSE_H
#define NPF_BPF_PARSE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "npf/abi.h"

#ifndef ETH_P_8021AD
#define ETH_P_8021AD 0x88A8
#endif
#define NPF_IP_MF 0x2000
#define NPF_IP_OFFMASK 0x1fff

/* What the parser learned about a UDP datagram. */
struct npf_pkt {
	struct npf_flow_key key; /* destination address + port */
	__u32 payload_off;       /* from the start of the packet */
	__u32 payload_len;       /* UDP length - 8 */
	__u32 csum_partial;      /* pseudo-header + UDP header words, unfolded (npf_meta.csum) */
	__u8 csum_bad;           /* UDP checksum 0 over IPv6 (npf_ipv4_hdr_bad: IPv4's header) */
	__u8 udp_csum_none;      /* UDP checksum 0 over IPv4: the sender computed none */
	__u8 ip_off;             /* IPv4: where its header starts (14 or 18) */
	__u8 ihl;                /* IPv4: its header's length (20..60); 0 for IPv6 */
};

/* Ones' complement sum folded to 16 bits (not inverted). */
static __always_inline __u16 npf_csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)((sum & 0xffff) + (sum >> 16));
}

/* True if the IPv4 header npf_parse found has a wrong checksum. Checked
 * only for a flow's datagrams: all other traffic passes to the kernel, which
 * checks it itself. The usual 20-byte header is summed in five 32-bit words. */
static __always_inline int npf_ipv4_hdr_bad(void *data, void *data_end, const struct npf_pkt *pkt)
{
	__u32 off = pkt->ip_off;
	__u64 sum = 0;

	if (pkt->ihl == 0)
		return 0;
	if (off > 18)
		return 1;
	if (pkt->ihl == 20) {
		__u32 *w = data + off;

		if ((void *)(w + 5) > data_end)
			return 1;
		sum = (__u64)w[0] + w[1] + w[2] + w[3] + w[4];
		sum = (sum & 0xffffffff) + (sum >> 32);
		sum = (sum & 0xffffffff) + (sum >> 32);
	} else {
		__u16 *w = data + off;

		for (__u32 i = 0; i < 30; i++) {
			if (i >= pkt->ihl / 2u || (void *)(w + i + 1) > data_end)
				break;
			sum += w[i];
		}
	}
	return npf_csum_fold((__u32)sum) != 0xffff;
}

struct vlan_hdr_ {
	__be16 tci;
	__be16 proto;
};

static __always_inline int npf_is_ipv6_ext(__u8 nexthdr)
{
	switch (nexthdr) {
	case IPPROTO_HOPOPTS:
	case IPPROTO_ROUTING:
	case IPPROTO_DSTOPTS:
	case IPPROTO_AH:
	case IPPROTO_ESP:
	case 135: /* mobility */
	case 139: /* HIP */
	case 140: /* shim6 */
		return 1;
	}
	return 0;
}

/* Ethernet and at most one 802.1Q/802.1ad tag: the L3 protocol (network byte
 * order) in *proto and where its header starts in *off. -1, or the outcome. */
static __always_inline int npf_parse_eth(void *data, void *data_end, __u16 *proto, __u32 *off)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return NPF_STAT_PASS_MALFORMED;
	*proto = eth->h_proto;
	*off = sizeof(*eth);
	if (*proto == bpf_htons(ETH_P_8021Q) || *proto == bpf_htons(ETH_P_8021AD)) {
		struct vlan_hdr_ *vh = data + *off;

		if ((void *)(vh + 1) > data_end)
			return NPF_STAT_PASS_MALFORMED;
		*proto = vh->proto;
		*off += sizeof(*vh);
	}
	return -1;
}

/* The IPv4 header at *off: a UDP datagram's destination and pseudo-header
 * addresses into *pkt, *off past the header, *l4_room = the bytes the header
 * says follow it. -1, or the outcome. */
static __always_inline int npf_parse_ipv4(void *data, void *data_end, __u64 pkt_len, __u32 *off, __u32 *l4_room,
					  struct npf_pkt *pkt)
{
	struct iphdr *ip = data + *off;
	__u32 ihl, tot;

	if ((void *)(ip + 1) > data_end)
		return NPF_STAT_PASS_MALFORMED;
	ihl = ip->ihl * 4;
	tot = bpf_ntohs(ip->tot_len);
	if (ip->version != 4 || ihl < sizeof(*ip) || tot < ihl || *off + tot > pkt_len)
		return NPF_STAT_PASS_MALFORMED;
	if (ip->frag_off & bpf_htons(NPF_IP_MF | NPF_IP_OFFMASK))
		return NPF_STAT_PASS_FRAGMENT;
	if (ip->protocol != IPPROTO_UDP)
		return NPF_STAT_PASS_NOT_UDP;
	pkt->key.family = NPF_FAMILY_IPV4;
	__builtin_memcpy(pkt->key.addr, &ip->daddr, 4);
	pkt->ip_off = (__u8)*off;
	pkt->ihl = (__u8)ihl;
	pkt->csum_partial = (ip->saddr & 0xffff) + (ip->saddr >> 16) +
			    (ip->daddr & 0xffff) + (ip->daddr >> 16);
	*off += ihl;
	*l4_room = tot - ihl;
	return -1;
}

/* The IPv6 header at *off, as npf_parse_ipv4. */
static __always_inline int npf_parse_ipv6(void *data, void *data_end, __u64 pkt_len, __u32 *off, __u32 *l4_room,
					  struct npf_pkt *pkt)
{
	struct ipv6hdr *ip6 = data + *off;
	__u32 plen;

	if ((void *)(ip6 + 1) > data_end)
		return NPF_STAT_PASS_MALFORMED;
	plen = bpf_ntohs(ip6->payload_len);
	if (ip6->version != 6 || *off + sizeof(*ip6) + plen > pkt_len)
		return NPF_STAT_PASS_MALFORMED;
	if (ip6->nexthdr == IPPROTO_FRAGMENT)
		return NPF_STAT_PASS_FRAGMENT;
	if (npf_is_ipv6_ext(ip6->nexthdr))
		return NPF_STAT_PASS_IPV6_EXT;
	if (ip6->nexthdr != IPPROTO_UDP)
		return NPF_STAT_PASS_NOT_UDP;
	pkt->key.family = NPF_FAMILY_IPV6;
	__builtin_memcpy(pkt->key.addr, &ip6->daddr, 16);
	/* saddr and daddr: 16 words right after the fixed fields */
	__u16 *w = (__u16 *)&ip6->saddr;
	for (__u32 i = 0; i < 16; i++)
		pkt->csum_partial += w[i];
	*off += sizeof(*ip6);
	*l4_room = plen;
	return -1;
}

/* The UDP header at off, l4_room bytes of room for it: port, the rest of
 * the checksum's sum, payload offset and length into *pkt. -1, or the
 * outcome. */
static __always_inline int npf_parse_udp(void *data, void *data_end, __u32 off, __u32 l4_room, struct npf_pkt *pkt)
{
	/* off <= 14 + 4 + 60: keep the verifier's view of it bounded */
	if (off > 128)
		return NPF_STAT_PASS_MALFORMED;
	struct udphdr *udp = data + off;
	__u32 ulen;

	if ((void *)(udp + 1) > data_end)
		return NPF_STAT_PASS_MALFORMED;
	ulen = bpf_ntohs(udp->len);
	if (ulen < sizeof(*udp) || ulen > l4_room)
		return NPF_STAT_PASS_MALFORMED;
	pkt->key.port = udp->dest;
	/* The rest of the pseudo-header (protocol, UDP length) and the UDP
	 * header itself, checksum field included. */
	pkt->csum_partial += bpf_htons(IPPROTO_UDP) + udp->len + udp->source + udp->dest + udp->len +
			     udp->check;
	if (udp->check == 0) {
		if (pkt->key.family == NPF_FAMILY_IPV4)
			pkt->udp_csum_none = 1;
		else
			pkt->csum_bad = 1;
	}
	pkt->payload_off = off + sizeof(*udp);
	pkt->payload_len = ulen - sizeof(*udp);
	return -1;
}

/* Returns -1 when the packet is a UDP datagram described in *pkt, else the
 * npf_stat (PASS_*) outcome to count. [data, data_end) is the linear part of
 * the packet, where every header must lie (drivers put at least the first
 * buffer's worth there; veth up to ~3.5 KB); pkt_len is the length of the
 * whole packet (bpf_xdp_get_buff_len), fragments of a multi-buffer (jumbo)
 * packet included, against which the IP and UDP lengths are checked. */
static __always_inline int npf_parse(void *data, void *data_end, __u64 pkt_len, struct npf_pkt *pkt)
{
	__u32 off, l4_room; /* l4_room: bytes the IP header says follow it */
	__u16 proto;
	int rc;

	rc = npf_parse_eth(data, data_end, &proto, &off);
	if (rc >= 0)
		return rc;
	if (proto == bpf_htons(ETH_P_IP))
		rc = npf_parse_ipv4(data, data_end, pkt_len, &off, &l4_room, pkt);
	else if (proto == bpf_htons(ETH_P_IPV6))
		rc = npf_parse_ipv6(data, data_end, pkt_len, &off, &l4_room, pkt);
	else
		return NPF_STAT_PASS_NOT_IP;
	if (rc >= 0)
		return rc;
	return npf_parse_udp(data, data_end, off, l4_room, pkt);
}

#endif /* NPF_BPF_PARSE_H */
