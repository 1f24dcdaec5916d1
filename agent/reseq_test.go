package agent

import (
	"context"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// With resequencing on at the receiving end, the tunnel carries pings both ways and a
// TCP flow, every packet through the agent's resequencer, which holds nothing once the
// flow has ended.
func TestResequencerCarriesTraffic(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 1, 1)
	c := tunnelConfig("2", "1", 3)
	c.Resequence = true
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(context.Background(), c) }); err != nil {
		t.Fatal(err)
	}
	p.h1.Run("ping", "-c", "30", "-i", "0.01", "-W", "2", "10.99.0.2")
	p.h2.Start("iperf3", "-s", "-1")
	waitListen(t, p)
	g, retx := iperfResult(t, p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "2", "-J"))
	time.Sleep(100 * time.Millisecond) // longer than any hold
	q := stats(t, p.h2, p.a2, 5e9).Resequencer
	if q == nil {
		t.Fatal("h2 reports no resequencer")
	}
	t.Logf("goodput %.0f Mbit/s, %d retransmissions; resequencer %v", g/1e6, retx, q)
	if q.InOrder < 1000 {
		t.Errorf("the resequencer released %d packets in order; the flow sent more", q.InOrder)
	}
	if q.Held != 0 {
		t.Errorf("the resequencer still holds %d packets after the flow ended", q.Held)
	}
}

// An agent that stops hands the tunnel back to direct delivery, so a flow goes on while
// it is away, and the restarted agent resequences again from its saved configuration.
func TestResequencerAcrossRestart(t *testing.T) {
	p := newPair(t, 2)
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, _ int) { c.Resequence = true })
	p.h2.Start("iperf3", "-s", "-1")
	waitListen(t, p)
	iperf, out := p.h1.Start("iperf3", "-c", "10.99.0.2", "-t", "4", "-b", "50M")
	time.Sleep(time.Second)
	stateFile, pin := p.a2.opts.stateFile, p.a2.opts.pinDir
	p.a2.Close()
	// At once, not a lease later.
	p.h1.Run("ping", "-c", "3", "-i", "0.05", "-W", "1", "10.99.0.2")
	time.Sleep(time.Second)
	a := restart(t, p.h2, pin, stateFile)
	if err := iperf.Wait(); err != nil {
		t.Fatalf("iperf3 across the restart: %v\n%s", err, out())
	}
	if q := stats(t, p.h2, a, time.Second).Resequencer; q == nil || q.InOrder == 0 {
		t.Errorf("the restarted agent resequences nothing: %v", q)
	}
}

// waitListen waits for iperf3's server on h2.
func waitListen(t *testing.T, p *pair) {
	t.Helper()
	for range 50 {
		if out, _ := p.h2.Try("ss", "-Hltn", "sport = :5201"); out != "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("iperf3 server does not listen on h2")
}

// BenchmarkResequencerCeiling compares one TCP flow striped over three unshaped veth
// paths with the receiver resequencing and without, alternating for three rounds (medians
// compared): the throughput the resequencer's hop through the agent allows, and its CPU
// time per packet (its thread's, system calls included: the stack's receive work that the
// write back into the device triggers runs in them).
func BenchmarkResequencerCeiling(b *testing.B) {
	const rounds = 3
	for b.Loop() {
		p := newPair(b, 3)
		p.configure(b, 1, 1, 1)
		set := func(on bool) {
			c := tunnelConfig("2", "1", 3)
			c.Resequence = on
			if _, err := run(b, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(context.Background(), c) }); err != nil {
				b.Fatal(err)
			}
		}
		ceiling(b, p, rounds, set, "reseq-ns/pkt", func() (uint64, uint64) {
			q := p.a2.reseqStats(7)
			return q.BusyNs, q.InOrder + q.Bound + q.Lost + q.Skipped + q.Late
		})
	}
}

