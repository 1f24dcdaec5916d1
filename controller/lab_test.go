package controller_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/model"
)

var bin string

func TestMain(m *testing.M) { labnet.Main(m, &bin) }

// a2 is the three-path lab of the controller issue: 5, 2, 7 Mbit/s at 100, 10, 50 ms.
var a2 = []labnet.Path{{Name: "a", Rate: "5mbit", Delay: "100ms", Queue: 50}, {Name: "b", Rate: "2mbit", Delay: "10ms", Queue: 50}, {Name: "c", Rate: "7mbit", Delay: "50ms", Queue: 50}}

func forward(t testing.TB, c pb.ControllerClient) *pb.Direction {
	t.Helper()
	p, err := c.Paths(context.Background(), &pb.PathsRequest{TunnelId: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Directions {
		if d.From == "h1" {
			return d
		}
	}
	t.Fatal("no direction h1 -> h2")
	return nil
}

func within(shares []float64, want []float64, rel float64) bool {
	var sum float64
	for _, w := range want {
		sum += w
	}
	for i, w := range want {
		if math.Abs(shares[i]-w/sum) > rel*w/sum {
			return false
		}
	}
	return true
}

func weights(d *pb.Direction) []float64 {
	var w []float64
	for _, p := range d.Paths {
		w = append(w, p.Weight)
	}
	return w
}

func TestControllerConvergesAndReacts(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2, labnet.Options{Weights: []float64{1, 1, 1}, Telemetry: true})
	stop := lab.StartController("auto", nil)
	defer stop()
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ag, aconn, err := agent.Dial(lab.Sock1, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer aconn.Close()

	lab.H2.Start("iperf3", "-s", "-1")
	time.Sleep(300 * time.Millisecond)
	iperf, iperfOut := lab.H1.Start("iperf3", "-c", "10.99.0.2", "-t", "22", "-C", "cubic", "-i", "2")
	start := time.Now()

	// Starting from equal weights, the weights reach the capacity ratio 5:2:7 ±10 %.
	var converged, flowing time.Duration
	for time.Since(start) < 8*time.Second {
		d := forward(t, ctl)
		if flowing == 0 && d.GoodputBps > 0 {
			flowing = time.Since(start)
		}
		if within(weights(d), []float64{5, 2, 7}, 0.10) {
			converged = time.Since(start)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := forward(t, ctl)
	t.Logf("flowing after %v converged after %v: weights %.3f, %s", flowing, converged, weights(d), d.Reason)
	// Timed from the first delivery the controller saw, not from iperf3's start: a busy
	// machine delays the flow's handshake (a lost SYN waits 1 s), not the controller.
	// The slow-start feed may hold the fastest path above its share for up to 3 s by
	// design (docs/controller.md#slow-start-feed) when the flow ramps slowly, so the
	// limit is that plus a second to settle.
	if converged == 0 || converged-flowing > 4*time.Second {
		t.Errorf("weights %.3f did not reach 5:2:7 ±10%% within 4 s of the first delivery (flowing after %v, converged after %v)", weights(d), flowing, converged)
	}

	// Raising path b's delay by 50 ms is answered within 1 s: the controller's estimate of
	// b's delay, which the model's choice of paths and weights reads in the same interval,
	// rises by most of it.
	time.Sleep(5 * time.Second)
	before := forward(t, ctl).Paths[1].OwdUs
	lab.SetLink(2, true, "--delay", "60ms")
	changed := time.Now()
	var answered time.Duration
	for time.Since(changed) < 3*time.Second {
		if p := forward(t, ctl).Paths[1].OwdUs; p-before >= 40e3 {
			answered = time.Since(changed)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d = forward(t, ctl)
	t.Logf("delay +50 ms on b answered after %v (estimate %.1f -> %.1f ms; %s)", answered, before/1e3, d.Paths[1].OwdUs/1e3, d.Reason)
	if answered == 0 || answered > time.Second {
		t.Errorf("the +50 ms on path b was not answered within 1 s (%v)", answered)
	}

	// A path taken down reaches weight 0 in the datapath within 300 ms, and the flow
	// goes on.
	time.Sleep(3 * time.Second)
	down := time.Now().Add(linkLead)
	lab.SetLinkAt(3, true, down, "--down")
	var removed time.Duration
	for time.Since(down) < 2*time.Second {
		l, err := ag.ListTunnels(context.Background(), &pb.Empty{})
		if err == nil && !l.Tunnels[0].Paths[2].Up {
			removed = time.Since(down)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("path c down: out of the datapath after %v", removed)
	if removed == 0 || removed > 300*time.Millisecond {
		t.Errorf("path c went down but kept its weight for %v (limit 300 ms)", removed)
	}
	if err := iperf.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, iperfOut())
	}
	out := iperfOut()
	if !strings.Contains(out, "receiver") {
		t.Fatalf("the flow did not finish:\n%s", out)
	}
	t.Logf("iperf3:\n%s", out)
}

// Links that send once per 1 ms TTI deliver an idle path's probe trains in a burst or
// two; the controller still reads each path's capacity from them. Read pair by pair,
// only the pairs that straddle a burst were counted, and every path read one packet a
// tick (S1-4's 36 Mbit/s path at 9-11 Mbit/s), which starved the fast paths. The
// reading is judged over several seconds of trains: on a loaded machine a train now and
// then reads a path at about half its rate (path i at 19.9 Mbit/s, 1 run in 10: a
// process that sends or forwards the train stalled inside it), which later trains age
// out; a misreading every train repeats never comes within the band.
func TestIdleCapacityThroughTTIBursts(t *testing.T) {
	paths := []labnet.Path{{Name: "i", Rate: "36mbit", Delay: "20ms"}, {Name: "ii", Rate: "18mbit", Delay: "35ms"}, {Name: "iv", Rate: "7mbit", Delay: "45ms"}}
	idleCapacities(t, paths, []float64{36e6, 18e6, 7e6}, labnet.Options{Tick: time.Millisecond}, 0.35)
}

// Links that keep order under jitter (Wi-Fi's and LTE's retransmissions hold what
// follows) spread a probe train by up to their jitter's range, a whole short train's
// span at a fast path: five-probe trains read a 15 Mbit/s path with ±3.9 ms at
// 0.8-44 Mbit/s. Trains span many times the path's idle delay spread, and the
// controller reads each path within its band.
func TestIdleCapacityThroughJitter(t *testing.T) {
	paths := []labnet.Path{{Name: "i", Rate: "36mbit", Delay: "20ms", Jitter: "4ms"}, {Name: "ii", Rate: "15mbit", Delay: "35ms", Jitter: "4ms"}, {Name: "iii", Rate: "5mbit", Delay: "45ms", Jitter: "2ms"}}
	idleCapacities(t, paths, []float64{36e6, 15e6, 5e6}, labnet.Options{}, 0.25)
}

// idleCapacities runs an idle tunnel over paths and asks that, after a few seconds of
// probe trains (and the spread of each path's delay), the controller reads every path
// within tol of want (bit/s) within 8 s more.
func idleCapacities(t *testing.T, paths []labnet.Path, want []float64, opts labnet.Options, tol float64) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, paths, opts)
	stop := lab.StartController("auto", nil)
	defer stop()
	lab.WaitEstimates(15 * time.Second)
	time.Sleep(4 * time.Second)
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var off []string
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		off = nil
		for i, p := range forward(t, ctl).Paths {
			if math.Abs(p.CapacityBps-want[i]) > tol*want[i] {
				off = append(off, fmt.Sprintf("path %s at %.1f Mbit/s (link %.0f)", paths[i].Name, p.CapacityBps/1e6, want[i]/1e6))
			}
		}
		if len(off) == 0 || time.Now().After(deadline) {
			break
		}
		t.Logf("not yet within ±%.0f %% of the links: %s", 100*tol, strings.Join(off, ", "))
	}
	if len(off) > 0 {
		t.Errorf("capacities from probe trains still outside ±%.0f %% of the links after 8 s more: %s", 100*tol, strings.Join(off, ", "))
	}
}

// A switch or agent that restarts is re-programmed without anyone's help; when the
// controller stops, the datapath keeps its last split and the flow goes on.
func TestControllerSurvivesRestarts(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2, labnet.Options{Telemetry: true})
	stop := lab.StartController("auto", nil)
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lab.H2.Start("iperf3", "-s", "-1")
	time.Sleep(300 * time.Millisecond)
	iperf, out := lab.H1.Start("iperf3", "-c", "10.99.0.2", "-t", "16", "-C", "cubic", "-i", "2")
	time.Sleep(3 * time.Second)

	// Switch s3 restarts with empty tables: the controller programs it again.
	lab.Restart("s3")
	var reprogrammed bool
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !reprogrammed; time.Sleep(50 * time.Millisecond) {
		st, err := ctl.Status(context.Background(), &pb.StatusRequest{})
		if err == nil {
			for _, s := range st.Switches {
				reprogrammed = reprogrammed || (s.Name == "s3" && s.Programmed >= 2 && s.Primary)
			}
		}
	}
	if !reprogrammed {
		t.Fatal("switch s3 restarted and was not programmed again within 5 s")
	}
	// Agent h1 restarts: it takes the pinned datapath over and the controller steers it again.
	lab.Restart("h1")
	time.Sleep(2 * time.Second)
	st, _ := ctl.Status(context.Background(), &pb.StatusRequest{})
	for _, a := range st.Agents {
		if !a.Connected {
			t.Errorf("agent %s not reconnected after its restart: %s", a.Name, a.LastError)
		}
	}
	// Its estimates settle again within seconds: a path may read short of its capacity for
	// a moment after the restarts (packet pairs stand in until a busy stretch; a set that
	// changed waits setDwell before it changes back).
	d := forward(t, ctl)
	for deadline := time.Now().Add(6 * time.Second); !within(weights(d), []float64{5, 2, 7}, 0.15) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		d = forward(t, ctl)
	}
	if !within(weights(d), []float64{5, 2, 7}, 0.15) {
		t.Errorf("6 s after the restarts the split is still %.3f (%s)", weights(d), d.Reason)
		p, _ := ctl.Paths(context.Background(), &pb.PathsRequest{})
		var b strings.Builder
		printDebug(&b, p)
		t.Log(b.String())
	}
	// The controller stops; the flow finishes on the split it left.
	stop()
	if err := iperf.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out())
	}
	if !strings.Contains(out(), "receiver") {
		t.Fatalf("the flow did not survive:\n%s", out())
	}
	t.Logf("%s", out())
}

