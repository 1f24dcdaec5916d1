package agent

import (
	"context"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// A path on which nothing ever arrives (here h2 sends path 3's packets to an address
// that is not h1's) is taken out of h1's split by the agent alone; the others stay.
func TestLivenessTakesOutAPathThatNeverDelivers(t *testing.T) {
	p := newPair(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 3)) }); err != nil {
		t.Fatal(err)
	}
	c := tunnelConfig("2", "1", 3)
	c.Paths[2].RemoteAddr = "10.0.3.9"
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.h1.Do(func() error { p.a1.RunLiveness(ctx); return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
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
