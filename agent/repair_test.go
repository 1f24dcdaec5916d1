package agent

import (
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// A tunnel with repair on keeps no copies until its peer asks for a repair: a flow over
// paths that lose nothing opens no tap. The first request, over the real report
// channel, finds nothing kept (counted as not kept) and opens the sender's taps on every
// path, which keep the packets sent from then on.
func TestRepairTapsOpenOnFirstRequest(t *testing.T) {
	p := newPair(t, 2)
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) { c.PeerAddress, c.Repair = peerAddress(end), true })
	runLiveness(t, p.h1, p.a1)
	runLiveness(t, p.h2, p.a2)
	stats := func() (*pb.RepairStats, int) {
		p.a1.mu.Lock()
		t := p.a1.tunnels[7]
		p.a1.mu.Unlock()
		q := p.a1.repairStats(t, nil)
		p.a1.rep.mu.Lock()
		defer p.a1.rep.mu.Unlock()
		return q, len(p.a1.rep.taps[7])
	}
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "1", "10.99.0.2")
	if q, taps := stats(); taps != 0 || q.Kept != 0 {
		t.Fatalf("before any request: %d taps open, %d packets kept; want none", taps, q.Kept)
	}
	var f *feedback
	for end := time.Now().Add(5 * time.Second); f == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("h2's report channel did not open")
		}
		p.a2.rep.mu.Lock()
		f = p.a2.rep.fbs[7]
		p.a2.rep.mu.Unlock()
	}
	if err := f.ask(request{path: 0, via: 0, first: 1, count: 1}, []wire.Key{testKey}); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		q, taps := stats()
		if taps == 2 && q.Missing == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after a request: %d taps open, %d packets not kept; want 2 and 1", taps, q.Missing)
		}
	}
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "1", "10.99.0.2")
	if q, _ := stats(); q.Kept < 20 {
		t.Errorf("%d packets kept after 20 pings; want at least 20", q.Kept)
	}
}

// BenchmarkRepairCeiling compares one TCP flow striped over three unshaped veth paths
// with repair on at both ends and off, alternating for three rounds (medians compared):
// what keeping a copy of every packet sent costs the sending host at the highest rate it
// reaches (the kernel's clone of each frame for the tap and the filter, and the agent's
// tap thread), and that thread's CPU time per packet kept (its system calls included).
// No path loses anything, so nothing is asked for or resent; the sender's taps are
// opened as a peer's first request opens them (without one, a tunnel that loses nothing
// keeps no copies: TestRepairTapsOpenOnFirstRequest).
func BenchmarkRepairCeiling(b *testing.B) {
	const rounds = 3
	for b.Loop() {
		p := newPair(b, 3)
		set := func(on bool) {
			p.configureBoth(b, 3, func(c *pb.TunnelConfig, end int) { c.PeerAddress, c.Repair = peerAddress(end), on })
			if on { // as after the peer's first request; the sampler opens the taps
				p.a1.rep.mu.Lock()
				p.a1.rep.armed[7] = true
				p.a1.rep.mu.Unlock()
				p.a1.rep.arm.Store(true)
				time.Sleep(100 * time.Millisecond)
			}
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
