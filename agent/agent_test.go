package agent

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/wire"
)

func TestTunnelCarriesPingAndKeepsOtherTrafficApart(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 1, 1)
	p.h1.Run("ping", "-c", "30", "-i", "0.01", "-W", "2", "10.99.0.2")
	// Non-tunnel traffic on a path interface passes both programs untouched.
	p.h1.Run("ping", "-c", "3", "-W", "2", "10.0.2.2")

	st := stats(t, p.h1, p.a1, 5*time.Second)
	for _, ps := range st.Paths {
		if ps.TxPackets < 9 || ps.RxPackets < 9 {
			t.Errorf("path %s: sent %d, received %d echo packets; want about 10 each way", ps.Name, ps.TxPackets, ps.RxPackets)
		}
		if ps.Lost != 0 {
			t.Errorf("path %s lost %d", ps.Name, ps.Lost)
		}
	}
}

func TestIperfSharesFollowWeightsAndSurvivePathDown(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 2, 3)
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)

	// A non-tunnel ping runs throughout, on the path that will go down.
	ping, pingOut := p.h1.Start("ping", "-i", "0.1", "-W", "1", "10.0.2.2")
	iperf, iperfOut := p.h1.Start("iperf3", "-c", "10.99.0.2", "-t", "10", "-i", "1", "-C", "cubic")

	time.Sleep(5 * time.Second)
	st := stats(t, p.h1, p.a1, 4*time.Second)
	var total float64
	for _, ps := range st.Paths {
		total += ps.TxBps
	}
	for i, ps := range st.Paths {
		share, want := ps.TxBps/total, float64(i+1)/6
		if share < want-0.02 || share > want+0.02 {
			t.Errorf("path %s carried %.3f of the bytes, weights say %.3f ±0.02", ps.Name, share, want)
		}
		if math.Abs(ps.Weight-want) > 1e-9 {
			t.Errorf("path %s reports weight %v, configured share %v", ps.Name, ps.Weight, want)
		}
	}
	if total < 50e6 {
		t.Errorf("striped flow carried only %.1f Mbit/s", total/1e6)
	}
	t.Logf("weights 1:2:3 over %.1fs: %.1f Mbit/s, shares %.3f %.3f %.3f", st.IntervalS, total/1e6,
		st.Paths[0].TxBps/total, st.Paths[1].TxBps/total, st.Paths[2].TxBps/total)

	// Take path p2 down mid-flow: it stops carrying tunnel traffic, the flow goes on.
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) {
		return p.a1.SetPathState(context.Background(), &pb.SetPathStateRequest{Path: "p2", Up: false})
	}); err != nil {
		t.Fatal(err)
	}
	before := stats(t, p.h1, p.a1, time.Second).Paths[1].TxPackets
	time.Sleep(3 * time.Second)
	after := stats(t, p.h1, p.a1, 2*time.Second)
	if after.Paths[1].TxPackets != before {
		t.Errorf("path p2 is down but carried %d more packets", after.Paths[1].TxPackets-before)
	}
	if w := []float64{after.Paths[0].Weight, after.Paths[1].Weight, after.Paths[2].Weight}; math.Abs(w[0]-0.25) > 1e-9 || w[1] != 0 || math.Abs(w[2]-0.75) > 1e-9 {
		t.Errorf("with p2 down the paths report weights %v, want [0.25 0 0.75]", w)
	}
	if after.Paths[0].TxBps+after.Paths[2].TxBps < 30e6 {
		t.Errorf("after p2 went down the flow carried only %.1f Mbit/s", (after.Paths[0].TxBps+after.Paths[2].TxBps)/1e6)
	}

	if err := iperf.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, iperfOut())
	}
	out := iperfOut()
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 did not finish:\n%s", out)
	}
	ping.Process.Signal(os.Interrupt)
	ping.Wait()
	if po := pingOut(); !strings.Contains(po, " 0% packet loss") {
		t.Errorf("ping to a non-tunnel address lost packets while striping:\n%s", po)
	}
}

