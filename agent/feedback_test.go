package agent

import (
	"net/netip"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// Liveness reports cross the tunnel between the two agents' tunnel addresses; one under
// another key, or tampered with, is not taken.
func TestReportsCrossTheTunnel(t *testing.T) {
	p := newPair(t, 2)
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) { c.PeerAddress = peerAddress(end) })
	ap := func(h string) netip.AddrPort { return netip.MustParseAddrPort("10.99.0." + h + ":7733") }
	kick := make(chan struct{}, 1)
	f1, err := run(t, p.h1, func() (*feedback, error) { return openFeedback(7, "plait0", ap("1"), ap("2"), kick, nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer f1.close()
	f2, err := run(t, p.h2, func() (*feedback, error) { return openFeedback(7, "plait0", ap("2"), ap("1"), kick, nil) })
	if err != nil {
		t.Fatal(err)
	}
	defer f2.close()
	keys := []wire.Key{testKey}
	f2.send(time.Now(), 2, 0, keys) // sets f2's keys for what it receives
	other := []wire.Key{{1: 1}}
	f1.send(time.Now(), 2, 0b01, other)
	time.Sleep(200 * time.Millisecond)
	if _, ok := f2.heard(time.Now(), 2); ok {
		t.Fatal("a report under another key was taken")
	}
	time.Sleep(probeIdle)
	f1.send(time.Now(), 2, 0b10, keys)
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		if h, ok := f2.heard(time.Now(), 2); ok {
			if h != 0b10 {
				t.Fatalf("h2 took %b, want 10", h)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("h1's report did not reach h2")
		}
	}
}
