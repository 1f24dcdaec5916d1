package agent

import (
	"context"
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
			for _, h := range []struct {
				a             *Agent
				local, remote string
			}{{p.a1, "1", "2"}, {p.a2, "2", "1"}} {
				c := tunnelConfig(h.local, h.remote, 3)
				c.PeerAddress, c.Repair = "10.99.0."+h.remote, on
				ns := p.h1
				if h.a == p.a2 {
					ns = p.h2
				}
				if _, err := run(b, ns, func() (*pb.Tunnel, error) { return h.a.Configure(context.Background(), c) }); err != nil {
					b.Fatal(err)
				}
			}
		}
		var off, on []float64
		var busy, kept uint64
		for range rounds {
			set(false)
			g, _ := iperfGoodput(b, p, "10.99.0.2", 5)
			off = append(off, g)
			set(true)
			g, _ = iperfGoodput(b, p, "10.99.0.2", 5)
			on = append(on, g)
			p.a1.mu.Lock()
			t := p.a1.tunnels[7]
			p.a1.mu.Unlock()
			q := p.a1.repairStats(t, nil)
			busy += q.TapBusyNs
			kept += q.Kept
		}
		b.ReportMetric(median(off)/1e6, "off-Mbit/s")
		b.ReportMetric(median(on)/1e6, "on-Mbit/s")
		b.ReportMetric(median(on)/median(off), "on/off")
		b.ReportMetric(float64(busy)/float64(max(kept, 1)), "tap-ns/pkt")
		b.Logf("off %s, on %s Gbit/s; %d packets kept", gbits(off), gbits(on), kept)
	}
}