func TestBadConfigurationIsRefusedWhole(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 1, 1)
	ctx := context.Background()
	bad := map[string]func(c *pb.TunnelConfig){
		"unknown interface": func(c *pb.TunnelConfig) { c.Paths[1].Interface = "wlan9" },
		"negative weight":   func(c *pb.TunnelConfig) { c.Weights = []float64{1, -1, 1} },
		"wrong count":       func(c *pb.TunnelConfig) { c.Weights = []float64{1, 1} },
		"all zero":          func(c *pb.TunnelConfig) { c.Weights = []float64{0, 0, 0} },
		"nine paths": func(c *pb.TunnelConfig) {
			for len(c.Paths) < 9 {
				c.Paths = append(c.Paths, c.Paths[0])
			}
		},
		"duplicate addresses": func(c *pb.TunnelConfig) {
			c.Paths[2] = &pb.PathConfig{Name: "x", Interface: "eth1", RemoteAddr: "10.0.1.2"}
		},
		"bad address":           func(c *pb.TunnelConfig) { c.Address = "10.99.0.1" },
		"bad encap":             func(c *pb.TunnelConfig) { c.Encap = 7 },
		"repair without a peer": func(c *pb.TunnelConfig) { c.Repair = true },
	}
	for name, mutate := range bad {
		c := tunnelConfig("1", "2", 3)
		mutate(c)
		_, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, c) })
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	weightErrs := map[string][]float64{"NaN": {1, nanf(), 1}, "negative": {-1, 1, 1}, "count": {1}, "zero": {0, 0, 0}}
	for name, w := range weightErrs {
		_, err := run(t, p.h1, func() (*pb.Tunnel, error) {
			return p.a1.SetWeights(ctx, &pb.SetWeightsRequest{Weights: w})
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("weights %s: got %v, want InvalidArgument", name, err)
		}
	}
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) {
		return p.a1.SetPathState(ctx, &pb.SetPathStateRequest{Path: "nope"})
	}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown path: got %v, want NotFound", err)
	}
	// Nothing was half-applied: the tunnel is as configured and still carries traffic.
	l, _ := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(ctx, &pb.Empty{}) })
	if got := l.Tunnels[0]; len(got.Paths) != 3 || got.Paths[1].Config.Interface != "eth2" || got.Config.Weights[1] != 1 {
		t.Fatalf("tunnel changed by refused requests: %v", got)
	}
	p.h1.Run("ping", "-c", "3", "-i", "0.1", "-W", "2", "10.99.0.2")
}

func nanf() float64 { var z float64; return z / z }

func TestRestartKeepsStateAndTraffic(t *testing.T) {
	p := newPair(t, 2)
	ctx := context.Background()
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, _ int) { c.Weights = []float64{1, 3} })
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	iperf, out := p.h1.Start("iperf3", "-c", "10.99.0.2", "-t", "4", "-i", "1")
	time.Sleep(time.Second)
	before := stats(t, p.h1, p.a1, time.Second)

	// The agent goes away; the pinned datapath keeps striping without it.
	stateFile := p.a1.opts.stateFile
	pin := p.a1.opts.pinDir
	p.a1.Close()
	time.Sleep(time.Second)
	a := restart(t, p.h1, pin, stateFile)
	time.Sleep(1100 * time.Millisecond)
	after := stats(t, p.h1, a, time.Second)
	for i := range after.Paths {
		if after.Paths[i].TxPackets <= before.Paths[i].TxPackets {
			t.Errorf("path %d: counters went from %d to %d across the restart", i, before.Paths[i].TxPackets, after.Paths[i].TxPackets)
		}
	}
	l, _ := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return a.ListTunnels(ctx, &pb.Empty{}) })
	if len(l.Tunnels) != 1 || l.Tunnels[0].Config.Weights[1] != 3 {
		t.Fatalf("restarted agent lost the configuration: %v", l)
	}
	if err := iperf.Wait(); err != nil {
		t.Fatalf("iperf3 across the restart: %v\n%s", err, out())
	}
}

