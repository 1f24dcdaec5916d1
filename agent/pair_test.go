package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/wire"
)

// pair is two hosts joined by n veth paths on subnets 10.0.i.0/24, each host running an
// agent core in its own namespace.
type pair struct {
	h1, h2 *nstest.NS
	a1, a2 *Agent
	pinDir string
}

func newPair(t testing.TB, n int) *pair {
	t.Helper()
	p := linkPair(t, n)
	p.pinDir = filepath.Join("/sys/fs/bpf/plait", filepath.Base(p.h1.Name))
	p.a1 = p.start(t, p.h1, "h1")
	p.a2 = p.start(t, p.h2, "h2")
	return p
}

// linkPair makes the two hosts and their n links (ethI, 10.0.I.1 and .2), no agents yet.
func linkPair(t testing.TB, n int) *pair {
	t.Helper()
	p := &pair{h1: nstest.New(t, "h1"), h2: nstest.New(t, "h2")}
	for i := 1; i <= n; i++ {
		dev := fmt.Sprintf("eth%d", i)
		nstest.Veth(t, p.h1, dev, p.h2, dev)
		p.h1.Addr(dev, fmt.Sprintf("10.0.%d.1/24", i))
		p.h2.Addr(dev, fmt.Sprintf("10.0.%d.2/24", i))
		// The unstriped baseline and the striped tunnel see the same offloads.
		p.h1.Offloads(dev, false)
		p.h2.Offloads(dev, false)
	}
	return p
}

func (p *pair) start(t testing.TB, ns *nstest.NS, name string) *Agent {
	t.Helper()
	pin := filepath.Join("/sys/fs/bpf/plait", ns.Name)
	state := filepath.Join(t.TempDir(), name+".json")
	t.Cleanup(func() { os.RemoveAll(pin) })
	var a *Agent
	err := ns.Do(func() (err error) {
		a, err = New(WithPinDir(pin), WithStateFile(state), WithLogger(slog.New(slog.DiscardHandler)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	runSampler(t, ns, a)
	return a
}

// runSampler runs the agent's sampling loop on a thread inside its namespace, as the
// daemon does, until the test ends.
// restart starts an agent again in ns on the pins and state file a closed one left,
// with its sampler running, for the rest of the test.
func restart(t *testing.T, ns *nstest.NS, pin, stateFile string) *Agent {
	t.Helper()
	var a *Agent
	if err := ns.Do(func() (err error) {
		a, err = New(WithPinDir(pin), WithStateFile(stateFile), WithLogger(slog.New(slog.DiscardHandler)))
		return err
	}); err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	runSampler(t, ns, a)
	return a
}

func runSampler(t testing.TB, ns *nstest.NS, a *Agent) { background(t, ns, a.Run) }

// runLiveness runs the agent's liveness loop inside its namespace until the test ends.
func runLiveness(t testing.TB, ns *nstest.NS, a *Agent) { background(t, ns, a.RunLiveness) }

// background runs loop on a thread inside ns until the test ends.
func background(t testing.TB, ns *nstest.NS, loop func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ns.Do(func() error { loop(ctx); return nil })
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// run calls f with the namespace of the agent's host entered, as the daemon would run.
func run[T any](t testing.TB, ns *nstest.NS, f func() (T, error)) (T, error) {
	var out T
	err := ns.Do(func() (err error) {
		out, err = f()
		return err
	})
	return out, err
}

// testKey authenticates the test tunnels' packets.
var testKey = wire.Key{0: 0x70, 1: 0x6c, 2: 0x61, 3: 0x69, 4: 0x74, 15: 1}

func tunnelConfig(local, remote string, n int, weights ...float64) *pb.TunnelConfig {
	c := &pb.TunnelConfig{Id: 7, Device: "plait0", Address: "10.99.0." + local + "/24", Weights: weights,
		Auth: &pb.Auth{Keys: [][]byte{testKey[:]}}}
	for i := 1; i <= n; i++ {
		c.Paths = append(c.Paths, &pb.PathConfig{
			Name: fmt.Sprintf("p%d", i), Interface: fmt.Sprintf("eth%d", i), RemoteAddr: fmt.Sprintf("10.0.%d.%s", i, remote),
		})
	}
	return c
}

// configureBoth configures tunnel 7 over n paths at both ends, each the other's peer
// by its paths: tunnelConfig's, with edit (if any) applied to end 1's (h1) and end 2's
// (h2) configuration. It returns both ends' answers.
func (p *pair) configureBoth(t testing.TB, n int, edit func(c *pb.TunnelConfig, end int)) (tuns [2]*pb.Tunnel) {
	t.Helper()
	for i, h := range []struct {
		ns *nstest.NS
		a  *Agent
	}{{p.h1, p.a1}, {p.h2, p.a2}} {
		end := i + 1
		c := tunnelConfig(fmt.Sprint(end), fmt.Sprint(3-end), n)
		if edit != nil {
			edit(c, end)
		}
		tun, err := run(t, h.ns, func() (*pb.Tunnel, error) { return h.a.Configure(context.Background(), c) })
		if err != nil {
			t.Fatalf("configure h%d: %v", end, err)
		}
		tuns[i] = tun
	}
	return tuns
}

// peerAddress is the tunnel address of end's peer.
func peerAddress(end int) string { return fmt.Sprintf("10.99.0.%d", 3-end) }

func (p *pair) configure(t testing.TB, weights ...float64) {
	t.Helper()
	ctx := context.Background()
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tunnelConfig("1", "2", 3, weights...)) }); err != nil {
		t.Fatalf("configure h1: %v", err)
	}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, tunnelConfig("2", "1", 3)) }); err != nil {
		t.Fatalf("configure h2: %v", err)
	}
}

func sample(t *testing.T, ns *nstest.NS, a *Agent) {
	t.Helper()
	ns.Do(func() error { a.stats.sample(); return nil })
}

func stats(t *testing.T, ns *nstest.NS, a *Agent, window time.Duration) *pb.TunnelStats {
	t.Helper()
	sample(t, ns, a)
	st, err := run(t, ns, func() (*pb.Stats, error) {
		return a.GetStats(context.Background(), &pb.StatsRequest{IntervalMs: uint32(window.Milliseconds())})
	})
	if err != nil {
		t.Fatal(err)
	}
	return st.Tunnels[0]
}
