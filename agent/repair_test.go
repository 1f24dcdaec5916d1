package agent

import (
	"math"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/wire"
)

// A tunnel that repairs keeps copies from its first packet; once its taps have kept
// quietAfter packets with no request they close, and the peer's next request opens them
// again (the packets it asked for were not kept: missing).
func TestRepairTapsCloseOnAQuietTunnel(t *testing.T) {
	p := newPair(t, 2)
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) { c.PeerAddress, c.Repair = peerAddress(end), true })
	runLiveness(t, p.h1, p.a1)
	runLiveness(t, p.h2, p.a2)
	p.a1.rep.mu.Lock()
	p.a1.rep.quietAfter = 30
	p.a1.rep.mu.Unlock()
	stats := func() (*pb.RepairStats, int) {
		p.a1.mu.Lock()
		t := p.a1.tunnels[7]
		p.a1.mu.Unlock()
		q := p.a1.repairStats(t, nil)
		p.a1.rep.mu.Lock()
		defer p.a1.rep.mu.Unlock()
		return q, len(p.a1.rep.taps[7])
	}
	waitTaps := func(want int, why string) *pb.RepairStats {
		for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			q, taps := stats()
			if taps == want {
				return q
			}
			if time.Now().After(end) {
				t.Fatalf("%s: %d taps open, want %d", why, taps, want)
			}
		}
	}
	waitTaps(2, "a new tunnel")
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "1", "10.99.0.2")
	if q, taps := stats(); taps != 2 || q.Kept < 20 {
		t.Fatalf("after 20 pings: %d taps, %d packets kept; want 2 and at least 20", taps, q.Kept)
	}
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "1", "10.99.0.2")
	waitTaps(0, "40 packets kept with no request")
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
	if q := waitTaps(2, "after a request"); q.Missing != 1 {
		t.Errorf("after a request to a quiet tunnel: %d packets not kept, want 1", q.Missing)
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
// No path loses anything, so nothing is asked for or resent; the sender's taps are open
// as they are from a tunnel's start (until quietAfter packets pass with no request:
// TestRepairTapsCloseOnAQuietTunnel).
func BenchmarkRepairCeiling(b *testing.B) {
	const rounds = 3
	for b.Loop() {
		p := newPair(b, 3)
		p.a1.rep.mu.Lock()
		p.a1.rep.quietAfter = math.MaxUint64 // a round sends more than quietAfter packets
		p.a1.rep.mu.Unlock()
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

// A loss is congestion only when its path holds a standing queue and the packet after
// it met that queue at its top, as a drop-tail queue's overflow does: a random loss in
// the trough of a bulk flow's sawtooth is repaired, and so is one on a path whose queue
// drains between bursts.
func TestRepairViewJudgesTheQueueTheLossMet(t *testing.T) {
	const base = 20e6 // ns
	// queue is path 0's queueing delay at a time; path 1 idles at 10 ms.
	sampled := func(queue func(at time.Duration) float64) *sampler {
		s := &sampler{hist: map[uint32]*history{}}
		h := &history{}
		s.hist[1] = h
		var snap snapshot
		for at := time.Duration(0); at <= 3*time.Second; at += 25 * time.Millisecond {
			snap.mono = uint64(at)
			for i, owd := range []float64{base + queue(at), 10e6} {
				p := &snap.rx.Paths[i]
				p.OwdCnt++
				p.Packets += 50
				p.Bytes += 50 * 1500
				p.OwdEwmaNs, p.OwdMinNs, p.HasMin = owd, int32(owd), true
				p.LastRxNs = snap.mono
			}
			h.add(snap, 1000)
		}
		return s
	}
	// A cubic sawtooth between 40 and 100 ms of queue, after half a second without one
	// (the path's base), and one stray reading of 1.4 s.
	sawtooth := sampled(func(at time.Duration) float64 {
		switch {
		case at < 500*time.Millisecond:
			return 0
		case at == 2*time.Second:
			return 1.4e9
		}
		return 40e6 + 60e6*float64(at%time.Second)/float64(time.Second)
	})
	// Bursts: 100 ms of queue, then empty, every 200 ms.
	bursts := sampled(func(at time.Duration) float64 {
		if at%(200*time.Millisecond) < 100*time.Millisecond {
			return 100e6
		}
		return 0
	})
	for _, c := range []struct {
		name  string
		s     *sampler
		queue float64 // what the packet after the loss met
		want  bool
	}{
		{"standing queue, met at its top", sawtooth, 99e6, true},
		{"standing queue, met in its trough", sawtooth, 45e6, false},
		{"a queue that drains between bursts, met full", bursts, 100e6, false},
	} {
		via, congested := c.s.repairView(1, datapath.Gap{Path: 0, First: 7, Count: 1, OwdNs: int64(base + c.queue)})
		if congested != c.want || via != 1 {
			t.Errorf("%s: congested %v via path %d; want %v via path 1 (the lower delay)", c.name, congested, via, c.want)
		}
	}
}
