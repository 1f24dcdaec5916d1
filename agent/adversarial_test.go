package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

// An adversary on the path links sends h2 forged Plait frames (from h1's side of the
// link, with a raw socket, so only h2's receiver judges them). Each attack must reach
// nothing on h2: not the UDP socket listening on h2's tunnel address, and no counter of
// h2's datapath except the drop counter of its reason. Between attacks h1's legitimate
// traffic still gets through. The agents run without their sampling loop, so no probe
// moves a counter while they are compared.
type siege struct {
	*pair
	listener int // UDP socket on 10.99.0.2:adversaryPort in h2
	slot     uint32
	macs     map[string][2]net.HardwareAddr // link -> h1's and h2's MAC
	legit    int
}

const adversaryPort = 9999

var (
	h1Tunnel = netip.MustParseAddr("10.99.0.1")
	h2Tunnel = netip.MustParseAddr("10.99.0.2")
)

func newSiege(t *testing.T, cfg func(c *pb.TunnelConfig)) *siege {
	t.Helper()
	p := linkPair(t, 2)
	s := &siege{pair: p, macs: map[string][2]net.HardwareAddr{}}
	for _, dev := range []string{"eth1", "eth2"} {
		s.macs[dev] = [2]net.HardwareAddr{mac(t, p.h1, dev), mac(t, p.h2, dev)}
	}
	// Were a forged packet handed to h2's stack, nothing else would stop it: no
	// reverse-path filter, and a default route for any source.
	p.h2.Run("sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0")
	p.h2.Run("ip", "route", "add", "default", "dev", "eth1")
	p.a1 = quietAgent(t, p.h1, "h1")
	p.a2 = quietAgent(t, p.h2, "h2")
	p.configureBoth(t, 2, func(c *pb.TunnelConfig, end int) {
		c.PeerAddress = peerAddress(end)
		if cfg != nil {
			cfg(c)
		}
	})
	s.slot = p.a2.tunnels[7].slot
	err := p.h2.Do(func() (err error) {
		s.listener, err = udpSocket(h2Tunnel, adversaryPort)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s.listener) })
	return s
}

