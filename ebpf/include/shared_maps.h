/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one map both programs use: the receiver writes, per tunnel slot, the path its latest
 * data packet arrived on; the sender, in echo mode, answers on the path that evens out the
 * round trip for it. The agent hands the receiver's instance to the sender. */
#ifndef PLAIT_SHARED_MAPS_H
#define PLAIT_SHARED_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, __u32);
} last_arrival SEC(".maps");

#endif /* PLAIT_SHARED_MAPS_H */
