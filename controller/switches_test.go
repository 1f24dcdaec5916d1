package controller

import (
	"context"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4switch"
)

// splitRig is an embedded switch with memory ports served over P4Runtime on loopback:
// port 1 faces the sending host, ports 2..n+1 are the paths.
type splitRig struct {
	ports map[uint32]*p4switch.MemPort
	addr  string
}

func newSplitRig(t *testing.T, paths int) *splitRig {
	t.Helper()
	ports, opts := p4test.MemPorts(paths + 1)
	r := &splitRig{ports: map[uint32]*p4switch.MemPort{}}
	for p, mp := range ports {
		r.ports[uint32(p)] = mp
	}
	_, r.addr = p4test.Serve(t, opts...)
	return r
}

// connect programs the switch as cfg asks, as a controller's switch connection does.
func (r *splitRig) connect(t *testing.T, cfg *Switch) *switchConn {
	t.Helper()
	cfg.Address, cfg.DeviceID = r.addr, 1
	if cfg.ElectionID == 0 {
		cfg.ElectionID = 10
	}
	sc, err := newSwitchConn(cfg, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sc.run(ctx, slog.New(slog.DiscardHandler)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(5 * time.Second); !sc.ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("switch not programmed: %s", sc.status().LastError)
		}
	}
	return sc
}

// spread sends n packets for the tunnel prefix in on port 1 and counts them per port.
func (r *splitRig) spread(t testing.TB, n int) map[uint32]int {
	t.Helper()
	frame := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
		0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 99, 0, 1, 10, 99, 0, 2}
	frame = append(frame, make([]byte, 28)...)
	for range n {
		r.ports[1].Inject(frame)
	}
	got := map[uint32]int{}
	timeout := time.After(5 * time.Second)
	for total := 0; total < n; {
		select {
		case <-r.ports[2].Output():
			got[2]++
		case <-r.ports[3].Output():
			got[3]++
		case <-r.ports[1].Output():
			got[1]++
		case <-timeout:
			t.Fatalf("%d of %d packets came out: %v", total, n, got)
		}
		total++
	}
	return got
}

func twoPathSplit() *Split {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 9}
	sp := &Split{Tunnel: 1, From: "h1", Index: 0, InPort: 1, Prefix: netip.MustParsePrefix("10.99.0.2/32")}
	for k, name := range []string{"a", "b"} {
		sp.Paths = append(sp.Paths, &SplitPath{Name: name, Port: uint32(k + 2), SrcMAC: mac, DstMAC: mac,
			SrcIP: netip.AddrFrom4([4]byte{10, 0, byte(k + 1), 1}), DstIP: netip.AddrFrom4([4]byte{10, 0, byte(k + 1), 2})})
	}
	return sp
}

// The controller's split reaches the switch's slot table; with every path down it keeps
// the last split (a slot table cannot be emptied) instead of failing.
func TestSplitSwitchFollowsTheShares(t *testing.T) {
	r := newSplitRig(t, 2)
	sp := twoPathSplit()
	sc := r.connect(t, &Switch{Name: "s10", Forward: map[uint32]uint32{2: 1, 3: 1}, Splits: []*Split{sp}})
	if got := r.spread(t, 256); got[2] != 128 || got[3] != 128 {
		t.Fatalf("programmed split sent %v, want 128 on each path", got)
	}
	ctx := context.Background()
	if err := sc.setSplit(ctx, sp, []float64{0.25, 0.75}); err != nil {
		t.Fatal(err)
	}
	if got := r.spread(t, 256); got[2] != 64 || got[3] != 192 {
		t.Fatalf("split 1:3 sent %v, want 64 and 192", got)
	}
	if err := sc.setSplit(ctx, sp, []float64{0, 0}); err != nil {
		t.Fatalf("every path down: %v, want the last split kept", err)
	}
	if got := r.spread(t, 256); got[2] != 64 || got[3] != 192 {
		t.Fatalf("after every path went down the split sent %v, want the last one (64, 192)", got)
	}
}

// A controller that starts with a network file without the split owns the switch: what
// an earlier one installed is gone, so plain packets take the forwarding entries.
func TestReprogrammingRemovesAnEarlierSplit(t *testing.T) {
	r := newSplitRig(t, 2)
	r.connect(t, &Switch{Name: "s10", Splits: []*Split{twoPathSplit()}})
	r.connect(t, &Switch{Name: "s10", Forward: map[uint32]uint32{1: 3}, ElectionID: 20})
	if got := r.spread(t, 16); got[3] != 16 {
		t.Fatalf("after reprogramming without the split the packets went %v, want all 16 forwarded to port 3", got)
	}
}

// Without probes a split switch's path is judged by its silence against the others':
// an idle direction keeps every path, a path quiet while the others deliver goes down,
// and a dead path is given a share again after splitRetry.
func TestSplitPathLiveness(t *testing.T) {
	d := &direction{split: &splitTarget{}, ests: []*pathEstimator{newPathEstimator(), newPathEstimator(), newPathEstimator()}}
	now := t0
	ages := func(a ...time.Duration) []time.Duration {
		d.splitAges(a, now)
		for i, e := range d.ests {
			e.update(Observation{At: now, RxAge: a[i], OwdMin: math.NaN(), OwdMean: math.NaN(), Queue: math.NaN()})
		}
		return a
	}
	alive := func() []bool {
		var out []bool
		for _, e := range d.ests {
			out = append(out, e.est.Alive)
		}
		return out
	}
	ages(-1, -1, 5*time.Millisecond)
	if got := alive(); !slices.Equal(got, []bool{true, true, true}) {
		t.Fatalf("paths never heard from: alive %v, want all (they must get a share to be measured)", got)
	}
	now = now.Add(time.Second)
	ages(3*time.Second, 3*time.Second, 3*time.Second)
	if got := alive(); !slices.Equal(got, []bool{true, true, true}) {
		t.Fatalf("idle direction: alive %v, want all", got)
	}
	now = now.Add(time.Second)
	ages(time.Second, time.Millisecond, 2*time.Millisecond)
	if got := alive(); !slices.Equal(got, []bool{false, true, true}) {
		t.Fatalf("path a silent for 1 s while b and c deliver: alive %v, want a down", got)
	}
	now = now.Add(splitRetry - time.Millisecond)
	ages(3*time.Second, time.Millisecond, 2*time.Millisecond)
	if d.ests[0].est.Alive {
		t.Fatal("a dead path retried before splitRetry")
	}
	now = now.Add(time.Millisecond)
	ages(3*time.Second, time.Millisecond, 2*time.Millisecond)
	if !d.ests[0].est.Alive {
		t.Fatalf("a dead path not retried after %v", splitRetry)
	}
	now = now.Add(splitHold + time.Millisecond)
	ages(4*time.Second, time.Millisecond, 2*time.Millisecond)
	if d.ests[0].est.Alive {
		t.Fatal("a retried path that stayed silent is still alive")
	}
}
