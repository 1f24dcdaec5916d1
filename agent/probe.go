package agent

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/wire"
)

// A prober sends probes on one path: a Plait header with the probe flag from the path's
// local address out of its interface, so the peer's receiver measures the path's delay
// and sees it alive even when the split gives it no data. Now and then it sends a train
// of full-size probes back to back instead, whose spacing on arrival is the path's
// capacity: the controller learns what an idle path could carry without feeding it.
type probeKey struct {
	tunnel uint32
	path   int
}

// A path gets a probe when it has sent no data for probeIdle: often enough for the
// controller's liveness (a path is down after 120 ms of silence), rarely enough not to
// load a slow path the split uses (one packet every 60 ms on K1's 200 kbit/s path).
// Probe trains, trainLen probes of trainBytes, go on a path idle for trainEvery, at most
// every trainEvery: under 2 % of a 2 Mbit/s path, and never on a path the flow uses
// (trains on every 25 ms gap took a quarter of K1's slow path and filled its queue).
// A link that sends per TTI delivers a train over a whole number of ticks, so a train of
// five reads a 33 Mbit/s path at 20 or 40 Mbit/s. Where the controller knows a path's
// capacity the train is as long as trainSpan of it (up to trainMax probes; at 36 Mbit/s,
// 20), which a 1 ms tick then errs by a fifth at most. Only trains that meet the TTIs at every
// phase average out, and the sampler's period is a whole number of milliseconds, so each
// train leaves a random part of trainDither after its sample (without it, every train of
// a run met its link at one phase, and S1-4's 33 Mbit/s path read 23-28 Mbit/s in two
// runs of three). A path's first trainsQuick trains go trainQuick apart, and so do the
// first after a controller starts watching, and all while it has no capacity for a path
// it leaves out of the split, so that it has a few before it splits over the path.
// A link that keeps order under jitter moves a train's arrival span by up to the jitter's
// range (the controller's idle delay spread), in either direction: a probe held back holds
// those behind it, which then arrive together. So a train spans trainSpread times the
// spread where that is longer (five-probe trains read a 15 Mbit/s path with ±3.9 ms at
// 0.8-44 Mbit/s), and at most trainSpanMax: it ends before the next sample's lone probe
// goes, which must not queue behind it, or the spread would read the train.
// Once the capacity is known, trains come no closer than trainLoad of it allows: K1's
// 200 kbit/s path carries a train of five in 248 ms, and four a quarter second apart
// kept its queue 160-250 ms deep for the first second of a flow that came as the
// controller learnt the capacity (HyStart left slow start at cwnd 3-5; auto's K1 goodput
// 97.6 -> 94.8 % of ideal).
const (
	probeIdle    = 50 * time.Millisecond
	trainLen     = 5
	trainBytes   = 1200
	trainEvery   = time.Second
	trainQuick   = 250 * time.Millisecond
	trainsQuick  = 4
	trainDither  = 4 * time.Millisecond
	trainSpan    = 5 * time.Millisecond
	trainSpread  = 5
	trainSpanMax = 20 * time.Millisecond
	trainMax     = 100
	trainWire    = trainBytes + 42 // with UDP, IPv4 and Ethernet headers
	trainLoad    = 0.1
)

type prober struct {
	// lastSent is when (monotonic ns; 0: never) the latest sample saw a flow's data leave:
	// a full-sized packet's bytes at least. Less is a trickle (the agents' own reports
	// through the tunnel, a reverse flow's ACKs, a ping), no flow that uses the path.
	// Counted as data, the reports, a few a second over the split's paths, kept every
	// path of an idle tunnel from a second's quiet, and its capacities rested on its first
	// four trains: one run read an 18 Mbit/s path at 27 Mbit/s throughout.
	lastSent  uint64
	lastTrain uint64 // monotonic ns; 0: never
	trains    int

	mu     sync.Mutex // the socket and header, shared with a train's timer
	fd     int
	dst    unix.SockaddrInet4
	hdr    wire.Header
	key    *wire.Key // tags the probes when set
	timer  *time.Timer
	closed bool
}

// quickTrains gives every path its quick trains again: a controller that starts watching
// learns the paths' capacities within a second, not one train a second.
func (s *sampler) quickTrains() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pr := range s.probes {
		pr.trains = 0
	}
}

// prober returns path i's prober, made on first use; nil when its socket cannot be made.
func (s *sampler) prober(t *tunnel, i int, p *path) *prober {
	k := probeKey{t.cfg.Id, i}
	if pr := s.probes[k]; pr != nil {
		// Made before the tunnel's keys changed (SetKeys): made again with the new one.
		if pr.key == nil && len(t.keys) == 0 || pr.key != nil && len(t.keys) > 0 && *pr.key == t.keys[0] {
			return pr
		}
		pr.close()
	}
	pr, err := newProber(t, i, p)
	if err != nil {
		s.a.opts.log.Warn("probe", "tunnel", t.cfg.Id, "path", p.cfg.Name, "err", err)
		return nil
	}
	s.probes[k] = pr
	return pr
}

// trainLength is how many probes a train of the path takes to span trainSpan, or
// trainSpread times its delay spread (up to trainSpanMax), at its capacity (bit/s; 0:
// not known).
func trainLength(est *pb.PathEstimate) int {
	span := max(trainSpan.Seconds(), min(trainSpread*est.GetSpreadUs()/1e6, trainSpanMax.Seconds()))
	n := int(math.Ceil(est.GetCapacityBps()*span/(8*trainWire))) + 1
	return min(max(n, trainLen), trainMax)
}

