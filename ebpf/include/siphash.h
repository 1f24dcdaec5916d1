/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The per-packet tag: SipHash-2-4 (Aumasson and Bernstein, 2012) over the Plait header and
 * the first PLAIT_TAG_COVER bytes after the tag, keyed per tunnel. wire.Tag is the Go
 * definition; ebpf/datapath's tests check that the two agree. No helper calls: the
 * rounds are plain ALU instructions. */
#ifndef PLAIT_SIPHASH_H
#define PLAIT_SIPHASH_H

#include <linux/types.h>
#include "plait.h"

#define SIP_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                       \
	do {                                                                           \
		v0 += v1; v1 = SIP_ROTL(v1, 13); v1 ^= v0; v0 = SIP_ROTL(v0, 32);      \
		v2 += v3; v3 = SIP_ROTL(v3, 16); v3 ^= v2;                             \
		v0 += v3; v3 = SIP_ROTL(v3, 21); v3 ^= v0;                             \
		v2 += v1; v1 = SIP_ROTL(v1, 17); v1 ^= v2; v2 = SIP_ROTL(v2, 32);      \
	} while (0)

#define SIP_BLOCK(m)                                                                   \
	do {                                                                           \
		v3 ^= (m);                                                             \
		SIPROUND;                                                              \
		SIPROUND;                                                              \
		v0 ^= (m);                                                             \
	} while (0)

/* A key: the two little-endian halves of its 16 bytes. */
struct plait_key {
	__u64 k0;
	__u64 k1;
};

/* The tag of the PLAIT_TAG_MSG bytes hdr[0:16] || cover[0:16]. Both pointers have been
 * bounds-checked by the caller. The loads are little-endian (the programs are built for
 * bpfel) and may be unaligned, which the kernel allows for packet data on the
 * architectures the programs are built for. */
static __always_inline __u64 plait_tag(const struct plait_key *k, const void *hdr, const void *cover)
{
	__u64 v0 = k->k0 ^ 0x736f6d6570736575ULL;
	__u64 v1 = k->k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = k->k0 ^ 0x6c7967656e657261ULL;
	__u64 v3 = k->k1 ^ 0x7465646279746573ULL;
	SIP_BLOCK(((const __u64 *)hdr)[0]);
	SIP_BLOCK(((const __u64 *)hdr)[1]);
	SIP_BLOCK(((const __u64 *)cover)[0]);
	SIP_BLOCK(((const __u64 *)cover)[1]);
	SIP_BLOCK((__u64)PLAIT_TAG_MSG << 56);
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

#endif /* PLAIT_SIPHASH_H */
