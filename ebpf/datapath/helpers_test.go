package datapath

import (
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"

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
	if err := d.ResetSender(tun.Slot, 0); err != nil {
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

// rxIfindex is where the receiver's test frames arrive: loopback, in every namespace.
const rxIfindex = 1

// run runs prog once on in; XDP programs see it arrive on rxIfindex.
func run(t testing.TB, prog *ebpf.Program, in []byte) (uint32, []byte) {
	t.Helper()
	if prog.Type() == ebpf.XDP {
		ret, out, _ := runXDP(t, prog, in, rxIfindex)
		return ret, out
	}
	out := make([]byte, len(in)+256)
	opts := ebpf.RunOptions{Data: in, DataOut: out}
	ret, err := prog.Run(&opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return ret, opts.DataOut
}

// runXDP is BPF_PROG_TEST_RUN of an XDP program on a frame arriving on ifindex (a device
// of the calling thread's namespace), with the kernel-measured run time: cilium/ebpf
// reports the time only of runs without a context.
func runXDP(t testing.TB, prog *ebpf.Program, in []byte, ifindex uint32) (uint32, []byte, time.Duration) {
	t.Helper()
	out := make([]byte, len(in)+256)
	// struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
	xdpMD := [6]uint32{0, uint32(len(in)), 0, ifindex, 0, 0}
	attr := struct {
		progFd, retval, dataSizeIn, dataSizeOut uint32
		dataIn, dataOut                         uint64
		repeat, duration, ctxSizeIn, ctxSizeOut uint32
		ctxIn, ctxOut                           uint64
		flags, cpu, batchSize, _                uint32
	}{
		progFd: uint32(prog.FD()), dataSizeIn: uint32(len(in)), dataSizeOut: uint32(len(out)),
		dataIn: uint64(uintptr(unsafe.Pointer(&in[0]))), dataOut: uint64(uintptr(unsafe.Pointer(&out[0]))),
		repeat: 1, ctxSizeIn: uint32(unsafe.Sizeof(xdpMD)), ctxIn: uint64(uintptr(unsafe.Pointer(&xdpMD))),
	}
	for {
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_TEST_RUN, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		runtime.KeepAlive(in)
		runtime.KeepAlive(out)
		runtime.KeepAlive(&xdpMD)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			t.Fatalf("test run on ifindex %d: %v", ifindex, errno)
		}
		return attr.retval, out[:attr.dataSizeOut], time.Duration(attr.duration)
	}
}

func innerPacket(seq uint32, n int) []byte {
	return pkt.TCPPacket(tunPeer, tunMAC, innerSrc, innerDst, seq, n)
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
