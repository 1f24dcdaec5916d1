// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//go:build ignore

/* Plait receiver, XDP on each path interface: takes a Plait packet only from its tunnel's
 * peer (the outer addresses of one of the tunnel's paths, on that path's interface, with
 * an inner source the peer may send from), measures it (per-path delay, loss, packet-pair
 * dispersion; per-tunnel reordering after RFC 4737), strips the tag and passes the
 * original packet to the stack. Other traffic passes untouched. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "structs.h"
#include "parsing.h"
#include "measure.h"
#include "maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Receive ports in network byte order; unused entries are zero. */
#define RX_PORTS 4
struct rx_ports {
	__be16 port[RX_PORTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rx_ports);
} rcv_ports SEC(".maps");

/* tunnel_id -> slot plus one (0: no such tunnel). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u32);
} rcv_ids SEC(".maps");

/* slot -> the tunnel's peer (paths, allowed inner sources), delay bias and epoch. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct rx_tunnel);
} rcv_tunnels SEC(".maps");

/* slot -> sequence tracking shared by all CPUs (atomics only). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct rx_shared);
} rcv_seq SEC(".maps");

/* slot -> per-CPU counters of the tunnel and its paths. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct rx_stats);
} rcv_counters SEC(".maps");

/* slot -> the agent's resequencer, while its lease runs (see struct rx_reseq). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct rx_reseq);
} rcv_reseq SEC(".maps");

/* RX_F_REPAIR: path_seq gaps (struct rx_gap) for the agent, which asks the peer to resend
 * them. Written only on a gap, so a path without loss pays nothing for it. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 16);
} rcv_gaps SEC(".maps");

/* enum receiver_stat -> packets. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, RCV_STAT_MAX);
	__type(key, enum receiver_stat);
	__type(value, __u64);
} rcv_verdicts SEC(".maps");

static __always_inline int verdict(__u32 reason, int action)
{
	__u64 *n = bpf_map_lookup_elem(&rcv_verdicts, &reason);
	if (n)
		*n += 1;
	return action;
}

static __always_inline int is_plait_port(__be16 port)
{
	__u32 zero = 0;
	struct rx_ports *p = bpf_map_lookup_elem(&rcv_ports, &zero);
	if (!p || !port)
		return 0;
	return p->port[0] == port || p->port[1] == port || p->port[2] == port ||
	       p->port[3] == port;
}

/* The Ethernet header as the receiver moves it. struct ethhdr is packed, so copied whole
 * it moves a byte at a time, and words read back from bytes just stored one by one stall
 * store forwarding: about 10 ns a packet here. In these fields (each MAC split 4 + 2) every
 * copy is one load and one store a field; eth_get and eth_put never touch bytes 14-15. */
struct eth_words {
	__u32 dst_hi; /* h_dest[0..3] */
	__u16 dst_lo; /* h_dest[4..5] */
	__u16 src_hi; /* h_source[0..1] */
	__u32 src_lo; /* h_source[2..5] */
	__be16 proto;
};

static __always_inline void eth_get(struct eth_words *w, const void *eth)
{
	w->dst_hi = *(const __u32 *)eth;
	w->dst_lo = *(const __u16 *)(eth + 4);
	w->src_hi = *(const __u16 *)(eth + 6);
	w->src_lo = *(const __u32 *)(eth + 8);
	w->proto = *(const __be16 *)(eth + 12);
}

static __always_inline void eth_put(void *eth, const struct eth_words *w)
{
	*(__u32 *)eth = w->dst_hi;
	*(__u16 *)(eth + 4) = w->dst_lo;
	*(__u16 *)(eth + 6) = w->src_hi;
	*(__u32 *)(eth + 8) = w->src_lo;
	*(__be16 *)(eth + 12) = w->proto;
}

/* Decapsulated packets arrive on the tunnel device, as with any Linux tunnel: sent into
 * the device's veth peer, they are received on the device, where tcpdump and the firewall
 * see them and the route back to their source leads. deliver_to addresses the frame to
 * the device, delivered is the verdict that sends it there. Without a device
 * (receive-only tunnels: the interface is the tunnel's) they pass where they came. */
