// Package labnet builds the parallel lab in network namespaces for Go tests and
// benchmarks, from the real binary: two hosts with one interface per path, one embedded
// switch per path emulating the path's link in both directions, an agent in each host,
// a striped tunnel between them, and optionally the controller and an "ideal" link.
//
//	h1 (10.99.0.1 on plait0)                                         h2 (10.99.0.2)
//	  eth1 10.0.1.1 ── s1-1 [switch s1, rate/delay of path 1] s1-2 ── eth1 10.0.1.2
//	  eth2 10.0.2.1 ── s2-1 [switch s2]                       s2-2 ── eth2 10.0.2.2
//	  ...
//	  eth0 10.0.0.1 ── s0-1 [switch s0: Σ rate, min delay]    s0-2 ── eth0 10.0.0.2   (ideal)
//
// All switches and the controller live in one namespace ("net", where Mininet keeps its
// switches) so that P4Runtime runs over its loopback; agents talk over Unix sockets.
// Options.Deploy moves the controller to a namespace of its own (deploy.go).
package labnet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/sockrpc"
)

// Path is one emulated path, both directions alike.
type Path struct {
	Name   string
	Rate   string // e.g. 5mbit
	Delay  string // one-way, e.g. 100ms
	Jitter string // order-keeping, uniform in ± this, e.g. 4ms; empty: none
	Queue  int    // packets; 0: the switch's default
}

// Lab is a running parallel lab.
type Lab struct {
	t         testing.TB
	procs     map[string]*proc // switches and agents by name, to restart them
	Bin       string
	Dir       string
	H1, H2    *nstest.NS
	Net       *nstest.NS
	Ctl       *nstest.NS // the controller's: Net, or its own with Deploy
	PKI       string     // with Deploy: the lab CA's directory
	Paths     []Path
	Ideal     bool
	Sock1     string
	Sock2     string
	CtlSock   string
	Telemetry bool
	Full      bool
	Tick      time.Duration
	ctl       *exec.Cmd
	// KeyFile is the tunnel key both hosts tag with ("": authentication off).
	KeyFile string
	// Resequence: both ends put received packets in order (SetResequence).
	Resequence bool
	// Repair: both ends repair losses on the paths (SetRepair).
	Repair  bool
	CC      string // the controller's --cc ("": its default)
	weights []float64
	split   bool // the split shape (split.go)
}

// Options of a lab.
type Options struct {
	Ideal     bool          // add the single link with the paths' summed rate and smallest delay
	Telemetry bool          // tunnels carry a telemetry block the switches stamp
	Full      bool          // tunnels encapsulate every packet whole (no compact TCP)
	NoAuth    bool          // tunnels send untagged packets (authentication off)
	Tick      time.Duration // the switches' links send once per tick, as an LTE cell per TTI
	Weights   []float64
	Deploy    bool // the controller reaches agents and switches over TCP with mutual TLS (deploy.go)
	// Resequence: both ends hand their stack the tunnel's packets in order.
	Resequence bool
	// Repair: both ends repair losses on the paths.
	Repair bool
	// CC is the flows' congestion control as the controller is told it (--cc; "":
	// cubic, its default).
	CC string
}