// A receive-only tunnel measures and untags what arrives on an existing interface and
// sends nothing: here h1 stripes into it over one path, and h2 answers unencapsulated.
func TestReceiveOnlyTunnel(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	// h1 stands in for a split switch, which tags nothing.
	tx := tunnelConfig("1", "2", 1)
	tx.Auth = &pb.Auth{Disabled: true}
	if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, tx) }); err != nil {
		t.Fatal(err)
	}
	rx := &pb.TunnelConfig{Id: 7, Device: "eth1", Address: "10.99.0.2/24", ReceiveOnly: true}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, rx) }); err != nil {
		t.Fatal(err)
	}
	bad := &pb.TunnelConfig{Id: 8, Device: "eth1", Address: "10.98.0.2/24", ReceiveOnly: true,
		Paths: []*pb.PathConfig{{Interface: "eth1", RemoteAddr: "10.0.1.1"}}}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, bad) }); status.Code(err) != codes.InvalidArgument {
		t.Errorf("receive-only tunnel with paths: %v, want InvalidArgument", err)
	}
	p.h1.Run("ping", "-c", "20", "-i", "0.02", "-W", "2", "10.99.0.2")
	st := stats(t, p.h2, p.a2, 5*time.Second)
	if len(st.Paths) != 1 || st.Paths[0].RxPackets < 20 || st.Paths[0].TxPackets != 0 {
		t.Fatalf("receive-only tunnel stats: %v", st.Paths)
	}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) {
		return p.a2.SetWeights(ctx, &pb.SetWeightsRequest{TunnelId: 7, Weights: []float64{1}})
	}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("weights on a receive-only tunnel: %v, want FailedPrecondition", err)
	}
}

// With each other's tunnel address, TCP between the two ends goes compact: the tunnel
// MTU is 20 bytes larger and every packet costs 24 bytes instead of 44 (and the tag's 8
// on top); other traffic is encapsulated whole.
func TestCompactTunnel(t *testing.T) {
	for _, encap := range []pb.Encap{pb.Encap_ENCAP_UDP, pb.Encap_ENCAP_IP} {
		t.Run(encap.String(), func(t *testing.T) { testCompactTunnel(t, encap) })
	}
}

func testCompactTunnel(t *testing.T, encap pb.Encap) {
	p := newPair(t, 2)
	wantMTU := map[pb.Encap]uint32{pb.Encap_ENCAP_UDP: 1500 - wire.CompactLen, pb.Encap_ENCAP_IP: 1500 - wire.IPCompactLen}[encap] - wire.TagLen
	for _, tun := range p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) { c.PeerAddress, c.Encap = peerAddress(end), encap }) {
		if tun.Mtu != wantMTU {
			t.Fatalf("compact tunnel MTU %d, want %d", tun.Mtu, wantMTU)
		}
	}
	p.h1.Run("ping", "-c", "5", "-i", "0.05", "-W", "2", "10.99.0.2")
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	out := p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "3", "-C", "cubic")
	if !strings.Contains(out, "receiver") {
		t.Fatalf("iperf3 over a compact tunnel:\n%s", out)
	}
	st := stats(t, p.h1, p.a1, 5*time.Second)
	var pkts, bytes uint64
	for _, ps := range st.Paths {
		pkts += ps.TxPackets
		bytes += ps.TxBytes
	}
	// Full-size segments fill the path: 1514 bytes on the wire.
	if mean := float64(bytes) / float64(pkts); mean < 1450 || mean > 1515 {
		t.Errorf("mean frame %.0f bytes over %d packets; compact full-size frames are 1514", mean, pkts)
	}
	_, rcv, _ := p.a2.dp.Verdicts([]uint32{0})
	if rcv["drop_bad_inner"] != 0 || rcv["decap"] < pkts/2 {
		t.Errorf("receiver verdicts %v", rcv)
	}
}