// quietAgent is an agent core in ns without its sampling loop: no probes.
func quietAgent(t *testing.T, ns *nstest.NS, name string) *Agent {
	t.Helper()
	pin := filepath.Join("/sys/fs/bpf/plait", ns.Name)
	t.Cleanup(func() { os.RemoveAll(pin) })
	a, err := run(t, ns, func() (*Agent, error) {
		return New(WithPinDir(pin), WithStateFile(filepath.Join(t.TempDir(), name+".json")), WithLogger(slog.New(slog.DiscardHandler)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mac(t *testing.T, ns *nstest.NS, dev string) net.HardwareAddr {
	l, err := run(t, ns, func() (netlink.Link, error) { return linkByName(dev) })
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().HardwareAddr
}

func udpSocket(addr netip.Addr, port int) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr.As4(), Port: port}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// onCPU0 pins the calling (namespace-locked) thread to CPU 0: every packet of a test is
// then received on one CPU, whose per-CPU delay history the forged ones meet.
func onCPU0() error {
	var set unix.CPUSet
	set.Set(0)
	return unix.SchedSetaffinity(0, &set)
}

// received drains the listener and returns the payloads that arrived.
func (s *siege) received(t *testing.T, wait time.Duration) []string {
	t.Helper()
	var got []string
	deadline := time.Now().Add(wait)
	buf := make([]byte, 2048)
	for time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(s.listener, buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(buf[:n]))
	}
	return got
}

// legitimate sends n datagrams from h1's tunnel address to the listener through the
// tunnel and checks that all of them arrive.
func (s *siege) legitimate(t *testing.T, n int) {
	t.Helper()
	err := s.h1.Do(func() error {
		if err := onCPU0(); err != nil {
			return err
		}
		fd, err := udpSocket(h1Tunnel, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for range n {
			s.legit++
			msg := fmt.Sprintf("legit %d", s.legit)
			if err := unix.Sendto(fd, []byte(msg), 0, &unix.SockaddrInet4{Addr: h2Tunnel.As4(), Port: adversaryPort}); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.received(t, 200*time.Millisecond); len(got) != n {
		t.Fatalf("legitimate traffic: %d of %d datagrams arrived (%q)", len(got), n, got)
	}
}

// counts is everything h2's datapath counts.
type counts struct {
	Verdicts map[string]uint64
	Rx       datapath.RxTunnel
}

func (s *siege) counts(t *testing.T) counts {
	t.Helper()
	_, v, err := s.a2.dp.Verdicts([]uint32{s.slot})
	if err != nil {
		t.Fatal(err)
	}
	rx, err := s.a2.dp.ReadReceiver(s.slot, 1)
	if err != nil {
		t.Fatal(err)
	}
	return counts{v, rx}
}

// forgery is a Plait frame an adversary builds: by default a well-formed copy of what h1
// would send next on path 0 to the listener, with the sequence numbers h1's sender is at.
type forgery struct {
	link     string // link it is sent on, from h1's side
	src, dst netip.Addr
	hdr      wire.Header
	innerSrc netip.Addr
	tamper   func(frame []byte) // last changes to the finished frame
	payload  string
	key      *wire.Key // the tag's, when the forger tags
}

func (s *siege) forgery(t *testing.T) forgery {
	t.Helper()
	var sc datapath.SenderCounters
	sc, err := s.a1.dp.ReadSender(s.a1.tunnels[7].slot)
	if err != nil {
		t.Fatal(err)
	}
	return forgery{
		link: "eth1", src: netip.MustParseAddr("10.0.1.1"), dst: netip.MustParseAddr("10.0.1.2"),
		hdr: wire.Header{Version: wire.Version, TunnelID: 7, Seq: sc.Seq, PathSeq: sc.PathSeq[0],
			TxNs: uint32(monoNow())},
		innerSrc: h1Tunnel, payload: "forged",
	}
}

func (f forgery) frame(t *testing.T, s *siege) []byte {
	t.Helper()
	var inner []byte
	if f.hdr.Flags&wire.FlagProbe == 0 {
		inner = pkt.IPv4(f.innerSrc, h2Tunnel, pkt.ProtoUDP, 1, pkt.UDP(f.innerSrc, h2Tunnel, 4000, adversaryPort, []byte(f.payload)))
	} else {
		inner = make([]byte, 32)
	}
	body, err := wire.AppendEncap(nil, wire.Outer{Src: f.src, Dst: f.dst, Port: wire.Port, Key: f.key}, f.hdr, wire.Telemetry{}, inner)
	if err != nil {
		t.Fatal(err)
	}
	macs := s.macs[f.link]
	b := pkt.Ethernet(macs[1], macs[0], pkt.EtherTypeIPv4, body)
	if f.tamper != nil {
		f.tamper(b)
	}
	return b
}

// inject sends frames out of h1's end of a link with a raw socket: h1's stack and
// datapath play no part, h2's receiver sees them as from the wire.
func (s *siege) inject(t *testing.T, link string, frames [][]byte) {
	t.Helper()
	err := s.h1.Do(func() error {
		if err := onCPU0(); err != nil {
			return err
		}
		l, err := linkByName(link)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: l.Attrs().Index, Halen: 6}
		for _, f := range frames {
			copy(to.Addr[:], f[:6])
			// ENOBUFS: the peer's receive ring was full and the frame was dropped before
			// the receiver saw it (10^5 frames outrun a loaded CPU); send it again.
			err := unix.Sendto(fd, f, 0, to)
			for deadline := time.Now().Add(time.Second); err == unix.ENOBUFS && time.Now().Before(deadline); {
				time.Sleep(100 * time.Microsecond)
				err = unix.Sendto(fd, f, 0, to)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// attack sends frames, then checks that none reached h2's listener and that h2's
// counters moved only as want says (counter name -> increase; "held" is the receiver's
// count of packets passed on unmeasured), and that legitimate traffic still flows.
func (s *siege) attack(t *testing.T, link string, frames [][]byte, want map[string]uint64) {
	t.Helper()
	s.legitimate(t, 5)
	before := s.counts(t)
	s.inject(t, link, frames)
	if got := s.received(t, 100*time.Millisecond); len(got) > 0 {
		t.Errorf("%d forged datagrams reached h2's socket: %q", len(got), got)
	}
	after := s.counts(t)
	for name, n := range after.Verdicts {
		// ARP between the hosts is not IPv4: it passes, counted, whenever it comes.
		if d := n - before.Verdicts[name]; d != want[name] && name != "pass_not_ipv4" {
			t.Errorf("counter %s moved by %d, want %d", name, d, want[name])
		}
	}
	// Apart from the held counter, what the receiver measured is untouched.
	for i := range after.Rx.Paths {
		after.Rx.Paths[i].Held = before.Rx.Paths[i].Held
		after.Rx.Paths[i].DelayHeld = before.Rx.Paths[i].DelayHeld
	}
	if !reflect.DeepEqual(before.Rx, after.Rx) {
		t.Errorf("forged frames moved the receiver's measurements:\nbefore %+v\nafter  %+v", before.Rx, after.Rx)
	}
	s.legitimate(t, 5)
}

func repeat(n int, f func(i int) []byte) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// The peer and inner source checks, with authentication on and off: a forger who is not
// on the peer's addresses and interface, or who is but claims another path or a source
// the peer may not use, reaches nothing; the checks come before the tag's.
func TestForgedPacketsReachNothing(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			var cfg func(*pb.TunnelConfig)
			if !auth {
				cfg = noAuth
			}
			testForgedPacketsReachNothing(t, newSiege(t, cfg))
		})
	}
}

func noAuth(c *pb.TunnelConfig) { c.Auth = &pb.Auth{Disabled: true} }

func testForgedPacketsReachNothing(t *testing.T, s *siege) {
	const n = 20
	t.Run("forged outer source", func(t *testing.T) {
		f := s.forgery(t)
		f.src = netip.MustParseAddr("10.0.1.66")
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_unknown_peer": n})
	})
	t.Run("peer's address, foreign inner source", func(t *testing.T) {
		f := s.forgery(t)
		f.innerSrc = netip.MustParseAddr("192.0.2.66")
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_inner_source": n})
	})
	t.Run("peer's address, h2's own tunnel address as inner source", func(t *testing.T) {
		f := s.forgery(t)
		f.innerSrc = h2Tunnel
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_inner_source": n})
	})
	t.Run("guessed tunnel id", func(t *testing.T) {
		// Every id, from an address that is not the peer's: the right one is still no
		// way in.
		f := s.forgery(t)
		f.src = netip.MustParseAddr("10.0.1.66")
		frames := repeat(1<<16, func(i int) []byte { f.hdr.TunnelID = uint16(i); return f.frame(t, s) })
		s.attack(t, "eth1", frames, map[string]uint64{"drop_unknown_tunnel": 1<<16 - 1, "drop_unknown_peer": 1})
	})
	t.Run("header path id naming another path", func(t *testing.T) {
		f := s.forgery(t)
		f.hdr.PathID = 1
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_path_mismatch": n})
	})
	t.Run("a path's addresses on another path's link", func(t *testing.T) {
		f := s.forgery(t)
		f.hdr.PathID, f.src, f.dst = 1, netip.MustParseAddr("10.0.2.1"), netip.MustParseAddr("10.0.2.2")
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_wrong_iface": n})
	})
	t.Run("forged probe from another address", func(t *testing.T) {
		f := s.forgery(t)
		f.src, f.hdr.Flags = netip.MustParseAddr("10.0.1.66"), wire.FlagProbe
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_unknown_peer": n})
	})
}

// With authentication, even a forger on the peer's own addresses, path and interface
// reaches nothing without the key, and nobody reaches anything with a captured packet.
func TestForgedPacketsReachNothingWithAuth(t *testing.T) {
	s := newSiege(t, nil)
	const n = 20
	guessed := &wire.Key{1, 2, 3}
	t.Run("untagged, from the peer's addresses", func(t *testing.T) {
		f := s.forgery(t)
		s.attack(t, "eth1", repeat(n, func(int) []byte { return f.frame(t, s) }), map[string]uint64{"drop_no_tag": n})
	})
	for _, c := range []struct {
		name   string
		forge  func(f *forgery)
		frames int
	}{
		{"tagged under a guessed key", func(*forgery) {}, n},
		{"forged path_seq jump", func(f *forgery) { f.hdr.PathSeq += 1 << 22 }, 1},
		{"forged send time", func(f *forgery) { f.hdr.TxNs -= 1 << 30 }, 4},
		{"forged probe", func(f *forgery) { f.hdr.Flags |= wire.FlagProbe }, n},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := s.forgery(t)
			f.key = guessed
			c.forge(&f)
			s.attack(t, "eth1", repeat(c.frames, func(i int) []byte {
				g := f
				g.hdr.Seq, g.hdr.PathSeq = f.hdr.Seq+uint32(i), f.hdr.PathSeq+uint32(i)
				return g.frame(t, s)
			}), map[string]uint64{"drop_bad_tag": uint64(c.frames)})
		})
	}
	t.Run("replayed captured packet", func(t *testing.T) {
		captured := s.capture(t)
		s.attack(t, "eth1", repeat(n, func(int) []byte { return captured }), map[string]uint64{"drop_replay": n})
	})
	t.Run("tampered header bit", func(t *testing.T) {
		captured := s.capture(t)
		var frames [][]byte
		// Every bit of seq, path_seq and tx_ns (flags, path and tunnel id are checked
		// before the tag).
		for bit := 32; bit < 8*wire.HeaderLen; bit++ {
			f := bytes.Clone(captured)
			f[plaitOffset+bit/8] ^= 1 << (bit % 8)
			frames = append(frames, f)
		}
		s.attack(t, "eth1", frames, map[string]uint64{"drop_bad_tag": uint64(len(frames))})
	})
}

// 10^5 random frames and mutations of captured ones, on h2's path link with
// authentication on: none reaches h2's socket or moves a measurement; legitimate traffic
// flows before and after.
func TestRandomAndMutatedFramesReachNothing(t *testing.T) {
	s := newSiege(t, nil)
	captured := s.capture(t)
	rng := rand.New(rand.NewPCG(28, 5))
	frames := make([][]byte, 100000)
	for i := range frames {
		var f []byte
		if rng.IntN(10) == 0 {
			f = make([]byte, 60+rng.IntN(200))
			for j := range f {
				f[j] = byte(rng.Uint32())
			}
			if rng.IntN(2) == 0 {
				binary.BigEndian.PutUint16(f[12:], pkt.EtherTypeIPv4)
			}
		} else {
			f = bytes.Clone(captured)
			for m := 1 + rng.IntN(3); m > 0; m-- {
				f[14+rng.IntN(len(f)-14)] ^= byte(1 + rng.IntN(255))
			}
		}
		copy(f[:6], captured[:6]) // to h2's MAC
		frames[i] = f
	}
	s.legitimate(t, 5)
	before := s.counts(t)
	s.inject(t, "eth1", frames)
	if got := s.received(t, 200*time.Millisecond); len(got) > 0 {
		t.Errorf("%d of the frames reached h2's socket: %q", len(got), got[:min(len(got), 5)])
	}
	after := s.counts(t)
	if after.Verdicts["decap"] != before.Verdicts["decap"] {
		t.Errorf("%d frames were decapsulated", after.Verdicts["decap"]-before.Verdicts["decap"])
	}
	for i := range after.Rx.Paths {
		after.Rx.Paths[i].Held = before.Rx.Paths[i].Held
		after.Rx.Paths[i].DelayHeld = before.Rx.Paths[i].DelayHeld
	}
	if !reflect.DeepEqual(before.Rx, after.Rx) {
		t.Errorf("the frames moved the receiver's measurements:\nbefore %+v\nafter  %+v", before.Rx, after.Rx)
	}
	var drops uint64
	for name, n := range after.Verdicts {
		if strings.HasPrefix(name, "drop_") {
			drops += n - before.Verdicts[name]
		}
	}
	t.Logf("%d frames: %d counted drops, the rest passed as not Plait (%v)", len(frames), drops, after.Verdicts)
	s.legitimate(t, 5)
}

// plaitOffset is where the Plait header starts in a UDP-encapsulated frame.
const plaitOffset = 14 + 20 + 8

// capture sends one legitimate datagram and returns the frame h1's sender put on eth1
// for it, as an observer on the link sees it.
func (s *siege) capture(t *testing.T) []byte {
	t.Helper()
	var frame []byte
	err := s.h1.Do(func() error {
		if err := onCPU0(); err != nil {
			return err
		}
		l, err := linkByName("eth1")
		if err != nil {
			return err
		}
		const ethPAll = 0x0300 // htons(ETH_P_ALL)
		tap, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, ethPAll)
		if err != nil {
			return err
		}
		defer unix.Close(tap)
		if err := unix.Bind(tap, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: l.Attrs().Index}); err != nil {
			return err
		}
		unix.SetsockoptTimeval(tap, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})
		fd, err := udpSocket(h1Tunnel, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Sent until one leaves on eth1 (the split may put it on eth2).
		buf := make([]byte, 2048)
		for try := 0; try < 8 && frame == nil; try++ {
			s.legit++
			if err := unix.Sendto(fd, []byte(fmt.Sprintf("legit %d", s.legit)), 0, &unix.SockaddrInet4{Addr: h2Tunnel.As4(), Port: adversaryPort}); err != nil {
				return err
			}
			for deadline := time.Now().Add(50 * time.Millisecond); time.Now().Before(deadline); {
				n, _, err := unix.Recvfrom(tap, buf, unix.MSG_DONTWAIT)
				if err == unix.EAGAIN {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					return err
				}
				if n > plaitOffset+wire.HeaderLen && buf[14+9] == pkt.ProtoUDP && binary.BigEndian.Uint16(buf[14+22:]) == wire.Port {
					frame = bytes.Clone(buf[:n])
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if frame == nil {
		t.Fatal("captured no Plait frame on eth1")
	}
	s.received(t, 100*time.Millisecond) // the original, delivered
	return frame
}

// Without authentication a forger on the peer's own addresses gets its packet delivered,
// but cannot move the measurements: a path_seq or seq jump, or a send time far from the
// path's delay, is not believed on one packet.
func TestForgedMeasurementsAreNotBelieved(t *testing.T) {
	s := newSiege(t, noAuth)
	// jumped checks that a jump was held: passed on, counted as held, and nothing else
	// measured, then or for the genuine packets after it.
	jumped := func(t *testing.T, f forgery) {
		t.Helper()
		s.legitimate(t, 5)
		before := s.counts(t)
		s.inject(t, "eth1", [][]byte{f.frame(t, s)})
		if got := s.received(t, 100*time.Millisecond); len(got) != 1 {
			t.Errorf("the packet from the peer's addresses was not passed on (%q)", got)
		}
		after := s.counts(t)
		b, a := before.Rx.Paths[0], after.Rx.Paths[0]
		a.Held--
		after.Rx.Paths[0] = a
		if !reflect.DeepEqual(before.Rx, after.Rx) {
			t.Errorf("a jump moved the receiver's measurements:\nbefore %+v\nafter  %+v", before.Rx, after.Rx)
		}
		s.legitimate(t, 5)
		later := s.counts(t)
		if l := later.Rx.Paths[0]; l.Late != b.Late || later.Rx.Reordered != before.Rx.Reordered || l.Lost() != b.Lost() || l.Resyncs != b.Resyncs {
			t.Errorf("after the jump, genuine packets count late %d -> %d, reordered %d -> %d, lost %d -> %d, resyncs %d -> %d",
				b.Late, l.Late, before.Rx.Reordered, later.Rx.Reordered, b.Lost(), l.Lost(), b.Resyncs, l.Resyncs)
		}
	}
	t.Run("path_seq jump", func(t *testing.T) {
		f := s.forgery(t)
		f.hdr.PathSeq += 1 << 22
		jumped(t, f)
	})
	t.Run("seq jump", func(t *testing.T) {
		f := s.forgery(t)
		f.hdr.Seq -= 1 << 20
		jumped(t, f)
	})
	t.Run("send time", func(t *testing.T) {
		// Three in a row, one short of what re-anchors a path's delay, with the sequence
		// numbers the sender is at: they are delivered, their delay is not used.
		s.legitimate(t, 5)
		before := s.counts(t)
		var frames [][]byte
		for i := range 3 {
			f := s.forgery(t)
			f.hdr.Seq, f.hdr.PathSeq = f.hdr.Seq+uint32(i), f.hdr.PathSeq+uint32(i)
			f.hdr.TxNs += 1 << 30 // a second in the future: a negative delay
			frames = append(frames, f.frame(t, s))
		}
		s.inject(t, "eth1", frames)
		if got := s.received(t, 100*time.Millisecond); len(got) != 3 {
			t.Errorf("%d of 3 packets from the peer's addresses were passed on", len(got))
		}
		b, a := before.Rx.Paths[0], s.counts(t).Rx.Paths[0]
		if a.DelayHeld-b.DelayHeld != 3 || a.OwdSumNs != b.OwdSumNs || a.OwdCnt != b.OwdCnt || a.OwdMinNs != b.OwdMinNs || a.OwdEwmaNs != b.OwdEwmaNs {
			t.Errorf("forged send times: %d held; delay sum %d -> %d, samples %d -> %d, min %d -> %d, smoothed %.0f -> %.0f",
				a.DelayHeld-b.DelayHeld, b.OwdSumNs, a.OwdSumNs, b.OwdCnt, a.OwdCnt, b.OwdMinNs, a.OwdMinNs, b.OwdEwmaNs, a.OwdEwmaNs)
		}
		// Untagged, they do not keep the path alive either (TestHeldDelayIsStillAnArrival).
		if a.LastRxNs != b.LastRxNs {
			t.Errorf("forged send times moved the path's last arrival %d -> %d", b.LastRxNs, a.LastRxNs)
		}
	})
}

// With tags, a packet whose send time is far from the path's delay is still the peer's:
// its delay is held, but the path was heard, which its liveness counts (K1's 200 kbit/s
// path, its queue growing by 60 ms a packet, had its samples held and read as silent
// while it delivered).
func TestHeldDelayIsStillAnArrival(t *testing.T) {
	s := newSiege(t, nil)
	s.legitimate(t, 5)
	before := s.counts(t)
	f := s.forgery(t)
	f.key = &testKey
	f.hdr.TxNs += 1 << 30
	s.inject(t, "eth1", [][]byte{f.frame(t, s)})
	if got := s.received(t, 100*time.Millisecond); len(got) != 1 {
		t.Errorf("%d of 1 tagged packets from the peer were passed on", len(got))
	}
	b, a := before.Rx.Paths[0], s.counts(t).Rx.Paths[0]
	if a.DelayHeld-b.DelayHeld != 1 || a.OwdCnt != b.OwdCnt {
		t.Errorf("a send time a second off: %d held, delay samples %d -> %d; want 1 held, none taken", a.DelayHeld-b.DelayHeld, b.OwdCnt, a.OwdCnt)
	}
	if a.LastRxNs <= b.LastRxNs {
		t.Errorf("the path's last arrival stayed at %d after a tagged packet with a held delay", b.LastRxNs)
	}
}