// Main is a lab test package's TestMain: as root it builds the plait binary once into a
// temporary folder and sets *bin to it (a test that finds *bin empty skips, saying it
// needs root), runs the tests, removes the folder and exits with their code.
func Main(m *testing.M, bin *string) {
	if os.Geteuid() != 0 {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "plait-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "plait")
	cmd := exec.Command("go", "build", "-o", *bin, "github.com/plait/plait/cmd/plait")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build plait: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func grpcPort(i int) int { return 9700 + i }

// New builds the lab and starts switches, agents and the tunnel (wrr with opts.Weights,
// equal by default). Everything is removed when the test ends.
func New(t testing.TB, bin string, paths []Path, opts Options) *Lab {
	t.Helper()
	l := &Lab{t: t, Bin: bin, Dir: t.TempDir(), Paths: paths, Ideal: opts.Ideal, Telemetry: opts.Telemetry, Full: opts.Full, Tick: opts.Tick, procs: map[string]*proc{},
		Resequence: opts.Resequence, Repair: opts.Repair, CC: opts.CC, weights: opts.Weights,
		H1: nstest.New(t, "h1"), H2: nstest.New(t, "h2"), Net: nstest.New(t, "net")}
	l.Sock1, l.Sock2 = filepath.Join(l.Dir, "h1.sock"), filepath.Join(l.Dir, "h2.sock")
	l.CtlSock = filepath.Join(l.Dir, "controller.sock")
	l.Ctl = l.Net
	if opts.Deploy {
		l.deploy()
	}
	for i, p := range paths {
		l.link(i+1, p)
	}
	if opts.Ideal {
		l.link(0, l.idealPath())
	}
	for _, h := range []*nstest.NS{l.H1, l.H2} {
		// Per-namespace sysctls: the flows' congestion control is set per test.
		h.Run("sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
	}
	if !opts.NoAuth {
		l.KeyFile = filepath.Join(l.Dir, "tunnel.key")
		if out, err := exec.Command(bin, "tunnel", "genkey", l.KeyFile).CombinedOutput(); err != nil {
			t.Fatalf("tunnel key: %v: %s", err, out)
		}
	}
	l.startAgent(l.H1, l.Sock1)
	l.startAgent(l.H2, l.Sock2)
	l.tunnel(l.H1, l.Sock1, "1", "2", opts.Weights)
	l.tunnel(l.H2, l.Sock2, "2", "1", nil)
	t.Cleanup(l.cleanPins)
	return l
}

// cleanPins removes the agents' pins and state, which outlive them by design.
func (l *Lab) cleanPins() {
	for _, ns := range []*nstest.NS{l.H1, l.H2} {
		if out, err := ns.Try("stat", "-L", "-c", "%i", ns.Path()); err == nil {
			os.RemoveAll("/sys/fs/bpf/plait/netns-" + strings.TrimSpace(out))
			os.RemoveAll("/run/plait/netns-" + strings.TrimSpace(out))
		}
	}
}

func (l *Lab) idealPath() Path {
	var sum float64
	var minDelay time.Duration = -1
	queue := 0
	for _, p := range l.Paths {
		r, err := parseRate(p.Rate)
		if err != nil {
			l.t.Fatal(err)
		}
		sum += r
		d, _ := time.ParseDuration(p.Delay)
		if minDelay < 0 || d < minDelay {
			minDelay = d
		}
		queue += p.Queue
	}
	return Path{Name: "ideal", Rate: fmt.Sprintf("%dkbit", int(sum/1000)), Delay: minDelay.String(), Queue: queue}
}

func parseRate(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			var v float64
			_, err := fmt.Sscanf(strings.TrimSuffix(s, u.suffix), "%g", &v)
			return v * u.mult, err
		}
	}
	return 0, fmt.Errorf("rate %q has no unit", s)
}

// link wires path i: h1 eth<i> — switch s<i> — h2 eth<i>, and starts the switch.
func (l *Lab) link(i int, p Path) {
	t := l.t
	sw := fmt.Sprintf("s%d", i)
	nstest.Veth(t, l.H1, fmt.Sprintf("eth%d", i), l.Net, sw+"-1")
	nstest.Veth(t, l.Net, sw+"-2", l.H2, fmt.Sprintf("eth%d", i))
	l.H1.Addr(fmt.Sprintf("eth%d", i), fmt.Sprintf("10.0.%d.1/24", i))
	l.H2.Addr(fmt.Sprintf("eth%d", i), fmt.Sprintf("10.0.%d.2/24", i))
	for _, x := range []struct {
		ns  *nstest.NS
		dev string
	}{{l.H1, fmt.Sprintf("eth%d", i)}, {l.H2, fmt.Sprintf("eth%d", i)}, {l.Net, sw + "-1"}, {l.Net, sw + "-2"}} {
		x.ns.Offloads(x.dev, false)
	}
	link := fmt.Sprintf("rate=%s,delay=%s", p.Rate, p.Delay)
	if p.Jitter != "" {
		link += ",jitter=" + p.Jitter
	}
	if p.Queue > 0 {
		link += fmt.Sprintf(",queue=%d", p.Queue)
	}
	l.startSwitch(i, []string{"1=" + sw + "-1", "2=" + sw + "-2"}, "--link", "1:"+link, "--link", "2:"+link)
}

// startSwitch starts switch s<i> on ports (NUM=INTERFACE) and waits for its gRPC server.
func (l *Lab) startSwitch(i int, ports []string, extra ...string) {
	sw := fmt.Sprintf("s%d", i)
	addr := l.SwitchAddr(i)
	args := []string{"switch", "--name", sw, "--grpc", addr, "--tick", l.Tick.String()}
	for _, p := range ports {
		args = append(args, "--port", p)
	}
	l.start(sw, l.Net, func() bool {
		_, err := l.Net.Try(l.Bin, append(l.TLSArgs("controller"), "link", "show", "--switch", addr)...)
		return err == nil
	}, append(append(args, extra...), l.switchTLSArgs()...)...)
}

// proc is a switch or agent the lab can restart.
type proc struct {
	ns    *nstest.NS
	args  []string
	ready func() bool
	cmd   *exec.Cmd
}

func (l *Lab) start(name string, ns *nstest.NS, ready func() bool, args ...string) {
	p := &proc{ns: ns, args: args, ready: ready}
	var out func() string
	p.cmd, out = ns.Start(l.Bin, args...)
	l.procs[name] = p
	// What an agent or switch said (next hops, paths dead and back) is what a failure
	// needs: a flow whose handshake never got through left only the controller's log.
	l.t.Cleanup(func() {
		if o := out(); l.t.Failed() && o != "" {
			l.t.Logf("%s log:\n%s", name, o)
		}
	})
	waitFor(l.t, 10*time.Second, name, ready)
}

// Restart kills a switch ("s1") or agent ("h1") and starts it again as it was.
func (l *Lab) Restart(name string) {
	p := l.procs[name]
	p.cmd.Process.Kill()
	p.cmd.Wait()
	if name[0] == 'h' {
		os.Remove(p.args[2]) // the agent's socket: wait for the new one
	}
	l.start(name, p.ns, p.ready, p.args...)
}

func (l *Lab) startAgent(ns *nstest.NS, sock string) {
	name := filepath.Base(sock[:len(sock)-len(".sock")])
	l.start(name, ns, func() bool { _, err := os.Stat(sock); return err == nil },
		append([]string{"agent", "--socket", sock, "--sample-interval", "25ms"}, l.agentTLSArgs(name)...)...)
}

func (l *Lab) tunnel(ns *nstest.NS, sock, local, remote string, weights []float64) {
	args := []string{"--agent", sock, "tunnel", "add", "--id", "1", "--device", "plait0", "--address", "10.99.0." + local + "/24"}
	if !l.Full {
		args = append(args, "--peer", "10.99.0."+remote)
	}
	if l.KeyFile != "" {
		args = append(args, "--key-file", l.KeyFile)
	} else {
		args = append(args, "--no-auth")
	}
	for i, p := range l.Paths {
		args = append(args, "--path", fmt.Sprintf("name=%s,dev=eth%d,remote=10.0.%d.%s", p.Name, i+1, i+1, remote))
	}
	if weights != nil {
		ws := make([]string, len(weights))
		for i, w := range weights {
			ws[i] = fmt.Sprint(w)
		}
		args = append(args, "--mode", "wrr", "--weights", strings.Join(ws, ","))
	}
	if l.Telemetry {
		args = append(args, "--telemetry")
	}
	if l.Resequence {
		args = append(args, "--resequence")
	}
	args = append(args, fmt.Sprintf("--repair=%v", l.Repair))
	ns.Run(l.Bin, args...)
}

// SetRepair reconfigures both ends' tunnels with repair on or off.
func (l *Lab) SetRepair(on bool) {
	l.Repair = on
	l.tunnel(l.H1, l.Sock1, "1", "2", l.weights)
	l.tunnel(l.H2, l.Sock2, "2", "1", nil)
}

// SetResequence reconfigures both ends' tunnels with resequencing on or off.
func (l *Lab) SetResequence(on bool) {
	l.Resequence = on
	l.tunnel(l.H1, l.Sock1, "1", "2", l.weights)
	l.tunnel(l.H2, l.Sock2, "2", "1", nil)
}

// Network writes the controller's network file for the lab; mode is the tunnel's.
func (l *Lab) Network(mode string, weights []float64) string {
	if l.split {
		return l.splitNetwork(mode)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "interval: 100ms\n")
	if l.PKI != "" {
		t := l.TLS("controller")
		fmt.Fprintf(&b, "tls: {ca: %s, cert: %s, key: %s}\n", t.CA, t.Cert, t.Key)
	}
	fmt.Fprintf(&b, "agents:\n  h1: %s\n  h2: %s\nswitches:\n", l.AgentAddr("h1"), l.AgentAddr("h2"))
	first := 1
	if l.Ideal {
		first = 0
	}
	for i := first; i <= len(l.Paths); i++ {
		fmt.Fprintf(&b, "  s%d:\n    address: %s\n    forward: {1: 2, 2: 1}\n", i, l.SwitchAddr(i))
	}
	fmt.Fprintf(&b, "tunnels:\n  - id: 1\n    hosts: [h1, h2]\n    mode: %s\n", mode)
	if weights != nil {
		fmt.Fprintf(&b, "    weights: %v\n", strings.ReplaceAll(fmt.Sprint(weights), " ", ", "))
	}
	path := filepath.Join(l.Dir, "network-"+mode+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return path
}

// StartController runs the controller (in the switches' namespace) and returns a
// function that stops it.
func (l *Lab) StartController(mode string, weights []float64) (stop func()) {
	args := []string{"controller", "--network", l.Network(mode, weights), "--listen", l.CtlSock, "--metrics", ""}
	if l.CC != "" {
		args = append(args, "--cc", l.CC)
	}
	cmd, out := l.Ctl.Start(l.Bin, args...)
	l.ctl = cmd
	var last *pb.StatusResponse
	if !poll(15*time.Second, func() bool {
		c, conn, err := controller.Dial(l.CtlSock, sockrpc.TLS{})
		if err != nil {
			return false
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if last, err = c.Status(ctx, &pb.StatusRequest{}); err != nil {
			return false
		}
		primary := 0
		for _, s := range last.Switches {
			if s.Primary {
				primary++
			}
		}
		return primary == len(last.Switches)
	}) {
		l.t.Fatalf("controller did not program the switches within 15 s\nstatus: %v\nlog:\n%s", last, out())
	}
	return func() {
		if l.t.Failed() {
			l.t.Logf("controller log:\n%s", out())
		}
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			l.t.Errorf("controller did not stop on SIGINT:\n%s", out())
		}
	}
}

// KillController kills the controller as a crash would (SIGKILL): it cleans nothing up.
func (l *Lab) KillController() {
	l.ctl.Process.Kill()
	l.ctl.Wait()
}

// WaitEstimates waits until the controller has every path up with a known delay both
// ways, and a known capacity towards h2: what a controller that has been running for a
// while knows when a flow starts.
func (l *Lab) WaitEstimates(timeout time.Duration) {
	l.t.Helper()
	c, conn, err := controller.Dial(l.CtlSock, sockrpc.TLS{})
	if err != nil {
		l.t.Fatal(err)
	}
	defer conn.Close()
	var last *pb.PathsResponse
	if !poll(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if last, err = c.Paths(ctx, &pb.PathsRequest{}); err != nil || len(last.Directions) == 0 {
			return false
		}
		for _, d := range last.Directions {
			for _, p := range d.Paths {
				if !p.Up || math.IsNaN(p.OwdUs) || d.From == "h1" && math.IsNaN(p.CapacityBps) {
					return false
				}
			}
		}
		return true
	}) {
		l.t.Fatalf("the controller did not estimate every path within %v: %v", timeout, last)
	}
}

// Plait runs the plait CLI in the switches' namespace against the controller.
func (l *Lab) Plait(args ...string) string {
	return l.Ctl.Run(l.Bin, append([]string{"--controller", l.CtlSock}, args...)...)
}

// SetLinkAt changes path i's link like SetLink, at the wall-clock time at (the switches'
// link time): a test that times a reaction starts its clock at at, not before commands
// whose own start a loaded machine delays. A command that arrives after at applies the
// change at once, so a clock started at at never undercounts.
func (l *Lab) SetLinkAt(i int, both bool, at time.Time, args ...string) {
	l.SetLink(i, both, append(args, "--at", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 6, 64))...)
}

