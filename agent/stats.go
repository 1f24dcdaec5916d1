package agent

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
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

// base is path i's base one-way delay (ns): the least the receiver measured over the
// window the history holds; not ok before any.
func (h *history) base(i int) (ns float64, ok bool) {
	ns = math.Inf(1)
	for j := range h.len() {
		if r := &h.at(j).rx.Paths[i]; r.HasMin {
			ns, ok = min(ns, float64(r.OwdMinNs)), true
		}
	}
	return ns, ok
}

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
		est      []*pb.PathEstimate // the controller's, per path: sizes probe trains
		unused   []bool             // the split gives the path nothing
		resolved []bool             // the path's next hop is resolved
	}
	var todo []work
	for id, t := range s.a.tunnels {
		w := work{id, t.slot, t, make([]*pb.PathEstimate, len(t.paths)), make([]bool, len(t.paths)), make([]bool, len(t.paths))}
		for i, p := range t.paths {
			w.est[i] = p.est
			w.resolved[i] = p.hopMAC != nil
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
			if pr != nil {
				port, _ := w.t.peerPort(&tx, i)
				pr.aim(port)
			}
			switch {
			case pr == nil:
			case !w.resolved[i]:
				// A probe sent before the next hop answers ARP waits in the kernel's queue and
				// reads as a delay of a second or more: 1.25 s at a lab's start, which the
				// controller's first choice of paths and the agent's standing queue took.
			case prev != nil && tx.Bytes[i]-prev.tx.Bytes[i] >= uint64(w.t.mtu):
				// A trickle (less than one of the tunnel's full-sized packets a sample) is
				// no flow using the path: see lastSent.
				pr.lastSent = snap.mono
			default:
				pr.probe(snap.mono, w.est[i], w.unused[i] && s.watchers.Load() > 0)
			}
		}
		h.add(snap, capacity)
		s.mu.Unlock()
	}
}

// stats computes a tunnel's statistics over the last window, or, when since names the
// sample a previous report ended at and a newer one exists, from that sample on, so that
// a stream's reports tile time: by window length they overlapped whenever the sampler's
// ticks drifted against the stream's, and the controller counted a probe train twice.
// It returns the sample the report ends at.
func (s *sampler) stats(t *tunnel, paths []pathView, window time.Duration, since uint64) (*pb.TunnelStats, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pb.TunnelStats{TunnelId: t.cfg.Id, TimeUnixNano: time.Now().UnixNano(), Reorder: &pb.ReorderStats{}}
	h := s.hist[t.cfg.Id]
	if h == nil || h.len() == 0 {
		return out, since
	}
	last := h.at(h.len() - 1)
	now := monoNow()
	// The time the counters were read, not the report's: the controller sets one end's
	// sequence numbers against the other's (in flight).
	out.TimeUnixNano -= int64(now - last.mono)
	tile := since > 0 && last.mono > since
	first := 0
	for i := h.len() - 1; i >= 0; i-- {
		if tile && h.at(i).mono <= since || !tile && last.mono-h.at(i).mono >= uint64(window) {
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
		if i < len(t.paths) {
			port, learned := t.peerPort(&last.tx, i)
			ps.PeerPort, ps.PeerPortLearned = uint32(port), learned
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
		if b, ok := h.base(i); ok {
			ps.OwdBaseUs = b / 1e3
		}
		for j := first + 1; j < h.len(); j++ {
			if r := &h.at(j).rx.Paths[i]; r.HasMin {
				ps.OwdMinUs = nanMin(ps.OwdMinUs, float64(r.OwdMinNs)/1e3)
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
	return out, last.mono
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

// peerPort is the UDP port path i's packets and probes go to: on a tunnel with keys the
// one the receiver learned from the peer's packets on the path, while the path goes to the
// address they came from (sender.bpf.c's peer_port; learned is then true), else the
// tunnel's.
func (t *tunnel) peerPort(tx *datapath.SenderCounters, i int) (port uint16, learned bool) {
	if len(t.keys) > 0 {
		if p := tx.Peers[i].For(t.paths[i].remote); p != 0 {
			return p, true
		}
	}
	return uint16(t.cfg.Port), false
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
	return a.collect(req, time.Second, nil)
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
	since := map[uint32]uint64{} // per tunnel, the sample the last report ended at
	for {
		st, err := a.collect(req, period, since)
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

// collect reads every tunnel's statistics over the last interval, or from where since
// (when not nil) says the tunnel's previous report ended, which it then moves on.
func (a *Agent) collect(req *pb.StatsRequest, def time.Duration, since map[uint32]uint64) (*pb.Stats, error) {
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
		ts, end := a.stats.stats(t, views[i], window, since[t.cfg.Id])
		if since != nil {
			since[t.cfg.Id] = end
		}
		out.Tunnels = append(out.Tunnels, ts)
		out.Tunnels[i].Resequencer = a.reseqStats(t.cfg.Id)
		if t.cfg.Repair {
			rx, _ := a.stats.lastRx(t.cfg.Id)
			out.Tunnels[i].Repair = a.repairStats(t, rx)
		}
	}
	var err error
	if out.Sender, out.Receiver, err = a.dp.Verdicts(slots); err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	return out, nil
}
