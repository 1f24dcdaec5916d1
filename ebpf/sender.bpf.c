// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//go:build ignore

/* Plait sender, TC egress on a tunnel device: tags each tunnel packet and sprays it onto
 * one of the tunnel's paths. Everything that is not tunnel traffic passes untouched. */

#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "consts.h"
#include "structs.h"
#include "parsing.h"
#include "maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The tunnel this instance of the program serves: the agent loads one instance per tunnel
 * device, so the datapath finds its tunnel without a lookup. */
volatile const __u32 tunnel_slot = 0;

/* slot -> live config copy plus one (0: the tunnel is not configured). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, __u32);
} snd_gens SEC(".maps");

/* slot * 2 + gen -> configuration (double-buffered). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS * 2);
	__type(key, __u32);
	__type(value, struct tx_cfg);
} snd_configs SEC(".maps");

/* slot * PLAIT_MAX_PATHS + path -> what was sent on the path. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_TUNNELS * PLAIT_MAX_PATHS);
	__type(key, __u32);
	__type(value, struct tx_path_stats);
} snd_paths SEC(".maps");

/* enum sender_stat -> packets. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SND_STAT_MAX);
	__type(key, enum sender_stat);
	__type(value, __u64);
} snd_verdicts SEC(".maps");

static __always_inline int verdict(__u32 reason, int action)
{
	__u64 *n = bpf_map_lookup_elem(&snd_verdicts, &reason);
	if (n)
		*n += 1;
	return action;
}

/* Next path that is up at or after p, in round-robin order; -1 if none is. */
static __always_inline int next_up(const struct tx_cfg *cfg, __u32 p)
{
#pragma unroll
	for (int i = 0; i < PLAIT_MAX_PATHS; i++) {
		__u32 q = p + i;
		if (q >= cfg->n_paths)
			q -= cfg->n_paths;
		if (q < PLAIT_MAX_PATHS && (cfg->up_mask >> q) & 1)
			return q;
	}
	return -1;
}

/* All ones when x is negative, else 0. Opaque to the compiler, which would otherwise make
 * a mask of it a branch again (BPF has no conditional move): where the sign changes from
 * one packet to the next, a mispredicted branch costs more than the arithmetic. */
static __always_inline __u64 sign_mask(__u64 x)
{
	__u64 m = (__s64)x >> 63;
	asm volatile("" : "+r"(m));
	return m;
}

/* The later of two times below 2^63, without a branch. */
static __always_inline __u64 later(__u64 a, __u64 b)
{
	__u64 d = a - b;
	return a - (d & sign_mask(d));
}

/* Earliest estimated delivery: the path where this packet would arrive first if every
 * path drained its virtual queue at its estimated rate. Lock-free: when two CPUs choose at
 * once, each still advances the chosen queue by its own packet, so no backlog is lost; at
 * worst one of them chose with a view one packet old. Which path is first changes from
 * packet to packet, so the choice is made with masks rather than branches (times are ns
 * of the monotonic clock, plus at most 2^38 of transmission and 2^32 of delay: below
 * 2^63). */
static __always_inline int pick_edpf(const struct tx_cfg *cfg, struct tx_state *st,
				     __u64 now, __u32 wire_len)
{
	__u64 best = PLAIT_MAX_PATHS, best_arrival = 1ULL << 63, best_tx = 0;

#pragma unroll
	for (int i = 0; i < PLAIT_MAX_PATHS; i++) {
		const struct tx_path *p = &cfg->paths[i];
		if (i >= cfg->n_paths || !((cfg->up_mask >> i) & 1) || !p->byte_time)
			continue;
		__u64 tx = ((__u64)wire_len * p->byte_time) >> 10;
		__u64 arrival = later(st->busy_until[i], now) + tx + p->delay_ns;
		/* All ones when this path is first so far. */
		__u64 first = sign_mask(arrival - best_arrival);
		best ^= (best ^ i) & first;
		best_arrival ^= (best_arrival ^ arrival) & first;
		best_tx ^= (best_tx ^ tx) & first;
	}
	if (best >= PLAIT_MAX_PATHS)
		return -1;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		__u64 busy = *(volatile __u64 *)&st->busy_until[best];
		if (__sync_val_compare_and_swap(&st->busy_until[best], busy, later(busy, now) + best_tx) == busy)
			break;
	}
	return best;
}