// probe sends path's probe or train if it is due. est is the controller's (nil: none);
// waited: a controller watches and the split gives the path nothing.
func (pr *prober) probe(now uint64, est *pb.PathEstimate, waited bool) {
	idle := now - pr.lastSent
	if idle < uint64(probeIdle) {
		return
	}
	n := trainLength(est)
	every, quiet := pr.trainGap(n, est.GetCapacityBps(), waited)
	if idle >= uint64(quiet) && (pr.lastTrain == 0 || now-pr.lastTrain >= uint64(every)) {
		pr.lastTrain = now
		pr.trains++
		pr.mu.Lock()
		pr.timer = time.AfterFunc(rand.N(trainDither), func() { pr.send(n, trainBytes) })
		pr.mu.Unlock()
		return
	}
	size := wire.HeaderLen
	if pr.hdr.Flags&wire.FlagTelemetry != 0 {
		size += wire.TelemetryLen
	}
	if pr.key != nil {
		size += wire.TagLen + wire.TagCover
	}
	pr.send(1, size)
}

// trainGap is how long after the last train, of n probes, the next may go, and how long
// the path must have sent no data for it.
func (pr *prober) trainGap(n int, capacity float64, waited bool) (every, quiet time.Duration) {
	every, quiet = trainEvery, trainEvery
	switch {
	case waited && capacity == 0:
		// The controller waits for this path's trains before it splits over it (a flow's
		// ACKs or control connection may trickle on it, which need not keep them off).
		// Never on a path the split uses: trains every 250 ms are all of a 200 kbit/s path.
		every, quiet = trainQuick, probeIdle
	case pr.trains < trainsQuick:
		every, quiet = trainQuick, trainQuick
	}
	if capacity > 0 {
		span := float64(n*trainWire*8) / capacity // seconds on the wire
		every = max(every, time.Duration(span/trainLoad*float64(time.Second)))
	}
	return every, quiet
}

// send sends n probes of size bytes back to back. A train's probes carry one send time,
// the train's: they leave together, and the receiver counts every pair of them, those
// that arrive together too, since a link that sends in bursts delivers a train in a
// burst or two and only over the whole train do bytes over arrival span give its rate.
func (pr *prober) send(n, size int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return
	}
	buf := make([]byte, size)
	tel := pr.hdr.Flags&wire.FlagTelemetry != 0
	pr.hdr.TxNs = uint32(monoNow())
	for range n {
		pr.hdr.PathSeq++
		b := wire.AppendHeader(buf[:0], pr.hdr)
		if tel {
			b = wire.AppendTelemetry(b, wire.Telemetry{})
		}
		if pr.key != nil {
			// The tag covers the header and the zeroes after it (the probe's payload).
			tag, _ := wire.Tag(pr.key, buf, buf[len(b)+wire.TagLen:])
			binary.LittleEndian.PutUint64(buf[len(b):], tag)
		}
		// A full socket buffer or an unreachable peer only costs this probe.
		unix.Sendto(pr.fd, buf, unix.MSG_DONTWAIT, &pr.dst)
	}
}

// aim sends the path's probes to port from now on (tunnel.peerPort).
func (pr *prober) aim(port uint16) {
	pr.mu.Lock()
	pr.dst.Port = int(port)
	pr.mu.Unlock()
}

func newProber(t *tunnel, i int, p *path) (*prober, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.BindToDevice(fd, p.cfg.Interface); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to %s: %w", p.cfg.Interface, err)
	}
	// Probes leave from the tunnel's port, as the datapath's packets do: on a path idle
	// this way they keep a NAT's mapping for that port alive, which the peer's packets
	// come back through (WireGuard's persistent keepalive). The receiver takes what
	// arrives for the port before any socket (XDP), so this one receives nothing, and
	// the probers of several tunnels may share the port.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("SO_REUSEPORT: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: p.local.As4(), Port: int(t.cfg.Port)}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind to %s:%d: %w", p.local, t.cfg.Port, err)
	}
	// On a tunnel with telemetry the probes carry a block too: the receiver's mean delay
	// and mean switch queue then cover the same packets. Without it, the probes of a path
	// just left out of the split (quick, its queue drained) pulled the delay mean below the
	// queue mean of the data before them, and the controller read the path's base delay
	// as negative for its whole window.
	flags := uint8(wire.FlagProbe)
	if t.cfg.Telemetry {
		flags |= wire.FlagTelemetry
	}
	pr := &prober{
		fd:  fd,
		dst: unix.SockaddrInet4{Addr: p.remote.As4(), Port: int(t.cfg.Port)},
		// Probes are numbered on from the wall clock in ms: a restarted agent's probes
		// are ahead of its predecessor's (it sent fewer than one a ms), which an
		// authenticating receiver requires, taking older ones for replays.
		hdr: wire.Header{Version: wire.Version, Flags: flags, PathID: uint8(i), TunnelID: uint16(t.cfg.Id),
			PathSeq: uint32(time.Now().UnixMilli())},
	}
	if len(t.keys) > 0 {
		pr.hdr.Flags |= wire.FlagAuth
		pr.key = &t.keys[0]
	}
	return pr, nil
}

func (pr *prober) close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.timer != nil {
		pr.timer.Stop()
	}
	pr.closed = true
	unix.Close(pr.fd)
}
