package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/wire"
)

// natPair is h1 and h2 joined by two paths: p1 a direct link (10.0.1.0/24), p2 through a
// NAT namespace that rewrites the source port of what h1 sends (10.0.2.0/24 inside,
// public address 10.0.3.254 on h2's side), as a carrier NAT does. h2 knows h1 on p2 by
// the NAT's public address only.
type natPair struct {
	*pair
	nat *nstest.NS
}

const natPublic = "10.0.3.254"

func newNATPair(t *testing.T) *natPair {
	t.Helper()
	p := &natPair{pair: &pair{h1: nstest.New(t, "h1"), h2: nstest.New(t, "h2")}, nat: nstest.New(t, "nat")}
	links := []struct {
		a     *nstest.NS
		aDev  string
		aAddr string
		b     *nstest.NS
		bDev  string
		bAddr string
	}{
		{p.h1, "eth1", "10.0.1.1/24", p.h2, "eth1", "10.0.1.2/24"},
		{p.h1, "eth2", "10.0.2.1/24", p.nat, "eth2", "10.0.2.254/24"},
		{p.nat, "eth3", natPublic + "/24", p.h2, "eth2", "10.0.3.2/24"},
	}
	for _, l := range links {
		nstest.Veth(t, l.a, l.aDev, l.b, l.bDev)
		l.a.Addr(l.aDev, l.aAddr)
		l.b.Addr(l.bDev, l.bAddr)
		l.a.Offloads(l.aDev, false)
		l.b.Offloads(l.bDev, false)
	}
	p.h1.Run("ip", "route", "add", "10.0.3.0/24", "via", "10.0.2.254", "dev", "eth2")
	p.nat.Run("sysctl", "-qw", "net.ipv4.ip_forward=1")
	p.nat.Run("nft", "add table ip plaitnat")
	p.nat.Run("nft", "add chain ip plaitnat post { type nat hook postrouting priority srcnat ; }")
	p.natPorts(t, 40000)
	p.a1 = p.start(t, p.h1, "h1")
	p.a2 = p.start(t, p.h2, "h2")
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) {
		c.Weights, c.PeerAddress = []float64{1, 1}, peerAddress(end)
		if end == 1 {
			c.Paths[1].RemoteAddr, c.Paths[1].NextHop = "10.0.3.2", "10.0.2.254"
		} else {
			c.Paths[1].RemoteAddr = natPublic
		}
	})
	runLiveness(t, p.h1, p.a1)
	runLiveness(t, p.h2, p.a2)
	return p
}

// natPorts makes the NAT map h1's UDP to ports from..from+100 of its public address, and
// forgets the mappings it made: h1's next packet gets a new port.
func (p *natPair) natPorts(t *testing.T, from int) {
	t.Helper()
	p.nat.Run("nft", "flush chain ip plaitnat post")
	p.nat.Run("nft", fmt.Sprintf("add rule ip plaitnat post oifname eth3 meta l4proto udp snat to %s:%d-%d", natPublic, from, from+100))
	if err := p.nat.Do(func() error { return netlink.ConntrackTableFlush(netlink.ConntrackTable) }); err != nil {
		t.Fatal(err)
	}
}

// learnedPort waits up to wait for h2 to send p2's packets to a port the NAT gives
// (from..from+100), learned, and returns it.
func (p *natPair) learnedPort(t *testing.T, from uint32, wait time.Duration) uint32 {
	t.Helper()
	var ps *pb.PathStats
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		ps = stats(t, p.h2, p.a2, time.Second).Paths[1]
		if ps.PeerPortLearned && ps.PeerPort >= from && ps.PeerPort <= from+100 {
			return ps.PeerPort
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v h2 sends p2's packets to port %d (learned %v), want one the NAT gives, %d-%d", wait, ps.PeerPort, ps.PeerPortLearned, from, from+100)
		}
	}
}