/* Takes the packet's seq and, with schedule, the next rr/wrr position: one atomic add on
 * the word they share, as a locked instruction is the dearest in the sender. A seq that
 * wraps carries into the position, which then skips a place once in 2^32 packets. */
static __always_inline __u32 take_seq(struct tx_state *st, int schedule, __u32 *position)
{
	__u64 c = __sync_fetch_and_add((__u64 *)&st->seq, schedule ? 1ULL | 1ULL << 32 : 1);
	*position = c >> 32;
	return c;
}

/* Chooses the packet's path and takes its seq (*seq), or returns -1 without one when no
 * path can take it. ACK-sized packets may all take one path (see the controller's
 * ackPath): ACKs spread over paths of different delays tell the sender about the data
 * that came on a fast path early, and TCP sees the paths' whole delay skew as reordering
 * with a round trip short enough that it takes it for loss. */
static __always_inline int pick_path(const struct tx_cfg *cfg, struct tx_state *st,
				     __u64 now, __u32 inner_len, __u32 wire_len, __u32 *seq)
{
	__u32 position;
	int p;
	/* Some path is up, so next_up finds one. */
	if (!(cfg->up_mask & ((1U << cfg->n_paths) - 1)))
		return -1;
	if ((cfg->flags & TX_F_ACK_PATH) && inner_len <= ACK_MAX_INNER) {
		p = next_up(cfg, cfg->ack_path);
	} else if (cfg->mode == MODE_EDPF) {
		p = pick_edpf(cfg, st, now, wire_len);
		if (p < 0)
			return -1;
	} else {
		*seq = take_seq(st, 1, &position);
		if (cfg->mode == MODE_WRR)
			return next_up(cfg, cfg->slots[position & (WRR_SLOTS - 1)]);
		return next_up(cfg, position % cfg->n_paths);
	}
	*seq = take_seq(st, 0, &position);
	return p;
}

static __always_inline __u16 csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

/* The controller asks for a congestion signal when every path of a bulk flow holds a
 * standing queue: one early loss (or CE mark) lets TCP back off once, before the paths'
 * queues overflow together and the tail drops on every path cost it several window
 * reductions or a timeout. Only full-sized TCP segments carry it, and only one per request
 * (the CPU that moves signaled up gives it). Returns 1 when the packet is to be dropped. */
static __always_inline int take_signal(const struct tx_cfg *cfg, struct tx_state *st, struct iphdr *ip,
				       __u32 inner_len)
{
	__u32 was = *(volatile __u32 *)&st->signaled;
	__u32 want = cfg->signal;
	if ((__s32)(want - was) <= 0 || ip->protocol != IPPROTO_TCP || inner_len <= ACK_MAX_INNER)
		return 0;
	if (__sync_val_compare_and_swap(&st->signaled, was, want) != was)
		return 0;
	if (!(ip->tos & 3))
		return 1;
	/* ECT(0) or ECT(1) becomes CE (RFC 3168); the checksum follows (RFC 1624). */
	__u16 old = *(__u16 *)ip;
	ip->tos |= 3;
	__u32 sum = (__u16)~ip->check + (__u16)~old + *(__u16 *)ip;
	ip->check = csum_fold(sum);
	verdict(SND_MARK_SIGNAL, 0);
	return 0;
}

/* The UDP port a path's packets go to: the tunnel's, or on an authenticated tunnel the one
 * the receiver saw the peer's packets on the path come from (struct tx_peer), which a NAT
 * may have rewritten. */
static __always_inline __be16 peer_port(const struct tx_cfg *cfg, const struct tx_path *path,
					 const struct tx_peer *peer)
{
	if ((cfg->flags & TX_F_AUTH) && peer->port && peer->addr == path->dst_ip)
		return peer->port;
	return cfg->port;
}

/* The Ethernet header, and the UDP header unless the tunnel encapsulates in IP. */
static __always_inline void write_eth_l4(struct ethhdr *eth, struct udphdr *udp, const struct tx_cfg *cfg,
					 const struct tx_path *path, __be16 dport, __u16 ip_len)
{
	__builtin_memcpy(eth->h_dest, path->dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, path->src_mac, ETH_ALEN);
	if (cfg->flags & TX_F_IP_ENCAP)
		return;
	udp->source = cfg->port;
	udp->dest = dport;
	udp->len = bpf_htons(ip_len - sizeof(struct iphdr));
	udp->check = 0;
}

static __always_inline __u8 outer_protocol(const struct tx_cfg *cfg)
{
	return cfg->flags & TX_F_IP_ENCAP ? PLAIT_IPPROTO : IPPROTO_UDP;
}

