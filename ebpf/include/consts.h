/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Limits, scheduler modes and the verdict/drop-reason indices of the stats maps. */
#ifndef PLAIT_CONSTS_H
#define PLAIT_CONSTS_H

/* Tunnels one host can hold; the agent assigns each tunnel a slot below this. */
#ifndef MAX_TUNNELS
#define MAX_TUNNELS 64
#endif

/* Entries of a wrr slot table; a power of two so a counter can index it with a mask. */
#define WRR_SLOTS 1024

/* Missing seqs remembered for measuring reordering extent; a power of two. */
#ifndef GAP_RING
#define GAP_RING 256
#endif

/* A sequence number this far behind the highest one means the sender restarted. */
#define RESYNC_DISTANCE (1 << 24)

/* Extent histogram buckets: [2^i, 2^(i+1)), the last one open-ended. */
#define EXTENT_BUCKETS 16

enum plait_mode {
	MODE_RR = 1,
	MODE_WRR = 2,
	MODE_EDPF = 3,
};

/* tx_cfg.flags */
#define TX_F_TELEMETRY 0x1
#define TX_F_COMPACT 0x2 /* send TCP between the tunnel's own addresses compact */
#define TX_F_ACK_PATH 0x4 /* packets up to ACK_MAX_INNER go on tx_cfg.ack_path */
#define TX_F_IP_ENCAP 0x8 /* the Plait header right after the outer IPv4 header, no UDP */

/* The largest IPv4 header plus TCP header with options: every pure ACK, SACK blocks and
 * all, fits. */
#define ACK_MAX_INNER 80

/* Sender verdicts and drop reasons; names in ebpf/datapath/stats.go must match. Packets
 * sent on a path are counted per path (snd_paths), not here. */
enum sender_stat {
	SND_PASS_NOT_IPV4,   /* not IPv4 (ARP, IPv6 ...): not ours to touch */
	SND_PASS_NO_TUNNEL,  /* no tunnel on this device */
	SND_PASS_NOT_TUNNEL, /* destination outside the tunnel's remote prefix */
	SND_DROP_MALFORMED,  /* IPv4 header shorter than its IHL says */
	SND_DROP_GSO,        /* a GSO super-packet: one tag cannot number its segments;
			      * the tunnel device needs gso_max_segs 1 (the agent sets it) */
	SND_DROP_TOO_BIG,    /* a packet that cannot be compact does not fit the path MTU:
			      * with compact tunnels only TCP gets the larger MTU */
	SND_DROP_NO_PATH,    /* every path is down */
	SND_DROP_ADJUST,     /* no room to encapsulate */
	SND_DROP_SIGNAL,     /* a congestion signal to a flow that is not ECN-capable */
	SND_MARK_SIGNAL,     /* a congestion signal as CE; the packet is sent (and counted
			      * on its path) */
	SND_STAT_MAX,
};

/* Receiver verdicts and drop reasons. Decapsulated packets and probes are counted per
 * path (rcv_counters), not here. */
enum receiver_stat {
	RCV_PASS_NOT_IPV4,
	RCV_PASS_NOT_UDP,       /* neither UDP nor PLAIT_IPPROTO */
	RCV_PASS_OTHER_PORT,
	RCV_PASS_FRAGMENT,      /* outer fragment: the stack reassembles, we cannot parse */
	RCV_DROP_TRUNCATED,     /* shorter than the headers it announces */
	RCV_DROP_BAD_VERSION,
	RCV_DROP_UNKNOWN_TUNNEL,
	RCV_DROP_BAD_PATH,      /* path_id >= PLAIT_MAX_PATHS */
	RCV_DROP_BAD_INNER,     /* inner packet is not a well-formed IPv4 packet */
	RCV_DROP_BAD_LENGTH,    /* outer IPv4/UDP lengths disagree with the frame */
	RCV_DROP_ADJUST,        /* bpf_xdp_adjust_head failed */
	RCV_STAT_MAX,
};

#endif /* PLAIT_CONSTS_H */
