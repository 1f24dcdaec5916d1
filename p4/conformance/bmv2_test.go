package p4_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4info"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The same vectors against BMv2: plait.p4 compiled by p4c-bm2-ss, run by
// simple_switch_grpc (with the device id the requests name) on veth pairs in a namespace,
// programmed over P4Runtime with the P4Info p4c wrote. Each vector gets a fresh switch.
func TestVectorsBMv2(t *testing.T) {
	if why := p4test.BMv2Missing(); why != "" {
		t.Skipf("%s: the vectors ran against the embedded switch only", why)
	}
	nstest.RequireRoot(t)
	prog := p4test.CompileP4(t, "../plait.p4")
	for name, v := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			t.Log(v.Description)
			run(t, v, newBMv2(t, prog))
		})
	}
}

type bmv2 struct {
	sw    *p4test.BMv2
	c     p4v1.P4RuntimeClient
	pins  chan *p4v1.PacketIn
	socks map[int]int
	rx    chan output
}

func newBMv2(t *testing.T, prog *p4test.P4c) *bmv2 {
	t.Helper()
	b := &bmv2{pins: make(chan *p4v1.PacketIn, 16), socks: map[int]int{}, rx: make(chan output, 1024)}
	ns := nstest.New(t, "bmv2")
	ns.Run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	var ifaces []string
	for i := 1; i <= 4; i++ {
		sw, host := fmt.Sprintf("sw%d", i), fmt.Sprintf("h%d", i)
		nstest.Veth(t, ns, sw, ns, host)
		ns.Offloads(sw, false)
		ns.Offloads(host, false)
		ifaces = append(ifaces, sw)
	}
	b.sw = p4test.StartBMv2(t, ns, prog, 1, ifaces)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b.c = p4v1.NewP4RuntimeClient(b.sw.Conn)
	arbitrate(t, ctx, b.c, b.pins)
	if err := b.sw.Push(ctx); err != nil {
		t.Fatalf("%v\n%s", err, b.sw.Output())
	}
	for i := 1; i <= 4; i++ {
		fd := packetSocket(t, ns, fmt.Sprintf("h%d", i))
		b.socks[i] = fd
		go func(port, fd int) {
			buf := make([]byte, 9216)
			for {
				n, _, err := unix.Recvfrom(fd, buf, 0)
				if err != nil {
					return
				}
				b.rx <- output{port, append([]byte(nil), buf[:n]...)}
			}
		}(i, fd)
	}
	t.Cleanup(func() {
		for _, fd := range b.socks {
			unix.Close(fd)
		}
	})
	return b
}

// packetSocket opens an AF_PACKET socket on dev inside ns, receiving only what arrives.
func packetSocket(t *testing.T, ns *nstest.NS, dev string) int {
	t.Helper()
	errc := make(chan error, 1)
	var fd int
	go func() {
		runtime.LockOSThread()
		orig, _ := netns.Get()
		target, err := netns.GetFromPath(ns.Path())
		if err != nil {
			errc <- err
			return
		}
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ifi, err := net.InterfaceByName(dev)
		if err == nil {
			fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(uint16(unix.ETH_P_ALL)<<8|uint16(unix.ETH_P_ALL)>>8))
		}
		if err == nil {
			unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
			err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: uint16(unix.ETH_P_ALL)<<8 | uint16(unix.ETH_P_ALL)>>8, Ifindex: ifi.Index})
		}
		if serr := netns.Set(orig); serr == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("packet socket on %s: %v", dev, err)
	}
	return fd
}

func (b *bmv2) name() string                 { return "bmv2" }
func (b *bmv2) info() *p4info.Info           { return b.sw.Info }
func (b *bmv2) client() p4v1.P4RuntimeClient { return b.c }

// inject sends a frame into the switch's port. A step may send hundreds in a row: they
// are paced, so that none is lost in the veth's or BMv2's receive queue and the outputs
// count only what the program did.
func (b *bmv2) inject(port int, frame []byte) {
	unix.Write(b.socks[port], frame)
	time.Sleep(200 * time.Microsecond)
}

func (b *bmv2) collect() (map[int][][]byte, []*p4v1.PacketIn) {
	outs := map[int][][]byte{}
	var pins []*p4v1.PacketIn
	for {
		select {
		case o := <-b.rx:
			outs[o.port] = append(outs[o.port], o.frame)
		case p := <-b.pins:
			pins = append(pins, p)
		case <-time.After(time.Second):
			return outs, pins
		}
	}
}
