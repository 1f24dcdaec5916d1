package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/wire"
)

// The datapath keeps cumulative counters and, per measurement epoch, extremes (minimum
// delay, deepest queue, latest reordered packet). The sampler closes an epoch every tick
// and keeps a ring of snapshots, so a statistic over any window up to baseWindow is the
// difference of two snapshots (sums, rates, means) or a fold over the epochs in between
// (extremes) — exact, lock-free on the datapath side, and independent of how many
// clients ask at which interval.
const baseWindow = 10 * time.Second

type snapshot struct {
	mono uint64 // CLOCK_MONOTONIC, ns, when read
	rx   datapath.RxTunnel
	tx   datapath.SenderCounters
}

type history struct {
	snaps []snapshot // ring, oldest first from start
	start int
}

func (h *history) add(s snapshot, capacity int) {
	if len(h.snaps) < capacity {
		h.snaps = append(h.snaps, s)
		return
	}
	h.snaps[h.start] = s
	h.start = (h.start + 1) % len(h.snaps)
}

func (h *history) len() int           { return len(h.snaps) }
func (h *history) at(i int) *snapshot { return &h.snaps[(h.start+i)%len(h.snaps)] }

type sampler struct {
	a *Agent

	mu     sync.Mutex
	hist   map[uint32]*history // by tunnel id
	probes map[probeKey]*prober
	// watchers counts the statistics streams (a controller's): a path whose capacity the
	// controller does not know gets its trains quick while one watches.
	watchers atomic.Int32
}

func newSampler(a *Agent) *sampler {
	return &sampler{a: a, hist: map[uint32]*history{}, probes: map[probeKey]*prober{}}
}

// forget drops a tunnel's history after it is reconfigured or removed.
func (s *sampler) forget(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hist, id)
	for k, p := range s.probes {
		if k.tunnel == id {
			p.close()
			delete(s.probes, k)
		}
	}
}

func monoNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// sample reads every tunnel's counters, closes its epoch, and probes paths that carried
// no data for a while so that their delay and liveness stay measured.
func (s *sampler) sample() {
	s.a.mu.Lock()
	type work struct {
		id, slot uint32
		t        *tunnel
		capacity []float64 // the controller's, per path: sizes probe trains
		unused   []bool    // the split gives the path nothing
	}
	var todo []work
	for id, t := range s.a.tunnels {
		w := work{id, t.slot, t, make([]float64, len(t.paths)), make([]bool, len(t.paths))}
		for i, p := range t.paths {
			w.capacity[i] = p.est.GetCapacityBps()
			switch t.cfg.Mode {
			case pb.Mode_MODE_WRR:
				w.unused[i] = i < len(t.cfg.Weights) && t.cfg.Weights[i] == 0
			case pb.Mode_MODE_EDPF:
				w.unused[i] = p.est.GetRateBps() == 0
			}
		}
		todo = append(todo, w)
	}
	s.a.mu.Unlock()

	capacity := int(baseWindow/s.a.opts.sampleInterval) + 1
	for _, w := range todo {
		epoch, err := s.a.dp.NextEpoch(uint16(w.id))
		if err != nil {
			continue
		}
		rx, err1 := s.a.dp.ReadReceiver(w.slot, epoch)
		tx, err2 := s.a.dp.ReadSender(w.slot)
		if err1 != nil || err2 != nil {
			s.a.opts.log.Warn("read datapath", "tunnel", w.id, "err", fmt.Sprint(err1, err2))
			continue
		}
		snap := snapshot{mono: monoNow(), rx: rx, tx: tx}
		s.mu.Lock()
		h := s.hist[w.id]
		if h == nil {
			h = &history{}
			s.hist[w.id] = h
		}
		var prev *snapshot
		if h.len() > 0 {
			prev = h.at(h.len() - 1)
		}
		for i, p := range w.t.paths {
			pr := s.prober(w.t, i, p)
			switch {
			case pr == nil:
			case prev != nil && tx.Packets[i] != prev.tx.Packets[i]:
				pr.lastSent = snap.mono
			default:
				pr.probe(snap.mono, w.capacity[i], w.unused[i] && s.watchers.Load() > 0)
			}
		}
		h.add(snap, capacity)
		s.mu.Unlock()
	}
}

