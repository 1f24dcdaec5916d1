/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The receiver's measurements and what of them it believes: per-path and tunnel sequence
 * tracking (RFC 4737), jumps held until the path's next packet confirms them, the
 * anti-replay window (RFC 4303), one-way delay, packet pairs and switch telemetry. */
#ifndef PLAIT_MEASURE_H
#define PLAIT_MEASURE_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>
#include "consts.h"
#include "structs.h"
#include "parsing.h"

static __always_inline __u32 log2_bucket(__u32 v)
{
	__u32 b = 0;
	if (v >= 1 << 8) { b += 8; v >>= 8; }
	if (v >= 1 << 4) { b += 4; v >>= 4; }
	if (v >= 1 << 2) { b += 2; v >>= 2; }
	if (v >= 1 << 1) { b += 1; }
	return b < EXTENT_BUCKETS ? b : EXTENT_BUCKETS - 1;
}

/* Takes the packet's arrival index and raises the tunnel's highest seq to seq if seq is
 * ahead of it, by less than JUMP_WINDOW (a jump is believe()'s to confirm); returns seq's
 * distance from the highest seq it found. max_seq and arrivals are one little-endian word,
 * so one compare-and-swap does both: a locked instruction costs about 5 ns a packet here.
 * A packet whose CPU loses the race four times takes an index and leaves the maximum. */
static __always_inline __s32 take_arrival(struct rx_shared *sh, __u32 seq, __u32 *arrival)
{
	__u64 *word = (__u64 *)&sh->max_seq;
	__u64 old = *(volatile __u64 *)word;
	__s32 d = 0;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		d = seq_diff(seq, (__u32)old);
		__u64 next = old + (1ULL << 32);
		if (d > 0 && d < JUMP_WINDOW)
			next = (next & ~0xffffffffULL) | seq;
		__u64 was = __sync_val_compare_and_swap(word, old, next);
		if (was == old) {
			*arrival = old >> 32;
			return d;
		}
		old = was;
	}
	*arrival = __sync_fetch_and_add(word, 1ULL << 32) >> 32;
	return d;
}

/* Per-path sequence: in order, late (intra-path reordering) or duplicate. Returns 1 when
 * the packet was in order on its path; *gap is how many path_seqs it skipped (left as
 * it is: none). Plain loads and stores, no atomics: a path's packets are taken by one CPU
 * at a time (its interface queue's NAPI poll; the outer addresses and ports are fixed, so
 * RSS keeps them on one queue), and were two CPUs to race, a late or duplicate count
 * would be off by one, nothing more. */
static __always_inline int track_path(struct rx_path_shared *ps, struct rx_path_stats *st,
				      __u32 path_seq, __u32 *gap)
{
	if (!ps->started) {
		ps->started = 1;
		ps->first_ps = path_seq;
		ps->max_ps = path_seq;
		return 1;
	}
	__s32 d = seq_diff(path_seq, ps->max_ps);
	if (d > 0) {
		/* A jump beyond JUMP_WINDOW is believe()'s to confirm. */
		if (d < JUMP_WINDOW) {
			ps->max_ps = path_seq;
			*gap = d - 1;
		}
		return 1;
	}
	if (d == 0)
		st->dups++;
	else
		st->late++;
	return 0;
}

/* Remembers where each of the skipped seqs from first on should have arrived: at arrival,
 * at time now. A global function, so that the verifier checks its loop once rather than
 * once for every way into it: inlined, the loop took 780 k of the 1 M instructions the
 * verifier explores. Only a packet that skips seqs calls it. */
__noinline int note_skipped(struct rx_shared *sh, __u32 first, __u32 skipped, __u32 arrival, __u64 now)
{
	if (!sh)
		return 0;
	for (__u32 k = 0; k < GAP_RING; k++) {
		if (k >= skipped)
			break;
		__u32 q = first + k;
		struct gap_slot *g = &sh->gaps[q & (GAP_RING - 1)];
		g->seq = q;
		g->arrival = arrival;
		g->ts = now;
	}
	return 0;
}

/* Tunnel sequence, RFC 4737: a packet below the highest seq received is reordered; its
 * extent is the number of arrivals since the first packet above it. */