// Pins and state a vanished namespace left behind (its inode now this namespace's) are
// not taken over: the agent starts afresh instead of restoring someone else's tunnels.
func TestStaleStateFromAnotherNamespaceIsDropped(t *testing.T) {
	ns := nstest.New(t, "stale")
	nstest.Veth(t, ns, "eth1", nstest.New(t, "other"), "eth1")
	pin := filepath.Join("/sys/fs/bpf/plait", ns.Name)
	t.Cleanup(func() { os.RemoveAll(pin) })
	state := filepath.Join(t.TempDir(), "state.json")
	if err := os.MkdirAll(filepath.Join(pin, "leftover"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := `{"netns_cookie": 1, "tunnels": [{"config": {"id": 9, "device": "plait0", "address": "10.99.0.1/24", "paths": [{"interface": "eth1", "remoteAddr": "10.0.1.2"}]}}]}`
	if err := os.WriteFile(state, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var a *Agent
	if err := ns.Do(func() (err error) {
		a, err = New(WithPinDir(pin), WithStateFile(state), WithLogger(slog.New(slog.DiscardHandler)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if l, _ := a.ListTunnels(context.Background(), &pb.Empty{}); len(l.Tunnels) != 0 {
		t.Fatalf("took over another namespace's tunnels: %v", l.Tunnels)
	}
	if _, err := os.Stat(filepath.Join(pin, "leftover")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale pins kept: %v", err)
	}
}

// A tunnel's ACK path carries its ACK-sized packets whatever the weights say; larger
// packets keep to the weights; an unknown path is refused and an empty name clears it.
func TestAckPathCarriesSmallPackets(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t)
	ctx := context.Background()
	setAckPath := func(path string) error {
		_, err := run(t, p.h2, func() (*pb.Tunnel, error) {
			return p.a2.SetAckPath(ctx, &pb.SetAckPathRequest{TunnelId: 7, Path: path})
		})
		return err
	}
	if err := setAckPath("p9"); status.Code(err) != codes.NotFound {
		t.Errorf("ACK path p9: %v, want NotFound", err)
	}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) {
		return p.a2.SetWeights(ctx, &pb.SetWeightsRequest{TunnelId: 7, Weights: []float64{0, 0, 1}})
	}); err != nil {
		t.Fatal(err)
	}
	check := func(size string, want int) {
		t.Helper()
		before := stats(t, p.h2, p.a2, 10*time.Second).Paths
		p.h1.Run("ping", "-c", "20", "-i", "0.01", "-W", "2", "-s", size, "10.99.0.2")
		after := stats(t, p.h2, p.a2, 10*time.Second).Paths
		for i := range after {
			d := after[i].TxPackets - before[i].TxPackets
			if i == want && d < 20 || i != want && d > 2 {
				t.Errorf("%s-byte pings: h2 answered %d times on path %d, want all 20 on path %d", size, d, i, want)
			}
		}
	}
	if err := setAckPath("p1"); err != nil {
		t.Fatal(err)
	}
	check("16", 0) // 44-byte IPv4 replies: ACK-sized
	check("100", 2)
	if err := setAckPath(""); err != nil {
		t.Fatal(err)
	}
	check("16", 2)
	c := tunnelConfig("2", "1", 3)
	c.AckPath = "wifi"
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, c) }); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a tunnel with an ACK path it does not have: %v, want InvalidArgument", err)
	}
}

// Congestion signals asked for over the API: requests while one is pending add nothing,
// and a bulk TCP flow that takes one carries on. The drop happens in the tunnel device's
// egress hook, so TCP learns of it at once as a local transmit failure: it enters CWR and
// sends the segment again as new data, counted as no retransmission (0 in repeated runs
// with every packet on one path; striped, the flow's retransmissions come from
// reordering and say nothing about the signal).
func TestCongestionSignal(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 1, 1)
	ctx := context.Background()
	signal := func(id uint32) error {
		_, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Signal(ctx, &pb.TunnelRef{Id: id}) })
		return err
	}
	given := func() (uint32, uint64) {
		t.Helper()
		c, err := p.a1.dp.ReadSender(0)
		if err != nil {
			t.Fatal(err)
		}
		snd, _, _ := p.a1.dp.Verdicts([]uint32{0})
		return c.Signaled, snd["drop_signal"]
	}
	if err := signal(9); status.Code(err) != codes.NotFound {
		t.Errorf("signal to an unknown tunnel: %v, want NotFound", err)
	}
	for range 3 {
		if err := signal(7); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := given(); n != 0 {
		t.Fatalf("%d signals given without TCP traffic", n)
	}
	p.h2.Start("iperf3", "-s", "-1")
	time.Sleep(200 * time.Millisecond)
	client, output := p.h1.Start("iperf3", "-c", "10.99.0.2", "-t", "3", "-J", "-C", "cubic")
	time.Sleep(time.Second)
	if n, drops := given(); n != 1 || drops != 1 {
		t.Fatalf("three requests while pending: %d signals given, %d dropped; want 1", n, drops)
	}
	if err := signal(7); err != nil {
		t.Fatal(err)
	}
	client.Wait()
	goodput, _ := iperfResult(t, output())
	if n, drops := given(); n != 2 || drops != 2 {
		t.Fatalf("a request during the transfer: %d signals given, %d dropped; want 2", n, drops)
	}
	if goodput <= 0 {
		t.Errorf("the flow delivered %v bit/s after the signal; want it to carry on", goodput)
	}
}

