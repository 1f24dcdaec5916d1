package agent

import (
	"context"
	"net/netip"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// A path on which nothing ever arrives (here h2 sends path 3's packets to an address
// that is not h1's) is taken out of h1's split by the agent alone; the others stay.
func TestLivenessTakesOutAPathThatNeverDelivers(t *testing.T) {
	p := newPair(t, 3)
	ctx := context.Background()
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 3)) }); err != nil {
		t.Fatal(err)
	}
	c := tunnelConfig("2", "1", 3)
	c.Paths[2].RemoteAddr = "10.0.3.9"
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	runLiveness(t, p.h1, p.a1)
	start := time.Now()
	for {
		l, err := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(ctx, &pb.Empty{}) })
		if err != nil {
			t.Fatal(err)
		}
		ps := l.Tunnels[0].Paths
		if !ps[2].Up {
			if !ps[0].Up || !ps[1].Up {
				t.Fatalf("paths %v: want only p3 down", ps)
			}
			t.Logf("p3 out of h1's split %v after the tunnel came up", time.Since(start))
			return
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("p3, which never delivered, is still up after 2 s: %v", ps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// News of what an end hears goes in one copy per path, spread by the split like data,
// also on a tunnel whose ACK-sized packets all take one path: the copies must not share
// that path's delay and fate.
func TestLivenessNewsSpreadsPastTheAckPath(t *testing.T) {
	p := newPair(t, 2)
	ctx := context.Background()
	c := tunnelConfig("1", "2", 2, 1, 1)
	c.PeerAddress, c.AckPath = "10.99.0.2", "p1"
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	ap := func(h string) netip.AddrPort { return netip.MustParseAddrPort("10.99.0." + h + ":7733") }
	f, err := run(t, p.h1, func() (*feedback, error) { return openFeedback(7, "plait0", ap("1"), ap("2"), nil, nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	before := stats(t, p.h1, p.a1, 10*time.Second).Paths
	f.send(time.Now(), 2, 0b01, []wire.Key{testKey}) // the first report is news
	after := stats(t, p.h1, p.a1, 10*time.Second).Paths
	var sent []uint64
	for i := range after {
		sent = append(sent, after[i].TxPackets-before[i].TxPackets)
	}
	if sent[0]+sent[1] != 2 || sent[1] == 0 {
		t.Fatalf("the news went out on p1 and p2 %v times, want a copy on each (p1 carries the ACKs)", sent)
	}
}

// A path that failed towards the peer only is out of this end's split by the peer's
// word, and stays out when the peer's reports stop (its agent starved or stopped) while
// its probes still arrive here: no word from the peer is no word that it hears the path.
func TestLivenessKeepsAPathOutWhileThePeerIsSilent(t *testing.T) {
	p := newPair(t, 3)
	ctx := context.Background()
	p.configureBoth(t, 3, func(c *pb.TunnelConfig, end int) { c.PeerAddress = peerAddress(end) })
	// Nothing h1 sends on p3 reaches h2.
	p.h1.Run("nft", "add table netdev oneway")
	p.h1.Run("nft", "add chain netdev oneway out { type filter hook egress device eth3 priority 0; policy drop; }")
	runLiveness(t, p.h1, p.a1)
	ctx2, stop2 := context.WithCancel(ctx)
	done2 := make(chan struct{})
	go func() {
		defer close(done2)
		p.h2.Do(func() error { p.a2.RunLiveness(ctx2); return nil })
	}()
	t.Cleanup(func() { stop2(); <-done2 })
	p3 := func() *pb.PathState {
		l, err := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(ctx, &pb.Empty{}) })
		if err != nil {
			t.Fatal(err)
		}
		return l.Tunnels[0].Paths[2]
	}
	for deadline := time.Now().Add(3 * time.Second); p3().Up; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("p3, dead towards h2, is still in h1's split after 3 s")
		}
	}
	// h2's reports stop; its sampler still probes p3, so h1 hears p3 as before.
	stop2()
	<-done2
	stopped := time.Now()
	for time.Since(stopped) < 3*reportFresh {
		if p3().Up {
			t.Fatalf("p3 back in h1's split %v after h2's reports stopped, while nothing of it reaches h2", time.Since(stopped))
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := stats(t, p.h1, p.a1, time.Second).Paths[2]
	if st.LastRxAgeMs > float64(livenessDetect/time.Millisecond) {
		t.Fatalf("h1 last heard p3 %.0f ms ago: the test needs h2's probes to reach h1", st.LastRxAgeMs)
	}
}
