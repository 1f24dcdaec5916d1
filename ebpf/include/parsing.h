/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Bounds-checked header parsing through a cursor, shared by both programs. */
#ifndef PLAIT_PARSING_H
#define PLAIT_PARSING_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>

struct hdr_cursor {
	void *pos;
};

/* Each parser returns the header or NULL when the packet ends before it does. */
static __always_inline struct ethhdr *parse_eth(struct hdr_cursor *c, void *end)
{
	struct ethhdr *eth = c->pos;
	if ((void *)(eth + 1) > end)
		return NULL;
	c->pos = eth + 1;
	return eth;
}

/* An IPv4 header whose IHL lies (< 5 words or past the end) is treated as absent. */
static __always_inline struct iphdr *parse_ipv4(struct hdr_cursor *c, void *end)
{
	struct iphdr *ip = c->pos;
	if ((void *)(ip + 1) > end)
		return NULL;
	int len = ip->ihl * 4;
	if (len < (int)sizeof(*ip) || c->pos + len > end)
		return NULL;
	c->pos += len;
	return ip;
}

static __always_inline struct udphdr *parse_udp(struct hdr_cursor *c, void *end)
{
	struct udphdr *udp = c->pos;
	if ((void *)(udp + 1) > end)
		return NULL;
	c->pos = udp + 1;
	return udp;
}

/* Signed distance a - b between sequence numbers, correct across wrap-around. */
static __always_inline __s32 seq_diff(__u32 a, __u32 b)
{
	return (__s32)(a - b);
}

#endif /* PLAIT_PARSING_H */