// An idle path's probes carry a telemetry block when the tunnel asks switches for one, so
// that the receiver's delay and queue means cover the same packets (the controller
// subtracts one from the other for the path's base delay); and none when it does not.
func TestProbesCarryTelemetry(t *testing.T) {
	p := newPair(t, 1)
	ctx := context.Background()
	configure := func(telemetry bool) {
		c := tunnelConfig("1", "2", 1)
		c.Telemetry = telemetry
		if _, err := run(t, p.h1, func() (*pb.Tunnel, error) { return p.a1.Configure(ctx, c) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run(t, p.h2, func() (*pb.Tunnel, error) { return p.a2.Configure(ctx, tunnelConfig("2", "1", 1)) }); err != nil {
		t.Fatal(err)
	}
	for _, telemetry := range []bool{true, false} {
		configure(telemetry)
		time.Sleep(1500 * time.Millisecond)
		ps := stats(t, p.h2, p.a2, time.Second).Paths[0]
		if ps.Probes == 0 || ps.RxPackets != 0 {
			t.Fatalf("telemetry %v: want probes only on the idle path, got %d probes, %d data packets", telemetry, ps.Probes, ps.RxPackets)
		}
		if got := !math.IsNaN(ps.QueueUs); got != telemetry {
			t.Errorf("telemetry %v: probes carried a telemetry block: %v (queue %v µs)", telemetry, got, ps.QueueUs)
		}
	}
}

// A path whose next hop has not answered ARP carries no probes. The kernel would queue
// them until the peer answers and the receiver would read the wait, a second or more, as
// the path's delay: a lab's first ARP can go before its switches forward, and the
// controller once chose its paths by such a reading.
func TestNoProbesBeforeTheNextHopAnswers(t *testing.T) {
	p := newPair(t, 1)
	// h2 answers no ARP, nor asks (h1 would learn its address from the asking).
	p.h2.Run("ip", "link", "set", "eth1", "arp", "off")
	p.configureBoth(t, 1, nil)
	tuns, err := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(context.Background(), &pb.Empty{}) })
	if err != nil {
		t.Fatal(err)
	}
	if ps := tuns.Tunnels[0].Paths[0]; ps.NextHopMac != "" {
		t.Fatalf("h1 resolved %s with ARP off at h2: nothing to test", ps.NextHopMac)
	}
	time.Sleep(1500 * time.Millisecond) // several samples, each of which would probe
	p.h2.Run("ip", "link", "set", "eth1", "arp", "on")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tuns, err := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(context.Background(), &pb.Empty{}) })
		if err == nil && tuns.Tunnels[0].Paths[0].NextHopMac != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("h1 did not resolve its next hop within 5 s of h2 answering ARP")
		}
	}
	time.Sleep(time.Second) // probes on the resolved path
	ps := stats(t, p.h2, p.a2, 5*time.Second).Paths[0]
	if ps.Probes == 0 {
		t.Fatal("no probes arrived once the next hop answered")
	}
	// Over veth a probe takes microseconds; one queued for ARP, most of a second.
	if ps.OwdMeanUs > 20e3 {
		t.Errorf("mean delay of %d probes %.1f ms: probes waited for ARP", ps.Probes, ps.OwdMeanUs/1e3)
	}
}

