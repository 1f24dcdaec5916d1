package agent

import (
	"math"
	"math/bits"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/reseq"
	"github.com/plait/plait/wire"
)

// reseqLease is how long the receiver keeps sending a tunnel's packets to the agent's
// resequencer without a renewal (renewed every sample): an agent that dies blackholes
// the tunnel this long, then the receiver delivers directly again.
const reseqLease = 500 * time.Millisecond

// reseqRun is a tunnel's running resequencer, what it was opened on, and the highest
// base delay of its proof paths over topWindow.
type reseqRun struct {
	rs        *reseq.Resequencer
	dev, peer uint32
	mtu       int
	port      uint32
	tops      maxWindow
}

// topWindow is how long the delay the offsets hold packets to stays once a lower one is
// measured. TCP's estimators keep the least round trip they see (BBR's for 10 s, cubic's
// HyStart for the connection), so a delay that falls and rises again reads to them as a
// queue the flow built: on sweep-7-19 (a debug build printing it) the slowest path
// carried no data for a second early in a flow, the delay held to fell from its 112 ms
// to the next path's 74 ms for 0.4 s, and HyStart ended slow start at 37 packets when
// it rose again. As long as BBR's window, and the agent's for base delays.
const topWindow = baseWindow

// maxWindow is the greatest value added over the last topWindow.
type maxWindow struct {
	q []timed // falling values, oldest first
}

type timed struct {
	at uint64 // monotonic ns
	v  int64
}

// add adds v at now and returns the window's greatest value.
func (m *maxWindow) add(now uint64, v int64) int64 {
	for len(m.q) > 0 && m.q[len(m.q)-1].v <= v {
		m.q = m.q[:len(m.q)-1]
	}
	m.q = append(m.q, timed{now, v})
	for now-m.q[0].at > uint64(topWindow) {
		m.q = m.q[1:]
	}
	return m.q[0].v
}

// resequence starts, keeps or stops the tunnel's resequencer as its configuration says;
// called with a.mu held, after the device is set up (apply).
func (a *Agent) resequence(t *tunnel, dev uint32) error {
	run := a.reseqs[t.cfg.Id]
	if run != nil && (!t.cfg.Resequence || run.dev != dev || run.peer != t.devPeer || run.mtu != t.mtu || run.port != t.cfg.Port) {
		a.stopResequencer(t.cfg.Id, t.slot)
		run = nil
	}
	if !t.cfg.Resequence || run != nil {
		return nil
	}
	rs, err := reseq.Open(int(t.devPeer), t.devMAC, t.mtu, reseq.MaxHold, uint16(t.cfg.Port))
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "tunnel %d: %v", t.cfg.Id, err)
	}
	// The device's peer must run an XDP program to take the receiver's frames.
	if err := a.dp.AttachDevice(int(t.devPeer)); err != nil {
		rs.Close()
		return status.Errorf(codes.FailedPrecondition, "tunnel %d: resequencer: %v", t.cfg.Id, err)
	}
	go rs.Run()
	a.reseqs[t.cfg.Id] = &reseqRun{rs: rs, dev: dev, peer: t.devPeer, mtu: t.mtu, port: t.cfg.Port}
	return a.leaseResequencer(t.slot, dev)
}