// Operator mistakes get errors that say what is wrong, and change nothing.
func TestControllerRefusesBadRequests(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2[:2], labnet.Options{})
	stop := lab.StartController("auto", nil)
	defer stop()
	ctx := context.Background()
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	time.Sleep(time.Second)
	before := forward(t, ctl)
	for name, req := range map[string]*pb.ControllerWeightsRequest{
		"wrong count": {Weights: []float64{1, 2, 3}}, "negative": {Weights: []float64{1, -1}},
		"all zero": {Weights: []float64{0, 0}}, "unknown tunnel": {TunnelId: 9, Weights: []float64{1, 1}},
		"unknown host": {From: "h9", Weights: []float64{1, 1}},
	} {
		if _, err := ctl.SetWeights(ctx, req); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ctl.SetMode(ctx, &pb.ControllerModeRequest{Mode: "fastest"}); err == nil {
		t.Error("unknown mode accepted")
	}
	if after := forward(t, ctl); after.Control != before.Control || after.Mode != before.Mode {
		t.Errorf("refused requests changed the direction: %v -> %v", before, after)
	}
	// Through the CLI, the errors name the problem.
	if out, err := lab.Net.Try(bin, "--controller", lab.CtlSock, "weights", "set", "1", "x"); err == nil || !strings.Contains(err.Error(), `"x" is not a number`) {
		t.Errorf("plait weights set 1 x: %v %s", err, out)
	}
	if _, err := lab.Net.Try(bin, "--controller", lab.CtlSock, "weights", "set", "1", "2", "3"); err == nil || !strings.Contains(err.Error(), "3 weights for 2 paths") {
		t.Errorf("plait weights set with 3 weights for 2 paths: %v", err)
	}
	// An agent that is not there is reported, not fatal.
	n := filepath.Join(t.TempDir(), "net.yaml")
	os.WriteFile(n, []byte("agents: {h1: /nonexistent/h1.sock, h2: /nonexistent/h2.sock}\ntunnels: [{id: 1, hosts: [h1, h2]}]\n"), 0o644)
	cmd, cout := lab.Net.Start(bin, "controller", "--network", n, "--listen", filepath.Join(t.TempDir(), "c.sock"), "--metrics", "")
	time.Sleep(500 * time.Millisecond)
	if cmd.ProcessState != nil {
		t.Fatalf("controller with unreachable agents exited:\n%s", cout())
	}
}

