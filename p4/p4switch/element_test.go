package p4switch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4switch"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestLinkElementInSeries is a BMv2 lab's link in miniature, with a kernel bridge standing
// in for BMv2: host a — element e — bridge s — element e — host b. The element is one
// passthrough switch with two pairs, 1:2 on a's side and 3:4 on b's, that shapes what
// leaves towards each host, as the lab shapes each BMv2 port. A TCP flow crosses it all;
// the rate at b and the round trip must be the element's.
func TestLinkElementInSeries(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("needs iperf3 (make deps installs it)")
	}
	a, e, s, b := nstest.New(t, "a"), nstest.New(t, "e"), nstest.New(t, "s"), nstest.New(t, "b")
	for _, ns := range []*nstest.NS{a, e, s, b} {
		ns.Run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	}
	nstest.Veth(t, a, "eth0", e, "p1")
	nstest.Veth(t, e, "p2", s, "b1")
	nstest.Veth(t, s, "b2", e, "p3")
	nstest.Veth(t, e, "p4", b, "eth0")
	for _, x := range []struct {
		ns   *nstest.NS
		devs []string
	}{{a, []string{"eth0"}}, {e, []string{"p1", "p2", "p3", "p4"}}, {s, []string{"b1", "b2"}}, {b, []string{"eth0"}}} {
		for _, d := range x.devs {
			x.ns.Offloads(d, false)
		}
	}
	s.Run("ip", "link", "add", "br0", "type", "bridge")
	s.Run("ip", "link", "set", "b1", "master", "br0")
	s.Run("ip", "link", "set", "b2", "master", "br0")
	s.Run("ip", "link", "set", "br0", "up")
	a.Addr("eth0", addrA+"/24")
	b.Addr("eth0", addrB+"/24")

	const rate, delay = 10_000_000, 20 * time.Millisecond
	shaped := p4switch.LinkParams{RateBps: rate, Delay: delay, QueuePackets: 100}
	opts := []p4switch.Option{p4switch.WithPassthrough(1, 2), p4switch.WithPassthrough(3, 4)}
	for i, dev := range []string{"p1", "p2", "p3", "p4"} {
		var p p4switch.Port
		inNS(t, e, func() (err error) { p, err = p4switch.OpenInterface(dev); return err })
		params := p4switch.LinkParams{}
		if dev == "p1" || dev == "p4" {
			params = shaped
		}
		opts = append(opts, p4switch.WithPort(uint16(i+1), p, params))
	}
	el, err := p4switch.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { el.Close() })

	// Round trip: 2 × 20 ms of delay plus serialising two 98-byte frames at 10 Mbit/s.
	out := a.Run("ping", "-c", "20", "-i", "0.05", "-W", "2", addrB)
	m := regexp.MustCompile(`= ([0-9.]+)/([0-9.]+)/`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no rtt in ping output:\n%s", out)
	}
	minRTT, _ := strconv.ParseFloat(m[1], 64)
	want := 2 * delay.Seconds() * 1000
	t.Logf("rtt min %.3f ms (avg %s), want %.1f ms from the element's delay", minRTT, m[2], want)
	if minRTT < want || minRTT > want+1 {
		t.Errorf("min rtt %.3f ms, want %.1f to %.1f ms", minRTT, want, want+1)
	}

	b.Start("iperf3", "-s", "-1", "-B", addrB)
	time.Sleep(300 * time.Millisecond)
	cmd, iperf := a.Start("iperf3", "-c", addrB, "-t", "5")
	// The queue (100 packets) is larger than the path's bandwidth-delay product (about
	// 35 packets): once slow start is over the flow keeps the link busy. Measured in the
	// middle, L2 bytes at the receiver, what the rate serialises.
	time.Sleep(2 * time.Second)
	b0, t0 := rxBytes(t, b), time.Now()
	tx0 := el.Ports()[3].Stats.TxBytes
	time.Sleep(2 * time.Second)
	b1, t1 := rxBytes(t, b), time.Now()
	tx1 := el.Ports()[3].Stats.TxBytes
	if err := cmd.Wait(); err != nil {
		t.Fatalf("iperf3: %v\n%s", err, iperf())
	}
	got := float64(b1-b0) * 8 / t1.Sub(t0).Seconds()
	t.Logf("TCP through bridge and element: %.3f Mbit/s at b (element sent %.3f Mbit/s), configured %d Mbit/s",
		got/1e6, float64(tx1-tx0)*8/t1.Sub(t0).Seconds()/1e6, rate/1_000_000)
	if math.Abs(got/rate-1) > 0.03 {
		t.Errorf("rate %.3f Mbit/s, want %d ±3%%\n%s", got/1e6, rate/1_000_000, iperf())
	}
	if st := el.Ports()[1].Stats; st.TxPackets == 0 {
		t.Errorf("port 2 (towards the bridge) sent nothing: the flow did not cross the stand-in")
	}
}

func rxBytes(t *testing.T, ns *nstest.NS) uint64 {
	t.Helper()
	var links []struct {
		Stats64 struct {
			Rx struct{ Bytes uint64 } `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(ns.Run("ip", "-j", "-s", "link", "show", "dev", "eth0")), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j -s link: %v", err)
	}
	return links[0].Stats64.Rx.Bytes
}

// A passthrough switch forwards frames unchanged between paired ports, whatever they are
// (here not even Ethernet), serves no P4Runtime, and refuses a port left out of the pairs.
func TestPassthrough(t *testing.T) {
	ports, opts := p4test.MemPorts(3)
	if _, err := p4switch.New(append(opts, p4switch.WithPassthrough(1, 2))...); err == nil || !strings.Contains(err.Error(), "port 3 is in no pair") {
		t.Errorf("port 3 unpaired: got %v, want an error naming port 3", err)
	}
	if _, err := p4switch.New(append(opts, p4switch.WithPassthrough(1, 2), p4switch.WithPassthrough(2, 3))...); err == nil || !strings.Contains(err.Error(), "port 2 is already paired") {
		t.Errorf("port 2 paired twice: got %v", err)
	}
	if _, err := p4switch.New(append(opts, p4switch.WithPassthrough(1, 2), p4switch.WithPassthrough(3, 9))...); err == nil || !strings.Contains(err.Error(), "no port 9") {
		t.Errorf("pair with port 9: got %v", err)
	}
	ports, opts = p4test.MemPorts(2)
	r := newRigWith(t, append(opts, p4switch.WithPassthrough(1, 2))...)
	r.ports = ports
	for _, dir := range [][2]uint16{{1, 2}, {2, 1}} {
		frame := []byte(fmt.Sprintf("not even ethernet, from port %d", dir[0]))
		ports[dir[0]].Inject(frame)
		if got := r.recvFrame(t, dir[1]); !bytes.Equal(got, frame) {
			t.Errorf("port %d -> %d: got %q, want %q", dir[0], dir[1], got, frame)
		}
	}
	r.noFrame(t)
	if _, err := r.client.Capabilities(context.Background(), &p4v1.CapabilitiesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("P4Runtime on a link element: %v, want Unimplemented", err)
	}
}