// Probe trains keep coming on the paths of a tunnel that carries only a trickle: the
// agents' own reports, a few a second, or a ping. Counted as a flow's use of the paths,
// such a trickle held every train off after a path's first four, and the controller's
// capacities of an idle tunnel rested on those.
func TestTrainsGoUnderATrickle(t *testing.T) {
	p := newPair(t, 2)
	p.configureBoth(t, 2, nil)
	p.h1.Start("ping", "-i", "0.2", "-s", "200", "10.99.0.2")
	time.Sleep(2 * time.Second) // the first trains, a quarter second apart
	before := stats(t, p.h2, p.a2, time.Second)
	time.Sleep(3 * time.Second)
	after := stats(t, p.h2, p.a2, 3*time.Second)
	for i, ps := range after.Paths {
		if ps.RxPackets == 0 {
			t.Fatalf("path %s carried none of the ping: no trickle to test under", ps.Name)
		}
		// A train of five gives four pairs; one a second.
		if ps.DispersionSamples < 2*4 {
			t.Errorf("path %s: %d packet pairs in 3 s under a trickle of %d packets (%d pairs in the second before), want two trains' at least",
				ps.Name, ps.DispersionSamples, ps.RxPackets, before.Paths[i].DispersionSamples)
		}
	}
}

// A signal trigger gives one signal when a flow that starts after an idle spell sends
// faster than the trigger's rate for long enough to build a standing queue, and none to
// a flow below it; bad triggers are refused and change nothing.
func TestSignalTrigger(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t, 1, 1, 1)
	ctx := context.Background()
	set := func(g *pb.SignalTrigger) error {
		_, err := run(t, p.h1, func() (*pb.Tunnel, error) {
			return p.a1.SetSignalTrigger(ctx, &pb.SetSignalTriggerRequest{TunnelId: 7, Trigger: g})
		})
		return err
	}
	good := &pb.SignalTrigger{RateBps: 50e6, QueueUs: 20e3, StandingUs: 50e3, WindowMs: 3000}
	for name, g := range map[string]*pb.SignalTrigger{
		"NaN rate":      {RateBps: nanf(), QueueUs: 20e3, WindowMs: 3000},
		"tiny rate":     {RateBps: 100, QueueUs: 20e3, WindowMs: 3000},
		"no queue":      {RateBps: 50e6, WindowMs: 3000},
		"no window":     {RateBps: 50e6, QueueUs: 20e3},
		"long standing": {RateBps: 50e6, QueueUs: 20e3, StandingUs: 5e6, WindowMs: 3000},
	} {
		if err := set(g); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "signal trigger") {
			t.Errorf("%s: got %v, want InvalidArgument naming the signal trigger", name, err)
		}
	}
	l, _ := run(t, p.h1, func() (*pb.ListTunnelsResponse, error) { return p.a1.ListTunnels(ctx, &pb.Empty{}) })
	if g := l.Tunnels[0].Config.SignalTrigger; g != nil {
		t.Fatalf("refused triggers left %v", g)
	}
	if err := set(good); err != nil {
		t.Fatal(err)
	}
	given := func() uint32 {
		st := stats(t, p.h1, p.a1, time.Second)
		if st.Triggered != st.Signals {
			t.Errorf("%d signals given, %d of them triggered; want all triggered", st.Signals, st.Triggered)
		}
		return st.Triggered
	}
	p.h2.Start("iperf3", "-s")
	time.Sleep(time.Second) // an idle spell arms the trigger
	p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "1", "-b", "10M")
	if n := given(); n != 0 {
		t.Fatalf("%d signals to a flow at a fifth of the trigger's rate; want none", n)
	}
	time.Sleep(time.Second)
	p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "2")
	if n := given(); n != 1 {
		t.Fatalf("%d signals to a flow well above the trigger's rate; want one, once it had a standing queue", n)
	}
	if err := set(&pb.SignalTrigger{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	p.h1.Run("iperf3", "-c", "10.99.0.2", "-t", "1")
	if n := given(); n != 1 {
		t.Fatalf("%d signals after the trigger was cleared; want still 1", n)
	}
}