func (a *Agent) leaseResequencer(slot, dev uint32) error {
	if err := a.dp.LeaseResequencer(slot, dev, uint64(monoNow())+uint64(reseqLease)); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

// stopResequencer hands the tunnel back to direct delivery, then stops its resequencer.
func (a *Agent) stopResequencer(id, slot uint32) {
	run := a.reseqs[id]
	if run == nil {
		return
	}
	if err := a.dp.LeaseResequencer(slot, 0, 0); err != nil {
		a.opts.log.Warn("end resequencer lease", "tunnel", id, "err", err)
	}
	run.rs.Close()
	if err := a.dp.Detach(datapath.HookDevice, int(run.peer)); err != nil {
		a.opts.log.Warn("detach resequencer", "tunnel", id, "err", err)
	}
	delete(a.reseqs, id)
}

// renewResequencers renews the leases and sets each hold bound from the paths' latest
// measurements; called every sample.
func (a *Agent) renewResequencers() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for id, run := range a.reseqs {
		t := a.tunnels[id]
		if t == nil {
			continue
		}
		if sp, ok := a.stats.spread(id); ok {
			// A connection that opened in the last second is a flow starting: its data
			// goes where the split sends a flow, not where the trickle before it went
			// (the agents' own reports, a few a second, keep a tunnel "steady" on one or
			// two paths). Held to those paths alone, the first three packets of a
			// window of ten reached TCP 44 ms before the rest on sweep-7-19, and
			// HyStart, its least round trip theirs, ended slow start at 37 packets.
			now := monoNow()
			if int64(now)-run.rs.Opened() < int64(time.Second) {
				sp.steady = false
			}
			run.rs.SetHold(sp.holdBound())
			run.rs.SetPaths(sp.proofPaths())
			// Only a steady flow's delays enter the window: a flow start's every path
			// heard from would keep an idle one's for 10 s (on three paths with one
			// idle, most holes on the lossy one then waited out the bound).
			top := sp.topDelay()
			if sp.steady {
				top = run.tops.add(now, top)
			}
			run.rs.SetOffsets(sp.offsets(top))
		}
		run.rs.SetRepairWait(a.repairWait(t), 1-t.cfg.WindowKept)
		if err := a.leaseResequencer(t.slot, run.dev); err != nil {
			a.opts.log.Warn("renew resequencer lease", "tunnel", id, "err", err)
		}
	}
}

// holdBound is how long a packet should wait for a hole before it: the spread of the
// smoothed one-way delays of the paths heard from in the last second (a packet
// sent after the missing one on the fastest path arrives that much earlier), or the
// latest any reordered packet arrived after the first packet beyond it over the agent's
// window (RFC 4737 lateness: the spread as the queues made it, packet by packet) when
// that is more; plus four times the largest jitter (RFC 3550's mean deviation; four of
// them cover the tail, as in TCP's RTO). It errs long: a hole
// that is lost is mostly proven so before the bound, while a packet released before its
// hole fills costs TCP a spurious recovery.
func (sp *pathSpread) holdBound() int64 {
	return int64(max(sp.hi-sp.lo, sp.late) + 4*sp.jitter)
}

// offsets are how long the resequencer holds each path's packets at least: by how much
// its base one-way delay is below top (the highest of the proof paths', topDelay, over
// topWindow); none with one proof path, which has nothing to wait for. Base delays, not
// smoothed ones: what queues add stays visible to TCP's delay-based estimators, and
// reaches it in order, which the resequencer sees to. They are in force before a flow
// starts: a flow whose first round trips are the fast path's sees the next ones rise by
// the skew, and HyStart ends its slow start there (at a window of 79 packets on
// sweep-3-15 when only data paths counted, offsets 0 until the first sample saw data).
// Once the tunnel has carried data for a second, a path the split leaves idle adds
// nothing once its delay has left the window (light load on the fastest path alone,
// probes elsewhere, keeps that path's delay); a single packet after a pause waits for
// the slowest path.
func (sp *pathSpread) offsets(top int64) (off [wire.MaxPaths]int64) {
	set := sp.proofPaths()
	if top == noTop || bits.OnesCount32(set) < 2 {
		return off // one path has nothing to wait for, whatever the window holds
	}
	for i, b := range sp.base {
		if set&(1<<i) != 0 && !math.IsInf(b, 1) {
			off[i] = top - int64(b)
		}
	}
	return off
}

// noTop is topDelay's "no proof path has a delay yet".
const noTop = math.MinInt64

// topDelay is the highest base one-way delay of the proof paths (ns), or noTop.
func (sp *pathSpread) topDelay() int64 {
	set := sp.proofPaths()
	top := int64(noTop)
	for i, b := range sp.base {
		if set&(1<<i) != 0 && !math.IsInf(b, 1) {
			top = max(top, int64(b))
		}
	}
	return top
}