struct delivery {
	__u32 reseq;  /* the resequencer's device (0: deliver directly) */
	__be32 seq;   /* the packet's place in the tunnel's sequence ... */
	__u8 path;    /* ... and the path it came by (| PLAIT_PATH_REPAIR: a repair), for the
		       * resequencer */
};

static __always_inline void deliver_to(struct eth_words *eth, const struct rx_tunnel *t, const struct delivery *d)
{
	if (d->reseq) {
		/* The resequencer reads path and seq from the source address (RESEQ_ETH_P). */
		eth->src_hi = d->path;
		eth->src_lo = d->seq;
		eth->proto = bpf_htons(RESEQ_ETH_P);
	} else if (t->dev_ifindex) {
		eth->dst_hi = *(const __u32 *)t->dev_mac;
		eth->dst_lo = *(const __u16 *)&t->dev_mac[4];
	}
}

static __always_inline int delivered(const struct rx_tunnel *t, const struct delivery *d)
{
	if (d->reseq)
		return bpf_redirect(d->reseq, 0);
	return t->dev_ifindex ? bpf_redirect(t->dev_ifindex, 0) : XDP_PASS;
}

/* Compact packets get back the IPv4 header they left with: the tunnel's addresses,
 * protocol TCP, the length without what the sender added, a fresh checksum. */
static __always_inline int restore_compact(struct xdp_md *ctx, struct ethhdr *eth, struct iphdr *ip,
					   const struct rx_tunnel *t, __u32 added, const struct delivery *d)
{
	struct eth_words e;
	eth_get(&e, eth);
	struct iphdr h = *ip;
	if (bpf_xdp_adjust_head(ctx, added))
		return verdict(RCV_DROP_ADJUST, XDP_DROP);
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return verdict(RCV_DROP_ADJUST, XDP_DROP);
	h.tot_len = bpf_htons(bpf_ntohs(h.tot_len) - added);
	h.protocol = IPPROTO_TCP;
	h.saddr = t->peer;
	h.daddr = t->local;
	h.check = 0;
	__u16 *w = (void *)&h;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	h.check = ~sum;
	deliver_to(&e, t, d);
	eth_put(eth, &e);
	__builtin_memcpy(ip, &h, sizeof(h));
	return delivered(t, d);
}

/* Why a packet with this tunnel's id is not from its peer, when the header's path id and
 * the outer addresses do not name the same configured path: the addresses are another
 * path's, or none of them. */
static __always_inline __u32 peer_mismatch(const struct rx_tunnel *t, const struct iphdr *ip)
{
#pragma unroll
	for (int i = 0; i < PLAIT_MAX_PATHS; i++) {
		if (i < t->n_paths && t->paths[i].src == ip->saddr && t->paths[i].dst == ip->daddr)
			return RCV_DROP_PATH_MISMATCH;
	}
	return RCV_DROP_UNKNOWN_PEER;
}

/* Whether a packet comes from the tunnel's peer; when not, *reason says why. The header's
 * path id is only a claim: it must name the path whose outer addresses the packet
 * carries, and the packet must have arrived on that path's interface. */
static __always_inline __u32 check_peer(const struct rx_tunnel *t, const struct iphdr *ip,
					 __u32 path_id, __u32 ifindex, __u32 *reason)
{
	const struct rx_path *rp = &t->paths[path_id & (PLAIT_MAX_PATHS - 1)];
	if (t->flags & RX_F_ANY_PEER) {
		*reason = RCV_DROP_WRONG_IFACE;
		return ifindex == t->paths[0].ifindex;
	}
	if (path_id >= t->n_paths || rp->src != ip->saddr || rp->dst != ip->daddr) {
		*reason = peer_mismatch(t, ip);
		return 0;
	}
	*reason = RCV_DROP_WRONG_IFACE;
	return ifindex == rp->ifindex;
}