static __always_inline void track_seq(struct rx_shared *sh, struct rx_tunnel_stats *st,
				      __u32 seq, int in_path_order, __u64 now, __u32 epoch)
{
	__u32 arrival;
	__s32 d;
	if (!sh->started && __sync_val_compare_and_swap(&sh->started, 0, 1) == 0) {
		/* A tunnel's sequence starts at 0: whatever arrived first overtook 0..seq-1. */
		sh->max_seq = seq;
		arrival = __sync_fetch_and_add(&sh->arrivals, 1);
		d = seq < GAP_RING ? seq + 1 : GAP_RING + 1;
	} else {
		d = take_arrival(sh, seq, &arrival);
	}
	if (d >= JUMP_WINDOW) {
		/* A confirmed jump (believe): measure from here. */
		sh->max_seq = seq;
	} else if (d > 1) {
		__u32 skipped = d - 1 < GAP_RING ? d - 1 : GAP_RING;
		note_skipped(sh, seq - skipped, skipped, arrival, now);
	} else if (d == 0) {
		st->dups++;
	} else if (d < 0) {
		st->reordered++;
		if (in_path_order)
			st->inter_path++;
		else
			st->intra_path++;
		struct gap_slot *g = &sh->gaps[seq & (GAP_RING - 1)];
		if (g->seq == seq) {
			__u32 extent = arrival - g->arrival;
			/* Another CPU may have stamped the overtaking packet after this one read the
			 * clock: such a packet was not late in time at all. */
			__u64 late = now > g->ts ? now - g->ts : 0;
			g->seq = seq + GAP_RING; /* consumed: a second copy is not reordered again */
			st->extent_hist[log2_bucket(extent)]++;
			st->late_ns_sum += late;
			__u32 k = epoch & 1;
			if (st->late_epoch[k] != epoch) {
				st->late_epoch[k] = epoch;
				st->late_ns_max[k] = late;
			} else if (late > st->late_ns_max[k]) {
				st->late_ns_max[k] = late;
			}
		} else {
			st->unknown_extent++;
		}
		if (seq_diff(sh->recent[(arrival - 1) & 3], seq) > 0 &&
		    seq_diff(sh->recent[(arrival - 2) & 3], seq) > 0 &&
		    seq_diff(sh->recent[(arrival - 3) & 3], seq) > 0)
			st->three_reordered++;
	}
	sh->recent[arrival & 3] = seq;
}

static __always_inline int far(__u32 a, __u32 b)
{
	__s32 d = seq_diff(a, b);
	return d >= JUMP_WINDOW || d <= -JUMP_WINDOW;
}

/* Whether a packet's seq and path_seq (a probe's: its probe number) are believed. A jump
 * beyond JUMP_WINDOW from what the path and tunnel have seen is, once the path's next
 * packet follows on from it (a sender that restarted, or a path back after an outage):
 * measurement then starts over from there. Until then the packet is passed on but not
 * measured. */
static __always_inline int believe(struct rx_shared *sh, struct rx_path_shared *ps, __u32 seq,
				   __u32 path_seq, int probe, int auth)
{
	int jump;
	if (probe)
		jump = ps->probes.last_rx_ns && far(path_seq, ps->probes.last_seq);
	else
		/* Authenticated, a seq behind the anti-replay window is one too: a sender that
		 * started over must not have its packets refused until it catches up. */
		jump = (ps->started && far(path_seq, ps->max_ps)) || (sh->started && far(seq, sh->max_seq)) ||
		       (auth && sh->started && seq_diff(seq, sh->replay_top) <= -REPLAY_WINDOW);
	if (!jump)
		return 1;
	if (ps->jumping && path_seq - ps->jump_ps - 1 < 16 &&
	    (probe || seq - ps->jump_seq - 1 < JUMP_WINDOW)) {
		ps->jumping = 0;
		if (probe)
			return 1; /* measure_dispersion takes the new number */
		/* Measure from the confirmed position if it is far, or behind. */
		if (far(path_seq, ps->max_ps) || seq_diff(ps->jump_ps, ps->max_ps) < 0) {
			ps->first_ps = ps->jump_ps;
			ps->max_ps = ps->jump_ps;
			__sync_fetch_and_add(&ps->resyncs, 1);
		}
		if (far(seq, sh->max_seq) || seq_diff(ps->jump_seq, sh->max_seq) < 0) {
			sh->max_seq = ps->jump_seq;
			__sync_fetch_and_add(&sh->resyncs, 1);
		}
		if (auth && seq_diff(ps->jump_seq, sh->replay_top) <= -REPLAY_WINDOW) {
			/* The sender started over: so does the anti-replay window. */
			sh->replay_top = ps->jump_seq;
			for (int i = 0; i < REPLAY_WORDS; i++)
				sh->replay[i] = 0;
		}
		return 1;
	}
	ps->jump_ps = path_seq;
	ps->jump_seq = seq;
	ps->jumping = 1;
	return 0;
}

/* RFC 4303's anti-replay check, after the tag: whether seq was taken before or lies
 * behind the window; otherwise it is marked taken. Lock-free, so racing CPUs may, rarely,
 * let a replay through while the window moves, or refuse a packet whose word another CPU
 * is just clearing; a lock would cost every packet a helper call. */
