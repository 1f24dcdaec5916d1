package datapath

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// ReseqEtherType is the EtherType of the frames the receiver hands the agent's
// resequencer (RESEQ_ETH_P in consts.h; tests/wireformat checks it). Such a frame is the
// decapsulated packet; its source address carries the path id (byte 0) and the tunnel
// seq (bytes 2-5, big-endian).
const ReseqEtherType = 0x88B5

// LeaseResequencer makes the receiver send a tunnel slot's decapsulated data into
// ifindex as ReseqEtherType frames until untilNs (CLOCK_MONOTONIC): the agent renews the
// lease while its resequencer reads them, so packets flow directly again within a lease
// of it stopping. ifindex 0 ends the lease now.
func (d *Datapath) LeaseResequencer(slot, ifindex uint32, untilNs uint64) error {
	v := receiverRxReseq{Ifindex: ifindex, UntilNs: untilNs}
	if ifindex == 0 {
		v.UntilNs = 0
	}
	if err := d.rcv.RcvReseq.Update(slot, v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("resequencer lease of slot %d: %w", slot, err)
	}
	return nil
}