/* Full encapsulation: a new outer IPv4 header in front of the original packet. */
static __always_inline int write_encap(struct __sk_buff *skb, const struct tx_cfg *cfg,
				       const struct tx_path *path, __be16 dport, __u32 encap_len, __u32 inner_len)
{
	/* adjust_room rather than change_head: TCP hands over clones, whose head change_head
	 * must copy (measured in real traffic: 214 against 309 ns a packet), although it
	 * wins in BPF_PROG_TEST_RUN (33 against 77 ns), where nothing is cloned. */
	__u64 flags = BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 | BPF_F_ADJ_ROOM_ENCAP_L2(sizeof(struct plait_hdr));
	if (!(cfg->flags & TX_F_IP_ENCAP))
		flags |= BPF_F_ADJ_ROOM_ENCAP_L4_UDP;
	if (bpf_skb_adjust_room(skb, encap_len, BPF_ADJ_ROOM_MAC, flags))
		return -1;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return -1;
	__u16 tot_len = inner_len + encap_len;
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(tot_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000); /* DF: paths are MTU-sized by the tunnel device */
	ip->ttl = 64;
	ip->protocol = outer_protocol(cfg);
	ip->saddr = path->src_ip;
	ip->daddr = path->dst_ip;
	ip->check = csum_fold(path->csum_base + ip->tot_len);
	write_eth_l4(eth, udp, cfg, path, dport, tot_len);
	return 0;
}

/* Compact: the packet's own IPv4 header becomes the outer one, with room for UDP (unless
 * IP encapsulation) and the Plait header made after it. TTL, TOS, ID and DF stay the
 * original's. */
static __always_inline int write_compact(struct __sk_buff *skb, const struct tx_cfg *cfg,
					 const struct tx_path *path, __be16 dport, __u32 encap_len)
{
	if (bpf_skb_adjust_room(skb, encap_len, BPF_ADJ_ROOM_NET, 0))
		return -1;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end)
		return -1;
	__u16 tot_len = bpf_ntohs(ip->tot_len) + encap_len;
	ip->tot_len = bpf_htons(tot_len);
	ip->protocol = outer_protocol(cfg);
	ip->saddr = path->src_ip;
	ip->daddr = path->dst_ip;
	ip->check = 0;
	__u16 *w = (void *)ip;
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	ip->check = csum_fold(sum);
	write_eth_l4(eth, udp, cfg, path, dport, tot_len);
	return 0;
}

/* Writes the tag of the packet whose Plait header is at offset off. The bytes it covers
 * (the inner IPv4 header, or the TCP header) are in the linear part of every packet the
 * stack sends; a packet where they are not is pulled in. */
static __always_inline int sign(struct __sk_buff *skb, const struct tx_cfg *cfg, __u32 off, int tel)
{
	__u32 tag_off = (off + sizeof(struct plait_hdr) + (tel ? PLAIT_TEL_LEN : 0)) & 0xff;
	__u32 need = tag_off + PLAIT_TAG_LEN + PLAIT_TAG_COVER;
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	if (data + need > end) {
		if (bpf_skb_pull_data(skb, need))
			return -1;
		data = (void *)(long)skb->data;
		end = (void *)(long)skb->data_end;
	}
	struct plait_hdr *ph = data + (off & 0xff);
	__u64 *tag = data + tag_off;
	if ((void *)(ph + 1) > end || (void *)(tag + 1) + PLAIT_TAG_COVER > end)
		return -1;
	*tag = plait_tag(&cfg->key, ph, tag + 1);
	return 0;
}

