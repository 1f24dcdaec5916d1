package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/sockrpc"
)

// deployed is a two-path lab deployed as across machines: the controller in a namespace
// of its own reaching agents and switches over a management network, TCP with mutual
// TLS (labnet's Deploy).
func deployed(t *testing.T) (*labnet.Lab, pb.ControllerClient, func()) {
	t.Helper()
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.New(t, bin, a2[:2], labnet.Options{Deploy: true, Telemetry: true})
	stop := lab.StartController("auto", nil)
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	waitStatus(t, ctl, 10*time.Second, "agents connected", func(st *pb.StatusResponse) bool {
		for _, a := range st.Agents {
			if !a.Connected {
				return false
			}
		}
		return len(st.Agents) == 2
	})
	waitCarry(t, lab)
	return lab, ctl, stop
}

// waitCarry waits until both agents can send on every path (their next hops resolved),
// so that a test's flow starts on a tunnel that carries it: a SYN or SYN-ACK sent before
// is lost, and TCP retries it only 1 s, then 3 s, later.
func waitCarry(t *testing.T, lab *labnet.Lab) {
	t.Helper()
	for _, sock := range []string{lab.Sock1, lab.Sock2} {
		ag, conn, err := agent.Dial(sock, sockrpc.TLS{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var l *pb.ListTunnelsResponse
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if l, err = ag.ListTunnels(context.Background(), &pb.Empty{}); err == nil && len(l.Tunnels) == 1 && !slices.ContainsFunc(l.Tunnels[0].Paths,
				func(p *pb.PathState) bool { return p.Pending != "" || !p.Up }) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the tunnel cannot carry on every path after 5 s: %v %v", sock, l, err)
			}
		}
	}
}

func waitStatus(t *testing.T, ctl pb.ControllerClient, d time.Duration, what string, ok func(*pb.StatusResponse) bool) *pb.StatusResponse {
	t.Helper()
	var st *pb.StatusResponse
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err = ctl.Status(ctx, &pb.StatusRequest{})
		cancel()
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v %v", what, d, st, err)
		}
	}
}

// maxStall is the longest stall the fault tests accept, the issue's target. Measured on
// the receiver (see flow), faults the mechanisms handle stall a flow 0-0.7 s: a restarted
// controller adopts the split it finds (adopt.go) and a dead path is out within 300 ms,
// after which TCP's retransmission timer (200 ms and up) repairs what it lost. A fault
// they do not handle (a dead path left in the split, a split rewritten from scratch, a
// wiped switch) stalls a flow for several such timeouts in a row.
const maxStall = time.Second

