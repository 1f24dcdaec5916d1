package p4switch_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The forwarding benchmark runs the switch in its own process (this test binary again,
// in the switch's namespace) so that its CPU time can be read apart from the generator's.
const (
	envSwitchPorts = "PLAIT_TEST_SWITCH_PORTS"
	envSwitchSock  = "PLAIT_TEST_SWITCH_SOCK"
)

func TestMain(m *testing.M) {
	if ports := os.Getenv(envSwitchPorts); ports != "" {
		if err := runSwitchProcess(strings.Split(ports, ","), os.Getenv(envSwitchSock)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runSwitchProcess(devs []string, sock string) error {
	var opts []p4switch.Option
	for i, d := range devs {
		p, err := p4switch.OpenInterface(d)
		if err != nil {
			return err
		}
		opts = append(opts, p4switch.WithPort(uint16(i+1), p, p4switch.LinkParams{}))
	}
	sw, err := p4switch.New(opts...)
	if err != nil {
		return err
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	sw.Register(g)
	if err := sw.Start(); err != nil {
		return err
	}
	go g.Serve(lis)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	g.Stop()
	return sw.Close()
}

// cpuTicks is the user+system CPU time of a process in clock ticks (1/100 s).
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseUint(f[11], 10, 64)
	s, _ := strconv.ParseUint(f[12], 10, 64)
	return u + s, nil
}

func (l *lab) rxStats(b *testing.B) (pkts, bytes uint64) {
	var links []struct {
		Stats64 struct {
			Rx struct{ Packets, Bytes uint64 } `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(l.b.Run("ip", "-j", "-s", "link", "show", "dev", "eth0")), &links); err != nil || len(links) != 1 {
		b.Fatalf("ip -j -s link: %v", err)
	}
	return links[0].Stats64.Rx.Packets, links[0].Stats64.Rx.Bytes
}

// BenchmarkForward measures one port pair without emulation, on the embedded switch and,
// where p4c and BMv2 are installed, on BMv2 running the same plait.p4, side by side: a
// generator in host a sends frames of one size through the switch to host b as fast as
// it can; the figures are what b's interface received and what the switch process spent.
func BenchmarkForward(b *testing.B) {
	for _, target := range []string{"embedded", "bmv2"} {
		b.Run(target, func(b *testing.B) {
			if why := p4test.BMv2Missing(); target == "bmv2" && why != "" {
				// go test prints a skipped benchmark's reason only with -v.
				fmt.Printf("%s: skipped, no BMv2 figures: %s\n", b.Name(), why)
				b.SkipNow()
			}
			for _, size := range []int{64, 1514} {
				b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) { benchForward(b, target, size) })
			}
		})
	}
}

// startEmbedded runs the embedded switch in its own process in l.s on p1 and p2.
func startEmbedded(b *testing.B, l *lab) (pid int, r *rig) {
	sock := filepath.Join(b.TempDir(), "switch.sock")
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := l.s.Command(self)
	cmd.Env = append(os.Environ(), envSwitchPorts+"=p1,p2", envSwitchSock+"="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	r = &rig{client: p4v1.NewP4RuntimeClient(conn), info: p4info.Default()}
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			b.Fatal("switch process did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stream(b, 1)
	return cmd.Process.Pid, r
}

// startBMv2 runs simple_switch_grpc with plait.p4 in l.s on p1 and p2.
func startBMv2(b *testing.B, l *lab) (pid int, r *rig) {
	sw := p4test.StartBMv2(b, l.s, p4test.CompileP4(b, "../plait.p4"), 1, []string{"p1", "p2"})
	r = &rig{client: p4v1.NewP4RuntimeClient(sw.Conn), info: sw.Info}
	r.stream(b, 1)
	if err := sw.Push(context.Background()); err != nil {
		b.Fatalf("%v\n%s", err, sw.Output())
	}
	return sw.Pid, r
}

func benchForward(b *testing.B, target string, size int) {
	l := newLab(b)
	start := startEmbedded
	if target == "bmv2" {
		start = startBMv2
	}
	pid, r := start(b, l)
	if err := r.write(1, p4v1.Update_INSERT, r.entry(b, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2))); err != nil {
		b.Fatal(err)
	}

	var fd int
	inNS(b, l.a, func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index})
	})
	defer unix.Close(fd)
	frame := make([]byte, size)
	copy(frame, []byte{0x02, 0, 0, 0, 0, 0x99, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00})
	ip := frame[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	copy(ip[12:], []byte{10, 77, 0, 1, 10, 77, 0, 99})

	const batch = 64
	iov := make([]unix.Iovec, batch)
	hdrs := make([]benchMmsghdr, batch)
	for i := range hdrs {
		iov[i].Base = &frame[0]
		iov[i].SetLen(len(frame))
		hdrs[i].hdr.Iov = &iov[i]
		hdrs[i].hdr.SetIovlen(1)
	}
	blast := func(d time.Duration) (sent uint64) {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), batch, 0, 0, 0)
			if e == 0 {
				sent += uint64(n)
			}
		}
		return sent
	}
	blast(500 * time.Millisecond) // warm up
	p0, by0 := l.rxStats(b)
	c0, err := cpuTicks(pid)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	t0 := time.Now()
	sent := blast(3 * time.Second)
	el := time.Since(t0)
	b.StopTimer()
	time.Sleep(100 * time.Millisecond)
	p1, by1 := l.rxStats(b)
	c1, _ := cpuTicks(pid)
	pps := float64(p1-p0) / el.Seconds()
	mbps := float64(by1-by0) * 8 / el.Seconds() / 1e6
	cpu := float64(c1-c0) / 100 / el.Seconds() * 100 // percent of one core
	b.ReportMetric(pps, "pkt/s")
	b.ReportMetric(mbps, "Mbit/s")
	b.ReportMetric(float64(sent)/el.Seconds(), "offered-pkt/s")
	b.ReportMetric(cpu, "switch-cpu-%")
	if mbps > 0 {
		b.ReportMetric(cpu/mbps, "cpu-%/(Mbit/s)")
	}
}

// benchMmsghdr is struct mmsghdr.
type benchMmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}