static __always_inline int replayed(struct rx_shared *sh, __u32 seq)
{
	__u32 top = *(volatile __u32 *)&sh->replay_top;
	__s32 d = seq_diff(seq, top);
	if (!sh->started) {
		/* The tunnel's first packet: the window starts at it. */
		sh->replay_top = seq;
	} else if (d > 0) {
		if (__sync_val_compare_and_swap(&sh->replay_top, top, seq) == top) {
			/* The words the window moved into held seqs a window ago. */
			__u32 from = top >> 6, words = (seq >> 6) - from;
			for (__u32 i = 1; i <= REPLAY_WORDS; i++) {
				if (i > words)
					break;
				sh->replay[(from + i) & (REPLAY_WORDS - 1)] = 0;
			}
		}
	} else if (d <= -REPLAY_WINDOW) {
		return 1;
	}
	__u64 bit = 1ULL << (seq & 63);
	return (__sync_fetch_and_or(&sh->replay[(seq >> 6) & (REPLAY_WORDS - 1)], bit) & bit) != 0;
}

/* One-way delay. A sample further than DELAY_WINDOW_NS from the path's smoothed delay is
 * used only when DELAY_CONFIRM in a row are: then the path's delay really changed.
 * Returns whether the sample was used. An authenticated packet held so still came from
 * the peer on the path, which its liveness counts (K1's 200 kbit/s path, its queue
 * growing by 60 ms a packet, had its samples held and read as silent while it
 * delivered); without tags, a forger's send time must not keep a dead path alive. */
static __always_inline int measure_delay(struct rx_path_stats *st, const struct rx_tunnel *t,
					 __u32 tx_ns, __u64 now, int auth)
{
	__s64 owd = (__s32)((__u32)now - tx_ns - (__u32)t->bias_ns);
	if (st->owd_cnt) {
		__s64 off = owd - st->owd_ewma_ns;
		if (off > DELAY_WINDOW_NS || off < -DELAY_WINDOW_NS) {
			if (++st->delay_outliers < DELAY_CONFIRM) {
				st->delay_held++;
				if (auth)
					st->last_rx_ns = now;
				return 0;
			}
			st->owd_ewma_ns = owd;
			st->last_owd_ns = owd;
		}
	}
	st->delay_outliers = 0;
	st->owd_sum_ns += owd;
	st->owd_cnt++;
	__u32 k = t->epoch & 1;
	if (st->min_epoch[k] != t->epoch) {
		st->min_epoch[k] = t->epoch;
		st->owd_min_ns[k] = owd;
	} else if (owd < st->owd_min_ns[k]) {
		st->owd_min_ns[k] = owd;
	}
	if (st->owd_cnt == 1) {
		st->owd_ewma_ns = owd;
	} else {
		__s64 dev = owd - st->last_owd_ns;
		if (dev < 0)
			dev = -dev;
		st->jitter_ns += ((__s64)dev - (__s64)st->jitter_ns) >> 4;
		st->owd_ewma_ns += (owd - st->owd_ewma_ns) >> 4;
	}
	st->last_owd_ns = owd;
	st->last_rx_ns = now;
	return 1;
}

/* Packet pairs: two consecutive packets of a path (data, or a probe train) sent much
 * closer together than they arrived were spaced by the path's bottleneck, so bytes / gap
 * estimates its capacity. */
static __always_inline void measure_dispersion(struct pair_state *ps, struct rx_path_stats *st,
					       __u32 seq, __u32 tx_ns, __u64 now, __u32 len)
{
	if (seq == ps->last_seq + 1 && ps->last_rx_ns) {
		__u64 rx_gap = now - ps->last_rx_ns;
		__u64 tx_gap8 = (__u64)(__u32)(tx_ns - ps->last_tx_ns) * 8;
		/* Whether the pair was spread on the way is as good as random from one pair to
		 * the next, so it is a mask rather than a branch: a mispredicted branch costs
		 * more than the three adds. Both gaps are below 2^36 when they count. */
		__u64 take = rx_gap < 1000000000ULL ? (tx_gap8 - rx_gap) >> 63 : 0;
		st->disp_bytes += len & -take;
		st->disp_ns += rx_gap & -take;
		st->disp_samples += take;
	}
	ps->last_seq = seq;
	ps->last_rx_ns = now;
	ps->last_tx_ns = tx_ns;
}

static __always_inline void measure_telemetry(struct rx_path_stats *st, const struct plait_tel *tel,
					      __u32 epoch)
{
	st->tel_packets++;
	__u32 queue_us = bpf_ntohl(tel->queue_us);
	st->queue_us_sum += queue_us < TEL_QUEUE_MAX_US ? queue_us : TEL_QUEUE_MAX_US;
	st->hops = tel->hops;
	__u32 q = bpf_ntohs(tel->max_qdepth);
	__u32 k = epoch & 1;
	if (st->qdepth_epoch[k] != epoch) {
		st->qdepth_epoch[k] = epoch;
		st->qdepth_max[k] = q;
	} else if (q > st->qdepth_max[k]) {
		st->qdepth_max[k] = q;
	}
}

#endif /* PLAIT_MEASURE_H */