// Deployed as an operator would: the controller reaches both agents and both switches
// only over the management network, with mutual TLS; operators' verbs work over it with
// a certificate and are refused, saying why, without one or with another CA's; the
// tunnel stripes a flow over both paths end to end.
func TestDeployedOverMutualTLS(t *testing.T) {
	lab, ctl, stop := deployed(t)
	defer stop()
	st := waitStatus(t, ctl, 5*time.Second, "switches programmed", func(st *pb.StatusResponse) bool {
		for _, s := range st.Switches {
			if !s.Primary {
				return false
			}
		}
		return true
	})
	for _, a := range st.Agents {
		if !strings.Contains(a.Socket, "172.31.") {
			t.Errorf("agent %s reached at %s, want its management address", a.Name, a.Socket)
		}
	}
	h2 := lab.AgentAddr("h2")
	if out, err := lab.Ctl.Try(bin, append(lab.TLSArgs("operator"), "--agent", h2, "tunnel", "ls")...); err != nil || !strings.Contains(out, "plait0") {
		t.Fatalf("operator with a certificate: %v\n%s", err, out)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := sockrpc.NewCA(other, "another CA", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := sockrpc.Issue(other, other, "intruder", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no certificate":         {"--tls-ca", lab.TLS("operator").CA},
		"plaintext":              nil,
		"another CA's":           {"--tls-ca", lab.TLS("operator").CA, "--tls-cert", filepath.Join(other, "intruder.pem"), "--tls-key", filepath.Join(other, "intruder-key.pem")},
		"switch, no certificate": {"--tls-ca", lab.TLS("operator").CA},
	} {
		cmd := append(args, "--agent", h2, "tunnel", "ls")
		if strings.HasPrefix(name, "switch") {
			cmd = append(args, "link", "show", "--switch", lab.SwitchAddr(1))
		}
		_, err := lab.Ctl.Try(bin, cmd...)
		if err == nil {
			t.Errorf("%s: admitted", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		if !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "TLS") {
			t.Errorf("%s: %v, want an error that says what is missing", name, err)
		}
	}

	ag, aconn, err := agent.Dial(lab.Sock2, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer aconn.Close()
	received := func() []uint64 {
		st, err := ag.GetStats(context.Background(), &pb.StatsRequest{TunnelId: 1})
		if err != nil || len(st.Tunnels) == 0 {
			t.Fatalf("h2 stats: %v", err)
		}
		var n []uint64
		for _, p := range st.Tunnels[0].Paths {
			n = append(n, p.RxPackets)
		}
		return n
	}
	before := received()
	// Stalls are judged over the flow's second half: in its slow start a lost
	// retransmission waits TCP's backed-off timeout (1.1-1.9 s seen), which is TCP's, not
	// the deployment's, as the fault tests judge from the fault on (flow).
	wait := flow(t, lab, 8)
	stall := wait(time.Now().Add(4 * time.Second))
	after := received()
	for i := range after {
		if after[i]-before[i] < 100 {
			t.Errorf("path %d carried %d packets of the flow, want it striped over every path (h2 received %v before, %v after)", i, after[i]-before[i], before, after)
		}
	}
	t.Logf("packets received per path: before %v, after %v", before, after)
	if stall > maxStall {
		t.Errorf("the flow stalled for %v", stall)
	}
}

// The controller killed mid-flow (SIGKILL): the flow goes on on the split it left; a new
// controller reconciles every switch with no pipeline push, no delete and no write.
func TestControllerKilledMidFlow(t *testing.T) {
	lab, _, _ := deployed(t)
	// Past the flow's start: a controller killed while it feeds a starting flow's slow
	// path (flow start) leaves that split behind, which costs such a flow up to 0.8 s.
	wait := flow(t, lab, 10)
	time.Sleep(4 * time.Second)
	killed := time.Now()
	lab.KillController()
	time.Sleep(2 * time.Second)
	stop := lab.StartController("auto", nil)
	defer stop()
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := waitStatus(t, ctl, 5*time.Second, "switches programmed", func(st *pb.StatusResponse) bool {
		for _, s := range st.Switches {
			if s.Programmed == 0 {
				return false
			}
		}
		return true
	})
	for _, s := range st.Switches {
		t.Logf("%s reconciled in %.1f ms: %d pipeline pushes, %d Write RPCs, %d deletes", s.Name, s.LastReconcileMs, s.PipelinePushes, s.WriteRpcs, s.Deletes)
		if s.PipelinePushes != 0 || s.Deletes != 0 || s.WriteRpcs != 0 {
			t.Errorf("switch %s: %d pipeline pushes, %d deletes, %d Write RPCs after a controller restart; want none", s.Name, s.PipelinePushes, s.Deletes, s.WriteRpcs)
		}
	}
	stall := wait(killed)
	t.Logf("longest stall %v", stall)
	if stall > maxStall {
		t.Errorf("the flow stalled for %v across the controller's death and restart", stall)
	}
}

// A second agent started on a live agent's socket stops before it touches anything:
// the first keeps its socket and answers, and the second made no pins.
func TestSecondAgentRefusesALiveSocket(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	ns := nstest.New(t, "h")
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	pins := func(n string) string { return filepath.Join("/sys/fs/bpf/plait", filepath.Base(dir)+"-"+n) }
	t.Cleanup(func() { os.RemoveAll(pins("1")); os.RemoveAll(pins("2")) })
	_, out := ns.Start(bin, "agent", "--socket", sock, "--pin-dir", pins("1"), "--state-file", filepath.Join(dir, "1.json"))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first agent did not start:\n%s", out())
		}
	}
	_, err := ns.Try(bin, "agent", "--socket", sock, "--pin-dir", pins("2"), "--state-file", filepath.Join(dir, "2.json"))
	if err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Fatalf("second agent on a live socket: %v, want a refusal", err)
	}
	if _, err := os.Stat(pins("2")); err == nil {
		t.Error("the refused agent pinned a datapath")
	}
	if _, err := ns.Try(bin, "--agent", sock, "tunnel", "ls"); err != nil {
		t.Fatalf("the first agent stopped answering: %v", err)
	}
}
