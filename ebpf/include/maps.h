/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Maps both programs use; the agent loads the receiver with the sender's instance. */
#ifndef PLAIT_MAPS_H
#define PLAIT_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "consts.h"
#include "structs.h"

/* slot -> sequence numbers, scheduler position and edpf virtual queues; the receiver
 * writes the peer ports it learns into it (tx_state.peers). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct tx_state);
} snd_states SEC(".maps");

#endif /* PLAIT_MAPS_H */