// watchUp records, until stop is called, which paths were out of either end's split.
func (p *natPair) watchUp(t *testing.T) (stop func() []string) {
	var mu sync.Mutex
	down := map[string]bool{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, h := range []struct {
		name string
		ns   *nstest.NS
		a    *Agent
	}{{"h1", p.h1, p.a1}, {"h2", p.h2, p.a2}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := run(t, h.ns, func() (*pb.ListTunnelsResponse, error) { return h.a.ListTunnels(ctx, &pb.Empty{}) })
				if err == nil {
					for _, ps := range l.Tunnels[0].Paths {
						if !ps.Up {
							mu.Lock()
							down[h.name+" "+ps.Config.Name] = true
							mu.Unlock()
						}
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	return func() []string { cancel(); wg.Wait(); return slices.Sorted(maps.Keys(down)) }
}

// packets counts what went each way on each path, as h1 sees it: out of h1, into h1.
func (p *natPair) packets(t *testing.T) (tx, rx [2]uint64) {
	for i, ps := range stats(t, p.h1, p.a1, time.Second).Paths {
		tx[i], rx[i] = ps.TxPackets, ps.RxPackets
	}
	return tx, rx
}

// h2's receiver learns the port the NAT gives h1's packets from h1's authenticated
// packets, and h2's sender, probes and liveness reports go there: a TCP flow through the
// tunnel runs both ways over the NATed path, which both ends' liveness keeps in the
// split. When the NAT maps h1 to a new port, h2 follows.
func TestNATRewritingThePortIsFollowed(t *testing.T) {
	p := newNATPair(t)
	port := p.learnedPort(t, 40000, 2*time.Second)
	t.Logf("h2 learned port %d for p2", port)
	if ps := stats(t, p.h1, p.a1, time.Second).Paths[1]; ps.PeerPort != wire.Port {
		t.Errorf("h1 sends p2's packets to port %d (learned %v), want h2's own %d", ps.PeerPort, ps.PeerPortLearned, wire.Port)
	}

	// Idle, h2's probes on p2 go to the learned port too, and reach h1.
	probes := func() uint64 { return stats(t, p.h1, p.a1, time.Second).Paths[1].Probes }
	before := probes()
	time.Sleep(500 * time.Millisecond)
	if n := probes() - before; n < 3 {
		t.Errorf("idle for 0.5 s, h1 received %d of h2's probes on p2 (one every 50 ms)", n)
	}

	stop := p.watchUp(t)
	tx0, rx0 := p.packets(t)
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	out := p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "2", "--bidir", "-J")
	tx1, rx1 := p.packets(t)
	if down := stop(); len(down) > 0 {
		t.Errorf("paths left the split during the flow: %v", down)
	}
	var r struct {
		End struct {
			SumReceived      struct{ Bytes uint64 } `json:"sum_received"`
			SumReceivedBidir struct{ Bytes uint64 } `json:"sum_received_bidir_reverse"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	out1, in1 := tx1[0]-tx0[0], rx1[0]-rx0[0]
	out2, in2 := tx1[1]-tx0[1], rx1[1]-rx0[1]
	t.Logf("iperf3 --bidir: %d bytes h1->h2, %d bytes h2->h1; packets out of h1 on p1 %d, p2 %d; into h1 on p1 %d, p2 %d",
		r.End.SumReceived.Bytes, r.End.SumReceivedBidir.Bytes, out1, out2, in1, in2)
	if r.End.SumReceived.Bytes < 1e5 || r.End.SumReceivedBidir.Bytes < 1e5 {
		t.Errorf("the flow carried %d bytes h1->h2 and %d h2->h1 in 2 s", r.End.SumReceived.Bytes, r.End.SumReceivedBidir.Bytes)
	}
	// Weights 1:1 at both ends: each direction puts about as many packets on p2 as on p1
	// (one flow's data and the other's ACKs). Without the learned port none of h2's
	// reach h1 on p2.
	if out2 < out1/4 || in2 < in1/4 || in2 == 0 {
		t.Errorf("the NATed p2 carried %d packets out of h1 and %d into it, against p1's %d and %d: want a share near the weights' half", out2, in2, out1, in1)
	}

	// The NAT forgets h1's mapping and gives it ports from 40200 on.
	p.natPorts(t, 40200)
	moved := p.learnedPort(t, 40200, 2*time.Second)
	_, rx0 = p.packets(t)
	p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "2", "10.99.0.2")
	if _, rx1 = p.packets(t); rx1[1]-rx0[1] < 5 {
		t.Errorf("after the NAT moved h1 to port %d, %d packets reached h1 on p2 during 20 pings", moved, rx1[1]-rx0[1])
	}
}

// The port h2 sends path 0's packets to is learned from h1's authenticated packets only:
// packets from h1's address and another port that are untagged, tagged under a guessed
// key or replayed are dropped and move nothing. Without authentication nothing moves it.
func TestForgedPacketsDoNotMoveThePeerPort(t *testing.T) {
	const forgedPort = 40404
	fromForged := func(f []byte) { binary.BigEndian.PutUint16(f[14+20:], forgedPort) }
	peer := netip.MustParseAddr("10.0.1.1")
	learned := func(t *testing.T, s *siege) uint16 {
		t.Helper()
		sc, err := s.a2.dp.ReadSender(s.slot)
		if err != nil {
			t.Fatal(err)
		}
		return sc.Peers[0].For(peer)
	}
	t.Run("auth", func(t *testing.T) {
		s := newSiege(t, nil)
		s.legitimate(t, 5)
		if got := learned(t, s); got != wire.Port {
			t.Fatalf("after h1's packets h2 learned port %d for path 0, want %d", got, wire.Port)
		}
		for _, c := range []struct {
			name  string
			key   *wire.Key
			probe bool
			want  string
		}{
			{"untagged", nil, false, "drop_no_tag"},
			{"tagged under a guessed key", &wire.Key{1, 2, 3}, false, "drop_bad_tag"},
			{"untagged probe", nil, true, "drop_no_tag"},
		} {
			f := s.forgery(t)
			f.key, f.tamper = c.key, fromForged
			if c.probe {
				f.hdr.Flags |= wire.FlagProbe
			}
			s.attack(t, "eth1", [][]byte{f.frame(t, s)}, map[string]uint64{c.want: 1})
			if got := learned(t, s); got != wire.Port {
				t.Errorf("%s, from port %d: h2 now sends path 0's packets to port %d", c.name, forgedPort, got)
			}
		}
		captured := s.capture(t)
		fromForged(captured)
		s.attack(t, "eth1", [][]byte{captured}, map[string]uint64{"drop_replay": 1})
		if got := learned(t, s); got != wire.Port {
			t.Errorf("a captured packet replayed from port %d moved h2's port for path 0 to %d", forgedPort, got)
		}
	})
	t.Run("no auth", func(t *testing.T) {
		s := newSiege(t, noAuth)
		s.legitimate(t, 5)
		f := s.forgery(t)
		f.tamper = fromForged
		s.inject(t, "eth1", [][]byte{f.frame(t, s)})
		if got := s.received(t, 100*time.Millisecond); len(got) != 1 || !strings.HasPrefix(got[0], "forged") {
			t.Fatalf("the unauthenticated packet from h1's address was not delivered: %q", got)
		}
		if got := learned(t, s); got != 0 {
			t.Errorf("without authentication h2 learned port %d for path 0", got)
		}
	})
}
