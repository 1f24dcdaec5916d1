package p4_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/p4/p4info"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The same vectors against BMv2: plait.p4 compiled by p4c-bm2-ss, run by
// simple_switch_grpc on veth pairs in a namespace, programmed over P4Runtime with the
// P4Info p4c wrote (its own IDs, resolved by name like the checked-in one).
func TestVectorsBMv2(t *testing.T) {
	for _, bin := range []string{"p4c-bm2-ss", "simple_switch_grpc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not on PATH (p4c and BMv2 are not installable here): the vectors ran against the embedded switch only", bin)
		}
	}
	nstest.RequireRoot(t)
	dir := t.TempDir()
	cmd := exec.Command("p4c-bm2-ss", "--arch", "v1model", "-o", filepath.Join(dir, "plait.json"),
		"--p4runtime-files", filepath.Join(dir, "plait.p4info.txtpb"), "../plait.p4")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("p4c-bm2-ss: %v\n%s", err, out)
	}
	for name, v := range loadVectors(t) {
		t.Run(name, func(t *testing.T) {
			t.Log(v.Description)
			run(t, v, newBMv2(t, dir))
		})
	}
}

type bmv2 struct {
	inf   *p4info.Info
	c     p4v1.P4RuntimeClient
	pins  chan *p4v1.PacketIn
	socks map[int]int
	rx    chan output
}

func newBMv2(t *testing.T, dir string) *bmv2 {
	t.Helper()
	b := &bmv2{pins: make(chan *p4v1.PacketIn, 16), socks: map[int]int{}, rx: make(chan output, 64)}
	infoText, err := os.ReadFile(filepath.Join(dir, "plait.p4info.txtpb"))
	if err != nil {
		t.Fatal(err)
	}
	if b.inf, err = p4info.Parse(infoText); err != nil {
		t.Fatal(err)
	}
	devConfig, err := os.ReadFile(filepath.Join(dir, "plait.json"))
	if err != nil {
		t.Fatal(err)
	}
	ns := nstest.New(t, "bmv2")
	ns.Run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	args := []string{"--no-p4"}
	for i := 1; i <= 4; i++ {
		sw, host := fmt.Sprintf("sw%d", i), fmt.Sprintf("h%d", i)
		nstest.Veth(t, ns, sw, ns, host)
		ns.Offloads(sw, false)
		ns.Offloads(host, false)
		args = append(args, "-i", fmt.Sprintf("%d@%s", i, sw))
	}
	sock := filepath.Join(t.TempDir(), "bmv2.sock")
	args = append(args, "--", "--grpc-server-addr", "unix:"+sock, "--cpu-port", "255")
	_, out := ns.Start("simple_switch_grpc", args...)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	b.c = p4v1.NewP4RuntimeClient(conn)
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("simple_switch_grpc did not start:\n%s", out())
		}
		time.Sleep(100 * time.Millisecond)
	}
	arbitrate(t, ctx, b.c, b.pins)
	if _, err := b.c.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: b.inf.P4Info, P4DeviceConfig: devConfig},
	}); err != nil {
		t.Fatalf("push pipeline to BMv2: %v", err)
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
func (b *bmv2) info() *p4info.Info           { return b.inf }
func (b *bmv2) client() p4v1.P4RuntimeClient { return b.c }

func (b *bmv2) inject(port int, frame []byte) {
	unix.Write(b.socks[port], frame)
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