// ceiling runs rounds of a 5 s flow with set(false), then set(true), and reports both
// medians and the mechanism's CPU time a packet under metric: cost, read after each
// round with it on, gives its thread's busy ns and the packets it handled. It returns
// those packets.
func ceiling(b *testing.B, p *pair, rounds int, set func(bool), metric string, cost func() (busyNs, packets uint64)) uint64 {
	var off, on []float64
	var busy, packets uint64
	for range rounds {
		set(false)
		g, _ := iperfGoodput(b, p, "10.99.0.2", 5)
		off = append(off, g)
		set(true)
		g, _ = iperfGoodput(b, p, "10.99.0.2", 5)
		on = append(on, g)
		ns, n := cost()
		busy, packets = busy+ns, packets+n
	}
	b.ReportMetric(median(off)/1e6, "off-Mbit/s")
	b.ReportMetric(median(on)/1e6, "on-Mbit/s")
	b.ReportMetric(median(on)/median(off), "on/off")
	b.ReportMetric(float64(busy)/float64(max(packets, 1)), metric)
	b.Logf("off %s, on %s Gbit/s", gbits(off), gbits(on))
	return packets
}

// A flow's pause in the one sample interval a second back leaves it steady: the paths
// the split leaves idle (here path 1, heard only by its probes) add no offset, while a
// flow that starts after a silence of seconds waits for the slowest path heard from.
func TestSpreadSteadyAcrossAPause(t *testing.T) {
	const step = 50 * time.Millisecond
	for _, c := range []struct {
		name       string
		data       func(at time.Duration) bool // whether path 0 carried data up to at
		wantSteady bool
	}{
		{"a 100 ms pause a second back", func(at time.Duration) bool { return at <= 1950*time.Millisecond || at > 2050*time.Millisecond }, true},
		{"a flow 0.5 s old after a silence", func(at time.Duration) bool { return at >= 2500*time.Millisecond }, false},
	} {
		s := &sampler{hist: map[uint32]*history{}}
		h := &history{}
		s.hist[1] = h
		var snap snapshot
		for at := time.Duration(0); at <= 3*time.Second; at += step {
			snap.mono = uint64(at)
			for i, owd := range []float64{10e6, 100e6} {
				p := &snap.rx.Paths[i]
				p.OwdCnt++
				p.OwdEwmaNs, p.OwdMinNs, p.HasMin = owd, int32(owd), true
			}
			if c.data(at) {
				snap.rx.Paths[0].Packets += 10
			}
			h.add(snap, 1000)
		}
		sp, ok := s.spread(1)
		if !ok {
			t.Fatalf("%s: no spread", c.name)
		}
		off := sp.offsets(sp.topDelay())
		if sp.steady != c.wantSteady || c.wantSteady != (off[0] == 0) {
			t.Errorf("%s: steady %v, path 0's offset %.0f ms; want steady %v", c.name, sp.steady, float64(off[0])/1e6, c.wantSteady)
		}
	}
}

// The delay the offsets hold to is the greatest of the window: one that falls stays
// until the window has passed, one that rises takes effect at once.
func TestTopFallsOnlyAfterItsWindow(t *testing.T) {
	var m maxWindow
	sec := uint64(time.Second)
	for _, c := range []struct {
		at   uint64
		v    int64
		want int64
	}{
		{0, noTop, noTop},
		{1 * sec, 120, 120},
		{2 * sec, 77, 120},
		{3 * sec, 121, 121},
		{3*sec + uint64(topWindow), 60, 121},
		{4*sec + uint64(topWindow), 60, 60},
	} {
		if got := m.add(c.at, c.v); got != c.want {
			t.Errorf("%v at %v: top %d, want %d", c.v, time.Duration(c.at), got, c.want)
		}
	}
}

// One proof path has nothing to wait for, whatever higher delay the window still holds
// (a flow the guard moved to its best path); two wait for the window's.
func TestOnePathWaitsForNothing(t *testing.T) {
	sp := pathSpread{paths: 0b11, data: 0b01, steady: true}
	sp.base[0], sp.base[1] = 10e6, 100e6
	if off := sp.offsets(100e6); off[0] != 0 {
		t.Errorf("one data path: offset %.0f ms, want 0", float64(off[0])/1e6)
	}
	sp.data = 0b11
	if off := sp.offsets(120e6); off[0] != 110e6 || off[1] != 20e6 {
		t.Errorf("two data paths: offsets %.0f and %.0f ms, want 110 and 20", float64(off[0])/1e6, float64(off[1])/1e6)
	}
}