// stats computes a tunnel's statistics over the last window.
func (s *sampler) stats(t *tunnel, paths []pathView, window time.Duration) *pb.TunnelStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pb.TunnelStats{TunnelId: t.cfg.Id, TimeUnixNano: time.Now().UnixNano(), Reorder: &pb.ReorderStats{}}
	h := s.hist[t.cfg.Id]
	if h == nil || h.len() == 0 {
		return out
	}
	last := h.at(h.len() - 1)
	now := monoNow()
	// The time the counters were read, not the report's: the controller sets one end's
	// sequence numbers against the other's (in flight).
	out.TimeUnixNano -= int64(now - last.mono)
	first := 0
	for i := h.len() - 1; i >= 0; i-- {
		if last.mono-h.at(i).mono >= uint64(window) {
			first = i
			break
		}
	}
	f := h.at(first)
	dt := float64(last.mono-f.mono) / 1e9
	out.IntervalS = dt
	out.Signals, out.Triggered = last.tx.Signaled, t.triggered
	var lost uint64
	for i := range t.statPaths(&last.rx, len(paths)) {
		v := pathView{name: fmt.Sprintf("path%d", i), up: true}
		if i < len(paths) {
			v = paths[i]
		}
		lr, fr := &last.rx.Paths[i], &f.rx.Paths[i]
		ps := &pb.PathStats{
			Index: uint32(i), Name: v.name, Up: v.up, Weight: v.share,
			TxPackets: last.tx.Packets[i], TxBytes: last.tx.Bytes[i], NextPathSeq: last.tx.PathSeq[i],
			RxPackets: lr.Packets, RxBytes: lr.Bytes, Lost: lr.Lost(), Late: lr.Late, Probes: lr.Probes, Duplicates: lr.Dups,
			MaxPathSeq:    lr.MaxPathSeq,
			OwdSmoothedUs: lr.OwdEwmaNs / 1e3, JitterUs: lr.JitterNs / 1e3, Hops: lr.Hops,
			OwdMinUs: math.NaN(), OwdMeanUs: math.NaN(), OwdBaseUs: math.NaN(), QueueUs: math.NaN(), LastRxAgeMs: math.NaN(),
		}
		lost += ps.Lost
		if dt > 0 {
			ps.TxBps = float64(last.tx.Bytes[i]-f.tx.Bytes[i]) * 8 / dt
			ps.RxBps = float64(lr.Bytes-fr.Bytes) * 8 / dt
		}
		if n := lr.OwdCnt - fr.OwdCnt; n > 0 {
			ps.OwdMeanUs = float64(lr.OwdSumNs-fr.OwdSumNs) / float64(n) / 1e3
		}
		if n := lr.TelPackets - fr.TelPackets; n > 0 {
			ps.QueueUs = float64(lr.QueueUsSum-fr.QueueUsSum) / float64(n)
		}
		if n := lr.DispNs - fr.DispNs; n > 0 {
			ps.DispersionBps = float64(lr.DispBytes-fr.DispBytes) * 8e9 / float64(n)
		}
		ps.DispersionSamples = lr.DispSamples - fr.DispSamples
		if lr.LastRxNs > 0 && now > lr.LastRxNs {
			ps.LastRxAgeMs = float64(now-lr.LastRxNs) / 1e6
		}
		for j := 0; j < h.len(); j++ {
			r := &h.at(j).rx.Paths[i]
			if !r.HasMin {
				continue
			}
			owd := float64(r.OwdMinNs) / 1e3
			ps.OwdBaseUs = nanMin(ps.OwdBaseUs, owd)
			if j > first {
				ps.OwdMinUs = nanMin(ps.OwdMinUs, owd)
				ps.MaxQdepth = max(ps.MaxQdepth, r.QdepthMax)
			}
		}
		out.Paths = append(out.Paths, ps)
	}
	rx := &last.rx
	ro := out.Reorder
	ro.Received, ro.Reordered, ro.ThreeReordered = rx.Received, rx.Reordered, rx.ThreeReordered
	ro.InterPath, ro.IntraPath, ro.UnknownExtent = rx.InterPath, rx.IntraPath+lost, rx.UnknownExtent
	ro.ExtentHist = rx.ExtentHist[:]
	if rx.Received > 0 {
		ro.ReorderedRatio = float64(rx.Reordered) / float64(rx.Received)
	}
	var measured uint64
	for _, n := range rx.ExtentHist {
		measured += n
	}
	if measured > 0 {
		ro.LateTimeMeanUs = float64(rx.LateNsSum) / float64(measured) / 1e3
	}
	for j := first + 1; j < h.len(); j++ {
		ro.LateTimeMaxUs = max(ro.LateTimeMaxUs, float64(h.at(j).rx.LateNsMax)/1e3)
	}
	return out
}

// pathView is what stats reports of a path's configuration, read under the agent's lock.
type pathView struct {
	name  string
	up    bool
	share float64
}

func (t *tunnel) view() []pathView {
	shares := t.shares()
	v := make([]pathView, len(t.paths))
	for i, p := range t.paths {
		v[i] = pathView{p.cfg.Name, p.up, shares[i]}
	}
	return v
}