/* Whether the tag is that of one of the tunnel's keys. */
static __always_inline int tag_ok(const struct rx_tunnel *t, const struct plait_hdr *ph, const __u64 *tag)
{
	__u64 want = *tag;
	if (plait_tag(&t->keys[0], ph, tag + 1) == want)
		return 1;
	return t->n_keys > 1 && plait_tag(&t->keys[1], ph, tag + 1) == want;
}

/* Whether the peer may send from src: WireGuard's AllowedIPs, and never our own address. */
static __always_inline int allowed_source(const struct rx_tunnel *t, __be32 src)
{
	if (src == t->self)
		return 0;
#pragma unroll
	for (int i = 0; i < RX_ALLOWED; i++) {
		if (i < t->n_allowed && (src & t->allowed[i].mask) == t->allowed[i].addr)
			return 1;
	}
	return 0;
}

/* Learns the UDP port the peer's packets on path p come from (sport; 0 under IP
 * encapsulation), where the sender then sends the path's packets (struct tx_peer): a NAT
 * that rewrites the peer's port is followed after one packet. Only from a packet whose tag
 * verified and that is not a replay: anyone can put the peer's address on a packet, and
 * whoever steers the port steers the tunnel's traffic. Written only when it changes, so a
 * packet costs a lookup and a load. */
static __always_inline void learn_port(const struct rx_tunnel *t, __u32 slot, __u32 p, __be32 addr, __be16 sport)
{
	if (!sport || (t->flags & (RX_F_AUTH | RX_F_ANY_PEER)) != RX_F_AUTH)
		return;
	struct tx_state *st = bpf_map_lookup_elem(&snd_states, &slot);
	if (!st)
		return;
	struct tx_peer *peer = &st->peers[p & (PLAIT_MAX_PATHS - 1)];
	struct tx_peer seen = { .addr = addr, .port = sport };
	if (*(volatile __u64 *)peer != *(__u64 *)&seen)
		*(volatile __u64 *)peer = *(__u64 *)&seen;
}

/* Tells the agent of gap g. Not inlined: only a gap calls it, and as a function it puts
 * struct rx_gap in BTF, for bpf2go's Go mirror. */
static __noinline int report_gap(struct rx_gap *g, struct rx_tunnel_stats *st)
{
	if (bpf_ringbuf_output(&rcv_gaps, g, sizeof(*g), 0)) {
		verdict(RCV_GAP_LOST, 0);
		return 0;
	}
	st->gaps++;
	st->gap_seqs += g->count;
	return 0;
}