func printDebug(w *strings.Builder, p *pb.PathsResponse) {
	for _, d := range p.Directions {
		fmt.Fprintf(w, "%s->%s %s %s good=%.2f\n", d.From, d.To, d.Mode, d.Reason, d.GoodputBps/1e6)
		for _, v := range d.Paths {
			fmt.Fprintf(w, "  %s up=%v cap=%.2f owd=%.1f q=%.1f loss=%.3f late=%.3f w=%.3f rx=%.2f tx=%.2f\n", v.Name, v.Up, v.CapacityBps/1e6, v.OwdUs/1e3, v.QueueUs/1e3, v.Loss, v.Late, v.Weight, v.RxBps/1e6, v.TxBps/1e6)
		}
	}
}

// The controller tells the agents how much of its window a flow keeps at a loss, as its
// --cc says: the receivers hold their waits for repairs to what the cut would cost, and
// flows that keep it all (BBR) are not held for repairs at all.
func TestAgentsLearnTheFlowsLossResponse(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2[:2], labnet.Options{Resequence: true, Repair: true, CC: "bbr"})
	stop := lab.StartController("auto", nil)
	defer stop()
	for _, sock := range []string{lab.Sock1, lab.Sock2} {
		a, conn, err := agent.Dial(sock, sockrpc.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var kept float64
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			l, err := a.ListTunnels(context.Background(), &pb.Empty{})
			if err != nil {
				t.Fatal(err)
			}
			if kept = l.Tunnels[0].Config.WindowKept; kept == model.BBR.Beta() {
				break
			}
		}
		if kept != model.BBR.Beta() {
			t.Errorf("agent %s: window kept %v 10 s after a controller told bbr started, want %v", sock, kept, model.BBR.Beta())
		}
	}
}