// statPaths is how many paths a tunnel reports: its own (own, as read under the agent's
// lock), or for a receive-only tunnel every path id up to the highest the receiver has seen.
func (t *tunnel) statPaths(rx *datapath.RxTunnel, own int) int {
	if !t.cfg.ReceiveOnly {
		return own
	}
	n := 0
	for i, p := range rx.Paths {
		if p.Started || p.Probes > 0 {
			n = i + 1
		}
	}
	return n
}

func nanMin(a, b float64) float64 {
	if math.IsNaN(a) || b < a {
		return b
	}
	return a
}

// GetStats returns statistics over the last interval_ms (default 1 s).
func (a *Agent) GetStats(_ context.Context, req *pb.StatsRequest) (*pb.Stats, error) {
	return a.collect(req, time.Second)
}

// WatchStats sends statistics over each interval_ms (default 100 ms) until ctx ends.
func (a *Agent) WatchStats(ctx context.Context, req *pb.StatsRequest, send func(*pb.Stats) error) error {
	period := time.Duration(req.IntervalMs) * time.Millisecond
	if period == 0 {
		period = 100 * time.Millisecond
	}
	if period < a.opts.sampleInterval {
		return invalid("interval %v is shorter than the agent's sampling interval %v", period, a.opts.sampleInterval)
	}
	a.stats.quickTrains()
	a.stats.watchers.Add(1)
	defer a.stats.watchers.Add(-1)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		st, err := a.collect(req, period)
		if err != nil {
			return err
		}
		if err := send(st); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (a *Agent) collect(req *pb.StatsRequest, def time.Duration) (*pb.Stats, error) {
	window := time.Duration(req.IntervalMs) * time.Millisecond
	if window == 0 {
		window = def
	}
	if window > baseWindow {
		return nil, invalid("interval %v is longer than the %v the agent keeps", window, baseWindow)
	}
	a.mu.Lock()
	var tunnels []*tunnel
	var slots []uint32
	var views [][]pathView
	if req.TunnelId != 0 {
		t, ok := a.tunnels[req.TunnelId]
		if !ok {
			a.mu.Unlock()
			return nil, status.Errorf(codes.NotFound, "no tunnel %d on this host", req.TunnelId)
		}
		tunnels = append(tunnels, t)
	} else {
		for _, id := range a.ids() {
			tunnels = append(tunnels, a.tunnels[id])
		}
	}
	for _, t := range tunnels {
		slots = append(slots, t.slot)
		views = append(views, t.view())
	}
	a.mu.Unlock()

	out := &pb.Stats{}
	for i, t := range tunnels {
		out.Tunnels = append(out.Tunnels, a.stats.stats(t, views[i], window))
		out.Tunnels[i].Resequencer = a.reseqStats(t.cfg.Id)
	}
	var err error
	if out.Sender, out.Receiver, err = a.dp.Verdicts(slots); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return out, nil
}

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
// Once the capacity is known, trains come no closer than trainLoad of it allows: K1's
// 200 kbit/s path carries a train of five in 248 ms, and four a quarter second apart
// kept its queue 160-250 ms deep for the first second of a flow that came as the
// controller learnt the capacity (HyStart left slow start at cwnd 3-5; auto's K1 goodput
// 97.6 -> 94.8 % of ideal).
const (
	probeIdle   = 50 * time.Millisecond
	trainLen    = 5
	trainBytes  = 1200
	trainEvery  = time.Second
	trainQuick  = 250 * time.Millisecond
	trainsQuick = 4
	trainDither = 4 * time.Millisecond
	trainSpan   = 5 * time.Millisecond
	trainMax    = 40
	trainWire   = trainBytes + 42 // with UDP, IPv4 and Ethernet headers
	trainLoad   = 0.1
)

type prober struct {
	lastSent  uint64 // monotonic ns of the latest sample that saw data leave; 0: never
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

// trainLength is how many probes a train of a path of this capacity (bit/s; 0: not
// known) takes to span trainSpan.
func trainLength(capacity float64) int {
	n := int(math.Ceil(capacity*trainSpan.Seconds()/(8*trainWire))) + 1
	return min(max(n, trainLen), trainMax)
}

// probe sends path's probe or train if it is due. capacity is the controller's estimate
// (0: not known); waited: a controller watches and the split gives the path nothing.
func (pr *prober) probe(now uint64, capacity float64, waited bool) {
	idle := now - pr.lastSent
	if idle < uint64(probeIdle) {
		return
	}
	n := trainLength(capacity)
	every, quiet := pr.trainGap(n, capacity, waited)
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