// SetLink changes path i's link (1-based) in the direction towards h2, or both.
func (l *Lab) SetLink(i int, both bool, args ...string) {
	ports := []string{"2"}
	if both {
		ports = append(ports, "1")
	}
	for _, port := range ports {
		// The controller is primary on the switch with the network file's default
		// election id; link changes must name it.
		l.Ctl.Run(l.Bin, append(append(l.TLSArgs("controller"), "link", "set", "--switch", l.SwitchAddr(i), "--port", port, "--election-id", "10"), args...)...)
	}
}

func waitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	if !poll(d, ok) {
		t.Fatalf("%s did not come up within %v", what, d)
	}
}

func poll(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// Goodput runs one cubic flow from h1 to addr and returns the receiver's goodput over the
// 1 s intervals that start at or after omit seconds (the lab's rule), and the sender's
// retransmissions, and logs the goodput of every interval.
func (lab *Lab) Goodput(b testing.TB, addr string, seconds, omit int) (float64, int) {
	b.Helper()
	server, serverOut := lab.H2.Start("iperf3", "-s", "-1", "-J")
	time.Sleep(300 * time.Millisecond)
	out := lab.H1.Run("iperf3", "-c", addr, "-t", fmt.Sprint(seconds), "-C", "cubic", "-J")
	server.Wait()
	type report struct {
		Intervals []struct {
			Sum struct {
				Start float64 `json:"start"`
				Bytes float64 `json:"bytes"`
				Secs  float64 `json:"seconds"`
			} `json:"sum"`
		} `json:"intervals"`
		End struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	var rx, tx report
	if err := json.Unmarshal([]byte(serverOut()), &rx); err != nil {
		b.Fatalf("iperf3 server: %v\n%s", err, serverOut())
	}
	if err := json.Unmarshal([]byte(out), &tx); err != nil {
		b.Fatalf("iperf3: %v\n%s", err, out)
	}
	var bytes, secs float64
	series := ""
	for _, iv := range rx.Intervals {
		series += fmt.Sprintf(" %.1f", iv.Sum.Bytes*8/iv.Sum.Secs/1e6)
		if iv.Sum.Start >= float64(omit) && iv.Sum.Start < float64(seconds) {
			bytes += iv.Sum.Bytes
			secs += iv.Sum.Secs
		}
	}
	b.Logf("%s, Mbit/s each second:%s", addr, series)
	return bytes * 8 / secs, tx.End.SumSent.Retransmits
}
