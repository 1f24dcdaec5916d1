package labnet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plait/plait/internal/nstest"
)

// The split shape, as the Mininet lab's (docs/lab.md): a P4 switch splits instead of the
// hosts, and the hosts only decapsulate.
//
//	h1 eth1 ── s10 [split h1→h2] ─┬─ s1 [path 1] ─┬─ s11 [split h2→h1] ── eth1 h2
//	10.99.0.1                      ├─ s2 [path 2] ─┤                         10.99.0.2
//	+ 10.0.k.1/32                  └─ ...         ─┘                  + 10.0.k.2/32
//
// Every switch lives in the "net" namespace. The switches' encapsulation travels around
// the hosts' 1500-byte packets, so the core's MTU is 1600 while the hosts' route to the
// tunnel prefix keeps 1500. Plain packets (ARP) take path 1.

const coreMTU = 1600

// SplitSwitch and MergeSwitch are the split shape's switches for h1→h2 and h2→h1.
const (
	SplitSwitch = 10
	MergeSwitch = 11
)

// NewSplit builds the split shape and starts switches and agents with receive-only
// tunnels; the controller (StartController) programs the splits.
func NewSplit(t testing.TB, bin string, paths []Path, opts Options) *Lab {
	t.Helper()
	l := &Lab{t: t, Bin: bin, Dir: t.TempDir(), Paths: paths, Telemetry: opts.Telemetry, Tick: opts.Tick, procs: map[string]*proc{},
		H1: nstest.New(t, "h1"), H2: nstest.New(t, "h2"), Net: nstest.New(t, "net"), split: true}
	l.Ctl = l.Net
	l.Sock1, l.Sock2 = filepath.Join(l.Dir, "h1.sock"), filepath.Join(l.Dir, "h2.sock")
	l.CtlSock = filepath.Join(l.Dir, "controller.sock")
	core := func(ns *nstest.NS, dev string) {
		ns.Run("ip", "link", "set", dev, "mtu", fmt.Sprint(coreMTU))
		ns.Offloads(dev, false)
	}
	edge := func(h *nstest.NS, sw int, local string) {
		dev := fmt.Sprintf("s%d-1", sw)
		nstest.Veth(t, h, "eth1", l.Net, dev)
		core(h, "eth1")
		core(l.Net, dev)
		h.Addr("eth1", "10.99.0."+local+"/24")
		h.Run("ip", "route", "replace", "10.99.0.0/24", "dev", "eth1", "src", "10.99.0."+local, "mtu", "lock", "1500")
		for k := range paths {
			h.Run("ip", "addr", "add", fmt.Sprintf("10.0.%d.%s/32", k+1, local), "dev", "eth1")
		}
	}
	edge(l.H1, SplitSwitch, "1")
	edge(l.H2, MergeSwitch, "2")
	for k, p := range paths {
		sw := fmt.Sprintf("s%d", k+1)
		for _, end := range []struct {
			edge   int
			pathSw string
		}{{SplitSwitch, sw + "-1"}, {MergeSwitch, sw + "-2"}} {
			e := fmt.Sprintf("s%d-%d", end.edge, k+2)
			nstest.Veth(t, l.Net, e, l.Net, end.pathSw)
			core(l.Net, e)
			core(l.Net, end.pathSw)
		}
		link := fmt.Sprintf("rate=%s,delay=%s", p.Rate, p.Delay)
		if p.Queue > 0 {
			link += fmt.Sprintf(",queue=%d", p.Queue)
		}
		l.startSwitch(k+1, []string{"1=" + sw + "-1", "2=" + sw + "-2"}, "--link", "1:"+link, "--link", "2:"+link)
	}
	for _, edge := range []int{SplitSwitch, MergeSwitch} {
		var ports []string
		for p := 1; p <= len(paths)+1; p++ {
			ports = append(ports, fmt.Sprintf("%d=s%d-%d", p, edge, p))
		}
		l.startSwitch(edge, ports)
	}
	for _, h := range []struct {
		ns   *nstest.NS
		sock string
	}{{l.H1, l.Sock1}, {l.H2, l.Sock2}} {
		l.startAgent(h.ns, h.sock)
		h.ns.Run(l.Bin, "--agent", h.sock, "tunnel", "add", "--id", "1", "--device", "eth1", "--address", addrOf(h.ns == l.H1)+"/24", "--receive-only")
	}
	t.Cleanup(l.cleanPins)
	return l
}

func addrOf(h1 bool) string {
	if h1 {
		return "10.99.0.1"
	}
	return "10.99.0.2"
}

// splitNetwork is the split shape's network file: path switches forward, the split and
// merge switches split the tunnel's two directions and forward plain packets on path 1.
func (l *Lab) splitNetwork(mode string) string {
	mac := func(ns *nstest.NS) string {
		f := strings.Fields(ns.Run("ip", "-br", "link", "show", "dev", "eth1")) // eth1@ifN UP MAC <...>
		if len(f) < 3 {
			l.t.Fatalf("no MAC address for eth1 in %v", f)
		}
		return f[2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "interval: 100ms\nagents:\n  h1: %s\n  h2: %s\nswitches:\n", l.Sock1, l.Sock2)
	for k := 1; k <= len(l.Paths); k++ {
		fmt.Fprintf(&b, "  s%d:\n    address: %s\n    forward: {1: 2, 2: 1}\n", k, l.SwitchAddr(k))
	}
	for _, e := range []struct {
		sw               int
		from, to         string
		fromMAC, toMAC   string
		fromHost, toHost string
	}{{SplitSwitch, "h1", "h2", mac(l.H1), mac(l.H2), "1", "2"}, {MergeSwitch, "h2", "h1", mac(l.H2), mac(l.H1), "2", "1"}} {
		fmt.Fprintf(&b, "  s%d:\n    address: %s\n    forward: {1: 2, 2: 1", e.sw, l.SwitchAddr(e.sw))
		for k := 2; k <= len(l.Paths); k++ {
			fmt.Fprintf(&b, ", %d: 1", k+1)
		}
		fmt.Fprintf(&b, "}\n    splits:\n      - {tunnel: 1, from: %s, index: 0, in_port: 1, prefix: 10.99.0.%s/32, paths: [", e.from, e.toHost)
		for k, p := range l.Paths {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{name: %s, port: %d, src_mac: %q, dst_mac: %q, src_ip: 10.0.%d.%s, dst_ip: 10.0.%d.%s}",
				p.Name, k+2, e.fromMAC, e.toMAC, k+1, e.fromHost, k+1, e.toHost)
		}
		b.WriteString("]}\n")
	}
	fmt.Fprintf(&b, "tunnels:\n  - id: 1\n    hosts: [h1, h2]\n    mode: %s\n", mode)
	path := filepath.Join(l.Dir, "network-split-"+mode+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		l.t.Fatal(err)
	}
	return path
}