static __always_inline int send(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct hdr_cursor c = { .pos = data };

	struct ethhdr *eth = parse_eth(&c, end);
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IP))
		return verdict(SND_PASS_NOT_IPV4, TC_ACT_OK);

	__u32 slot = tunnel_slot;
	__u32 *gen = bpf_map_lookup_elem(&snd_gens, &slot);
	if (!gen || !*gen)
		return verdict(SND_PASS_NO_TUNNEL, TC_ACT_OK);

	struct iphdr *ip = parse_ipv4(&c, end);
	if (!ip)
		return verdict(SND_DROP_MALFORMED, TC_ACT_SHOT);

	__u32 cfg_key = slot * 2 + ((*gen - 1) & 1);
	struct tx_cfg *cfg = bpf_map_lookup_elem(&snd_configs, &cfg_key);
	if (!cfg || (ip->daddr & cfg->mask) != cfg->prefix)
		return verdict(SND_PASS_NOT_TUNNEL, TC_ACT_OK);

	struct tx_state *st = bpf_map_lookup_elem(&snd_states, &slot);
	if (!st)
		return verdict(SND_PASS_NO_TUNNEL, TC_ACT_OK);
	if (skb->gso_segs > 1)
		return verdict(SND_DROP_GSO, TC_ACT_SHOT);

	int tel = cfg->flags & TX_F_TELEMETRY;
	int compact = (cfg->flags & TX_F_COMPACT) && ip->protocol == IPPROTO_TCP && ip->ihl == 5 &&
		      ip->saddr == cfg->local && ip->daddr == cfg->peer;
	int ipenc = cfg->flags & TX_F_IP_ENCAP;
	int auth = cfg->flags & TX_F_AUTH;
	__u32 encap_len = (compact ? (ipenc ? PLAIT_IP_COMPACT_LEN : PLAIT_COMPACT_LEN)
				   : (ipenc ? PLAIT_IP_ENCAP_LEN : PLAIT_ENCAP_LEN)) +
			  (tel ? PLAIT_TEL_LEN : 0) + (auth ? PLAIT_TAG_LEN : 0);
	__u32 inner_len = skb->len - sizeof(struct ethhdr);
	if (take_signal(cfg, st, ip, inner_len))
		return verdict(SND_DROP_SIGNAL, TC_ACT_SHOT);
	/* TCP stamps every segment with its monotonic departure time, which is now: reading
	 * it saves a clock read. Other traffic carries no such stamp. */
	__u64 now = skb->tstamp;
	if (skb->tstamp_type != BPF_SKB_TSTAMP_DELIVERY_MONO || !now)
		now = bpf_ktime_get_ns();

	if (inner_len + encap_len > cfg->mtu)
		return verdict(SND_DROP_TOO_BIG, TC_ACT_SHOT);
	__u32 seq = 0; /* set unless p < 0; left undefined, clang 19 spills an unset register */
	int p = pick_path(cfg, st, now, inner_len, skb->len + encap_len, &seq);
	if (p < 0 || p >= PLAIT_MAX_PATHS)
		return verdict(SND_DROP_NO_PATH, TC_ACT_SHOT);
	const struct tx_path *path = &cfg->paths[p];
	__u32 path_seq = __sync_fetch_and_add(&st->path_seq[p], 1);

	__be16 dport = peer_port(cfg, path, &st->peers[p]);
	int err = compact ? write_compact(skb, cfg, path, dport, encap_len)
			  : write_encap(skb, cfg, path, dport, encap_len, inner_len);
	if (err)
		return verdict(SND_DROP_ADJUST, TC_ACT_SHOT);

	data = (void *)(long)skb->data;
	end = (void *)(long)skb->data_end;
	struct plait_hdr *ph = data + sizeof(struct ethhdr) + sizeof(struct iphdr) + (ipenc ? 0 : sizeof(struct udphdr));
	struct plait_tel *pt = (void *)(ph + 1);
	if ((void *)(pt + 1) > end)
		return verdict(SND_DROP_ADJUST, TC_ACT_SHOT);
	ph->ver_flags = PLAIT_VERSION << 4 | (tel ? PLAIT_F_TELEMETRY : 0) | (compact ? PLAIT_F_COMPACT : 0) |
			(auth ? PLAIT_F_AUTH : 0);
	ph->path_id = p;
	ph->tunnel_id = cfg->tunnel_id;
	ph->seq = bpf_htonl(seq);
	ph->path_seq = bpf_htonl(path_seq);
	ph->tx_ns = bpf_htonl((__u32)now);
	if (tel)
		__builtin_memset(pt, 0, sizeof(*pt));
	if (auth && sign(skb, cfg, (void *)ph - data, tel))
		return verdict(SND_DROP_ADJUST, TC_ACT_SHOT);

	/* Redirects are counted here only: the redirect verdict is their sum. */
	__u32 key = slot * PLAIT_MAX_PATHS + p;
	struct tx_path_stats *ps = bpf_map_lookup_elem(&snd_paths, &key);
	if (ps) {
		ps->packets++;
		ps->bytes += skb->len;
	}
	return bpf_redirect(path->ifindex, 0);
}

SEC("tc")
int plait_sender(struct __sk_buff *skb)
{
	return send(skb);
}
