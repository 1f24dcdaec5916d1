/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The Plait wire format: the tag every striped packet carries between sender and receiver.
 *
 * On the wire:  Ethernet | outer IPv4 | UDP (dst PLAIT_UDP_PORT) | plait_hdr
 *               | [plait_tel, when PLAIT_F_TELEMETRY] | original IPv4 packet
 *
 * Compact (PLAIT_F_COMPACT), for TCP between the tunnel's two own addresses: the original
 * IPv4 header itself becomes the outer one (path addresses, protocol UDP, length and
 * checksum adjusted; TTL, TOS, ID and DF kept), and what follows the Plait header is the
 * original TCP segment. The receiver restores the header from the tunnel's addresses:
 *               Ethernet | IPv4 (rewritten) | UDP | plait_hdr | [plait_tel] | TCP ...
 *
 * IP encapsulation (PLAIT_IPPROTO), for paths without NAT: the Plait header follows the
 * outer IPv4 header directly, 8 bytes less a packet than UDP; either encapsulation may be
 * compact:
 *               Ethernet | outer IPv4 (protocol PLAIT_IPPROTO) | plait_hdr | ...
 *
 * Authenticated (PLAIT_F_AUTH): an 8-byte tag follows the header and the telemetry block,
 * SipHash-2-4 under the tunnel's key over the header and the first PLAIT_TAG_COVER bytes
 * after the tag: the inner IPv4 header up to its source address (its checksum, which
 * covers the destination, included), or a compact packet's TCP header up to its
 * checksum, which a path interface may still have to fill in. Telemetry is outside it:
 * switches stamp it on the way.
 *               ... | plait_hdr | [plait_tel] | tag | inner (at least PLAIT_TAG_COVER bytes)
 *
 * The same layout is defined in wire/wire.go and p4/include/headers.p4; the test in
 * tests/wireformat checks all three against each other. Change all three or none.
 */
#ifndef PLAIT_H
#define PLAIT_H

#include <linux/types.h>

#define PLAIT_VERSION 1
#define PLAIT_UDP_PORT 7733
/* IPv4 protocol of IP-encapsulated Plait packets: 253, RFC 3692's experimentation value. */
#define PLAIT_IPPROTO 253

/* Flags (low nibble of ver_flags). */
#define PLAIT_F_PROBE 0x1     /* measurement probe: no inner packet follows */
#define PLAIT_F_TELEMETRY 0x2 /* a plait_tel block follows the header */
#define PLAIT_F_COMPACT 0x4   /* a TCP segment follows, its IPv4 header is the outer one */
#define PLAIT_F_AUTH 0x8      /* a tag follows the header (and telemetry) */

/* The top bit of path_id (path ids are below PLAIT_MAX_PATHS): a repair, the sender's
 * copy of a packet lost on its path, resent on the path the low bits name with its
 * original seq and path_seq. The flags nibble is full. */
#define PLAIT_PATH_REPAIR 0x80

/* Every field lies at a multiple of its size, so the structs need no packing: unpacked,
 * the programs read and write each field in one load or store rather than byte by byte
 * (the header sits 2 bytes off a word boundary in the frame, which the kernel allows for
 * packet data on the architectures the programs are built for). */
struct plait_hdr {
	__u8 ver_flags;   /* version in the high nibble (PLAIT_VERSION), PLAIT_F_* flags in the low */
	__u8 path_id;     /* index of the path in the sender's path table, < PLAIT_MAX_PATHS;
			   * | PLAIT_PATH_REPAIR on a repair */
	__be16 tunnel_id; /* striped tunnel (sender/receiver pair); same id in both directions */
	__be32 seq;       /* tunnel-wide packet sequence: gaps here are reordering or loss */
	__be32 path_seq;  /* per-path sequence: a gap here is a loss on that path */
	__be32 tx_ns;     /* low 32 bits of the sender's monotonic clock (ns) at send time */
};

/* Stamped by P4 switches on the way; only present when the sender or split switch asks. */
struct plait_tel {
	__be32 queue_us;   /* sum of the switches' queueing delays, µs */
	__be16 max_qdepth; /* deepest queue seen on the way, packets */
	__u8 hops;         /* switches that stamped this block */
	__u8 reserved;     /* zero */
};

#define PLAIT_MAX_PATHS 8

/* Outer headers a sender adds in front of the original IPv4 packet. */
#define PLAIT_ENCAP_LEN (20 /* IPv4 */ + 8 /* UDP */ + sizeof(struct plait_hdr))
/* What a compact packet adds after its (rewritten) IPv4 header. */
#define PLAIT_COMPACT_LEN (8 /* UDP */ + sizeof(struct plait_hdr))
/* IP encapsulation leaves the UDP header out of both. */
#define PLAIT_IP_ENCAP_LEN (20 /* IPv4 */ + sizeof(struct plait_hdr))
#define PLAIT_IP_COMPACT_LEN (sizeof(struct plait_hdr))
#define PLAIT_TEL_LEN (sizeof(struct plait_tel))
/* The tag, and how many bytes after it it covers: the message is the header and those. */
#define PLAIT_TAG_LEN 8
#define PLAIT_TAG_COVER 16
#define PLAIT_TAG_MSG (16 + PLAIT_TAG_COVER)

#endif /* PLAIT_H */
