package agent

import (
	"testing"

	pb "github.com/plait/plait/api/plait/v1"
)

// BenchmarkRepairCeiling compares one TCP flow striped over three unshaped veth paths
// with repair on at both ends and off, alternating for three rounds (medians compared):
// what keeping a copy of every packet sent costs the sending host at the highest rate it
// reaches (the kernel's clone of each frame for the tap and the filter, and the agent's
// tap thread), and that thread's CPU time per packet kept (its system calls included).
// No path loses anything, so nothing is asked for or resent.
func BenchmarkRepairCeiling(b *testing.B) {
	const rounds = 3
	for b.Loop() {
		p := newPair(b, 3)
		set := func(on bool) {
			p.configureBoth(b, 3, func(c *pb.TunnelConfig, end int) { c.PeerAddress, c.Repair = peerAddress(end), on })
		}
		kept := ceiling(b, p, rounds, set, "tap-ns/pkt", func() (uint64, uint64) {
			p.a1.mu.Lock()
			t := p.a1.tunnels[7]
			p.a1.mu.Unlock()
			q := p.a1.repairStats(t, nil)
			return q.TapBusyNs, q.Kept
		})
		b.Logf("%d packets kept", kept)
	}
}