static __always_inline int receive(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct hdr_cursor c = { .pos = data };

	struct ethhdr *eth = parse_eth(&c, end);
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
		return verdict(RCV_PASS_NOT_IPV4, XDP_PASS);
	struct iphdr *ip = parse_ipv4(&c, end);
	if (!ip)
		return verdict(RCV_PASS_NOT_IPV4, XDP_PASS);
	if (ip->protocol != IPPROTO_UDP && ip->protocol != PLAIT_IPPROTO)
		return verdict(RCV_PASS_NOT_UDP, XDP_PASS);
	if (ip->frag_off & bpf_htons(0x3fff))
		return verdict(RCV_PASS_FRAGMENT, XDP_PASS);
	__u32 ip_len = bpf_ntohs(ip->tot_len);
	__u32 hl = ip->ihl * 4;
	__be16 sport = 0;
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = parse_udp(&c, end);
		if (!udp)
			return verdict(RCV_PASS_NOT_UDP, XDP_PASS);
		if (!is_plait_port(udp->dest))
			return verdict(RCV_PASS_OTHER_PORT, XDP_PASS);
		sport = udp->source;
		if (bpf_ntohs(udp->len) != ip_len - hl)
			return verdict(RCV_DROP_BAD_LENGTH, XDP_DROP);
	}

	/* From here on the packet claims to be ours: anything wrong with it is a drop. */
	if (ip_len > end - (void *)ip || ip_len < c.pos - (void *)ip + sizeof(struct plait_hdr))
		return verdict(RCV_DROP_BAD_LENGTH, XDP_DROP);

	struct plait_hdr *ph = c.pos;
	if ((void *)(ph + 1) > end)
		return verdict(RCV_DROP_TRUNCATED, XDP_DROP);
	if (ph->ver_flags >> 4 != PLAIT_VERSION)
		return verdict(RCV_DROP_BAD_VERSION, XDP_DROP);
	__u32 path_id = ph->path_id & ~PLAIT_PATH_REPAIR;
	int repair = ph->path_id & PLAIT_PATH_REPAIR;
	if (path_id >= PLAIT_MAX_PATHS)
		return verdict(RCV_DROP_BAD_PATH, XDP_DROP);
	__u32 tid = bpf_ntohs(ph->tunnel_id);
	__u32 *slotp = bpf_map_lookup_elem(&rcv_ids, &tid);
	if (!slotp || !*slotp)
		return verdict(RCV_DROP_UNKNOWN_TUNNEL, XDP_DROP);
	__u32 slot = *slotp - 1;
	/* The slot's three values at once (arrays of MAX_TUNNELS: one is there if all are),
	 * so that clang spills around the lookups' calls once. */
	struct rx_tunnel *t = bpf_map_lookup_elem(&rcv_tunnels, &slot);
	struct rx_shared *sh = bpf_map_lookup_elem(&rcv_seq, &slot);
	struct rx_stats *rs = bpf_map_lookup_elem(&rcv_counters, &slot);
	if (!t || !sh || !rs)
		return verdict(RCV_DROP_UNKNOWN_TUNNEL, XDP_DROP);
	__u32 reason;
	if (!check_peer(t, ip, path_id, ctx->ingress_ifindex, &reason))
		return verdict(reason, XDP_DROP);

	__u32 flags = ph->ver_flags & 0x0f;
	struct plait_tel *tel = NULL;
	void *inner_start = ph + 1;
	if (flags & PLAIT_F_TELEMETRY) {
		tel = inner_start;
		if ((void *)(tel + 1) > end)
			return verdict(RCV_DROP_TRUNCATED, XDP_DROP);
		inner_start = tel + 1;
	}
	__u64 *tag = NULL;
	if (flags & PLAIT_F_AUTH) {
		tag = inner_start;
		if ((void *)(tag + 1) + PLAIT_TAG_COVER > end)
			return verdict(RCV_DROP_TRUNCATED, XDP_DROP);
		inner_start = tag + 1;
	}
	int compact = (flags & (PLAIT_F_COMPACT | PLAIT_F_PROBE)) == PLAIT_F_COMPACT;
	if (compact) {
		/* A TCP segment follows; its IPv4 header is the outer one, without options. */
		if (inner_start + 20 > end)
			return verdict(RCV_DROP_TRUNCATED, XDP_DROP);
		if (hl != sizeof(*ip) || !t->local)
			return verdict(RCV_DROP_BAD_INNER, XDP_DROP);
	} else if (!(flags & PLAIT_F_PROBE)) {
		struct iphdr *inner = inner_start;
		if ((void *)(inner + 1) > end)
			return verdict(RCV_DROP_TRUNCATED, XDP_DROP);
		__u32 inner_len = bpf_ntohs(inner->tot_len);
		if (inner->version != 4 || inner->ihl < 5 || inner_len < inner->ihl * 4 ||
		    (void *)inner + inner_len != (void *)ip + ip_len)
			return verdict(RCV_DROP_BAD_INNER, XDP_DROP);
		if (!allowed_source(t, inner->saddr))
			return verdict(RCV_DROP_INNER_SOURCE, XDP_DROP);
	}
	int auth = t->flags & RX_F_AUTH;
	if (auth && !tag)
		return verdict(RCV_DROP_NO_TAG, XDP_DROP);
	if (tag && (!auth || !tag_ok(t, ph, tag)))
		return verdict(RCV_DROP_BAD_TAG, XDP_DROP);

	__u32 p = path_id & (PLAIT_MAX_PATHS - 1);
	struct rx_path_stats *pst = &rs->paths[p];
	struct rx_path_shared *ps = &sh->paths[p];
	/* Opaque to clang, which otherwise recomputes base + p * size at every use of either,
	 * from two spilled values: 34 of an in-order packet's 559 instructions. */
	asm("" : "+r"(pst), "+r"(ps));
	__u64 now = bpf_ktime_get_ns();
	__u32 tx_ns = bpf_ntohl(ph->tx_ns);
	__u32 path_seq = bpf_ntohl(ph->path_seq);
	__u32 seq = bpf_ntohl(ph->seq);
	__u32 frame_len = sizeof(struct ethhdr) + ip_len; /* ip follows eth: no pointer arithmetic to narrow */
	int probe = flags & PLAIT_F_PROBE;
	if (repair) {
		/* A repair fills a hole: taken once (anti-replay: the lost seq was never seen, a
		 * copy of one that came is refused), measured as nothing on its path. */
		if (probe)
			return verdict(RCV_DROP_REPAIR_PROBE, XDP_DROP);
		if (auth && replayed(sh, seq))
			return verdict(RCV_DROP_REPLAY, XDP_DROP);
		rs->tunnel.repairs++;
	} else if (!believe(sh, ps, seq, path_seq, probe, auth)) {
		/* Authenticated, a jump is a replay until confirmed: not passed on. */
		pst->held++;
		if (probe || auth)
			return XDP_DROP;
	} else if (auth && (probe ? ps->probes.last_rx_ns && seq_diff(path_seq, ps->probes.last_seq) <= 0
				  : replayed(sh, seq))) {
		return verdict(RCV_DROP_REPLAY, XDP_DROP);
	} else if (probe) {
		/* A probe's path_seq numbers the agent's probes on the path. */
		if (measure_delay(pst, t, tx_ns, now, auth) && tel)
			measure_telemetry(pst, tel, t->epoch);
		measure_dispersion(&ps->probes, pst, path_seq, tx_ns, now, frame_len);
		pst->probes++;
		learn_port(t, slot, p, ip->saddr, sport);
		return XDP_DROP;
	} else {
		if (measure_delay(pst, t, tx_ns, now, auth) && tel)
			measure_telemetry(pst, tel, t->epoch);
		pst->packets++;
		pst->bytes += frame_len;
		measure_dispersion(&ps->data, pst, path_seq, tx_ns, now, frame_len);
		__u32 gap = 0;
		int in_order = track_path(ps, pst, path_seq, &gap);
		track_seq(sh, &rs->tunnel, seq, in_order, now, t->epoch);
		/* A packet the path held back past a NAT's new mapping does not undo it. */
		if (in_order)
			learn_port(t, slot, p, ip->saddr, sport);
		if (gap && (t->flags & RX_F_REPAIR)) {
			struct rx_gap g = { .slot = slot, .path = p, .first = path_seq - gap, .count = gap,
					    .owd_ns = pst->last_owd_ns };
			report_gap(&g, &rs->tunnel);
		}
	}

	/* While the agent's resequencer holds its lease, data goes to it to be put in order. */
	struct delivery d = { .seq = bpf_htonl(seq), .path = p | repair }; /* ph need not stay live */
	struct rx_reseq *rq = bpf_map_lookup_elem(&rcv_reseq, &slot);
	if (rq && rq->ifindex && now < rq->until_ns)
		d.reseq = rq->ifindex;
	if (compact)
		return restore_compact(ctx, eth, ip, t, inner_start - (void *)(ip + 1), &d);
	/* Move the Ethernet header forward over the outer headers. */
	struct eth_words outer;
	eth_get(&outer, eth);
	deliver_to(&outer, t, &d);
	if (bpf_xdp_adjust_head(ctx, inner_start - data - sizeof(struct ethhdr)))
		return verdict(RCV_DROP_ADJUST, XDP_DROP);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return verdict(RCV_DROP_ADJUST, XDP_DROP);
	eth_put(eth, &outer);
	return delivered(t, &d);
}

SEC("xdp")
int plait_receiver(struct xdp_md *ctx)
{
	return receive(ctx);
}

/* On the tunnel device: a veth takes the XDP frames the receiver redirects into its peer
 * only while it runs an XDP program (or has GRO on, which the device's users may turn
 * off). Everything passes. */
SEC("xdp")
int plait_device(struct xdp_md *ctx)
{
	return XDP_PASS;
}
