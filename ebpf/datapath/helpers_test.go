package datapath

import (
	"net/netip"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/plait/plait/internal/pkt"
)

// Verdicts of the programs as BPF_PROG_TEST_RUN reports them.
const (
	tcActOK       = 0
	tcActShot     = 2
	tcActRedirect = 7
	xdpDrop       = 1
	xdpPass       = 2
)

var (
	tunMAC   = pkt.MAC("02:00:00:00:00:01")
	tunPeer  = pkt.MAC("02:00:00:00:00:02")
	innerSrc = netip.MustParseAddr("10.99.0.1")
	innerDst = netip.MustParseAddr("10.99.0.2")
	prefix   = netip.MustParsePrefix("10.99.0.0/24")
)

// testPath i runs between 10.0.i.1 and 10.0.i.2 on ifindex 100+i.
func testPath(i int) Path {
	return Path{
		Ifindex: uint32(100 + i),
		SrcIP:   netip.AddrFrom4([4]byte{10, 0, byte(i), 1}),
		DstIP:   netip.AddrFrom4([4]byte{10, 0, byte(i), 2}),
		SrcMAC:  pkt.MAC("02:00:00:00:01:0" + string(rune('0'+i))),
		DstMAC:  pkt.MAC("02:00:00:00:02:0" + string(rune('0'+i))),
		Up:      true,
		Weight:  1,
		MTU:     1500,
	}
}

func testTunnel(mode Mode, n int) Tunnel {
	t := Tunnel{Slot: 3, ID: 42, Prefix: prefix, Port: 7733, Mode: mode}
	for i := 0; i < n; i++ {
		t.Paths = append(t.Paths, testPath(i))
	}
	return t
}

func load(t testing.TB) *Datapath {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading eBPF programs needs root")
	}
	d, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func configure(t testing.TB, d *Datapath, tun Tunnel) {
	t.Helper()
	if err := d.ResetSender(tun.Slot); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteSender(tun); err != nil {
		t.Fatal(err)
	}
}

func senderProg(t testing.TB, d *Datapath, slot uint32) *ebpf.Program {
	t.Helper()
	p, err := d.senderProgram(slot)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func run(t testing.TB, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(in)+256)
	opts := ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := prog.Run(&opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

func innerPacket(seq uint32, n int) []byte {
	return pkt.TCPPacket(tunPeer, tunMAC, innerSrc, innerDst, seq, n)
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