// pathSpread is what the paths heard from in the last second (paths, bit i: path i)
// measured: their smoothed one-way delays (owd), the lowest and highest of them, the
// largest jitter, and the latest a reordered packet came over the agent's window; and
// which of them carried data (data), with their base one-way delays over that window;
// and whether the tunnel carried data in the second before the last one too (steady;
// renewResequencers clears it for a second after a connection opens).
type pathSpread struct {
	owd, base            [wire.MaxPaths]float64
	paths, data          uint32
	steady               bool
	lo, hi, jitter, late float64
}

// proofPaths are the paths a hole may still be on (bit i: path i), which must all have
// delivered beyond it before it is proven lost. While a flow starts, every path heard
// from (data or the agent's probes): the flow's first packets go to paths that carried
// none yet, and a slow one's first arrives last. Once the tunnel has carried data for a
// second, the paths that carried some in it: a path the split leaves idle delivers no
// seq (its probes carry none), and counting it would make every hole wait out the bound
// (on three BBR flows whose split left their fastest path idle, 1221 holes of 1468 each
// waited 200 ms). A split that turns to an idle path may then have a hole given up that
// the path's first packet fills late, once.
func (sp *pathSpread) proofPaths() uint32 {
	if sp.steady && sp.data != 0 {
		return sp.data
	}
	return sp.paths
}

// spread reads the tunnel's pathSpread; not ok until some path has delay samples.
func (s *sampler) spread(id uint32) (sp pathSpread, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hist[id]
	if h == nil || h.len() < 2 {
		return sp, false
	}
	last := h.at(h.len() - 1)
	ago := func(d time.Duration) int { // the newest sample at least d old (0: none that old)
		for i := h.len() - 1; i >= 0; i-- {
			if last.mono-h.at(i).mono >= uint64(d) {
				return i
			}
		}
		return 0
	}
	fi := ago(time.Second)
	first := h.at(fi)
	// Steady: data came in the second before the last one, not just in the one sample
	// interval a second ago. A flow that paused for a sample's 50 ms there had its
	// offsets back, held 90 ms, stalled its ACK clock, and paused again a second later
	// (fat+thin resequenced: five seconds at 5-50 Mbit/s with no loss).
	if fi > 0 {
		var before, at uint64
		earlier := h.at(ago(2 * time.Second))
		for i := range first.rx.Paths {
			before += earlier.rx.Paths[i].Packets
			at += first.rx.Paths[i].Packets
		}
		sp.steady = at > before
	}
	for i := range h.len() {
		sp.late = max(sp.late, float64(h.at(i).rx.LateNsMax))
	}
	sp.lo, sp.hi = math.Inf(1), math.Inf(-1)
	for i, p := range last.rx.Paths {
		if p.OwdCnt == first.rx.Paths[i].OwdCnt {
			continue
		}
		sp.paths |= 1 << i
		sp.owd[i] = p.OwdEwmaNs
		sp.base[i], _ = h.base(i) // +Inf before any sample
		if p.Packets > first.rx.Paths[i].Packets {
			sp.data |= 1 << i
		}
		sp.lo = min(sp.lo, p.OwdEwmaNs)
		sp.hi = max(sp.hi, p.OwdEwmaNs)
		sp.jitter = max(sp.jitter, p.JitterNs)
	}
	return sp, sp.paths != 0
}

// reseqStats describes the tunnel's resequencer, nil when it has none.
func (a *Agent) reseqStats(id uint32) *pb.ResequencerStats {
	a.mu.Lock()
	run := a.reseqs[id]
	a.mu.Unlock()
	if run == nil {
		return nil
	}
	c := &run.rs.C
	return &pb.ResequencerStats{
		InOrder: c.InOrder.Load(), Bound: c.Bound.Load(), Lost: c.Lost.Load(), Skipped: c.Skipped.Load(),
		Late: c.Late.Load(), Holes: c.Holes.Load(), Dropped: c.Dropped.Load(), Held: c.Held.Load(),
		HoldUs: float64(run.rs.Hold()) / 1e3, BusyNs: c.BusyNs.Load(), Passed: c.Passed.Load(), Flows: run.rs.Flows(), Ahead: c.Ahead.Load(),
	}
}
