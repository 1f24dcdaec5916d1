package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/reseq"
	"github.com/plait/plait/wire"
)

// Repair (docs/datapath.md#repair): a packet lost on one path is resent by the sender's
// agent on the tunnel's lowest-delay path, so that the flow's TCP does not take a path's
// random loss for congestion of the whole aggregate. The sender keeps copies of what it
// sent on each path (repairtap.go); the receiver's XDP program reports each gap in a
// path's path_seq, and the receiving agent asks the peer for the missing packets over
// the tunnel's report channel (feedback.go), unless the path holds a standing queue (the
// loss is then congestion, TCP's to see); the sender resends them marked as repairs
// (wire.PathRepair) with their seq and path_seq on the path the request names, and the
// receiver takes each once and gives it to the resequencer, whose hole it fills.
//
// repairMaxRun is the longest gap asked for: a longer one is an outage or a queue that
// overflowed, which TCP must see, not random loss.
const repairMaxRun = 64

// repairs is the agent's repair state.
type repairs struct {
	mu    sync.Mutex
	fbs   map[uint32]*feedback       // the tunnels' report channels (RunLiveness opens them)
	taps  map[uint32]map[tapKey]*tap // by tunnel id
	count map[uint32]*repairCounters // by tunnel id
	gaps  *datapath.GapReader        // open while a tunnel repairs
	// A tunnel that repairs keeps copies from its first packet: a flow's first random
	// losses come in its slow start, where TCP pays most for one (LTE-4: the one loss
	// that went to TCP while the taps opened on the first request cut the window to
	// 168-300 packets of the 520 the paths hold, and cubic regrew it for seconds). One
	// whose taps kept quietAfter packets since the peer last asked closes them (quiet),
	// as its paths lose too little to pay for a copy of every packet (3-5 µs of the
	// sending host), until the peer asks again; that loss goes to TCP while they open.
	quiet      map[uint32]bool
	quietAfter uint64
	arm        atomic.Bool // a request found its tunnel's taps closed: open them (tendTaps)
}

// quietAfter: a path that loses 0.05 % (the least loss the controller is to see) of a
// quarter of a flow loses 8 of so many packets on average; one that loses none of them
// loses too little to matter.
const quietAfter = 1 << 16

type tapKey struct {
	ifindex, mtu int
	port         uint16
	ipEncap      bool
}

// tapKey is the tap that keeps the tunnel's packets sent on path p.
func (t *tunnel) tapKey(p *path) tapKey {
	return tapKey{p.ifindex, p.mtu, uint16(t.cfg.Port), t.cfg.Encap == pb.Encap_ENCAP_IP}
}

type repairCounters struct {
	asked, congested, resent, missing atomic.Uint64
	askedAt                           uint64 // packets the taps had kept at the last request; r.mu
}

func newRepairs() *repairs {
	return &repairs{fbs: map[uint32]*feedback{}, taps: map[uint32]map[tapKey]*tap{}, count: map[uint32]*repairCounters{}, quiet: map[uint32]bool{}, quietAfter: quietAfter}
}

// setFeedback records tunnel id's report channel (nil: it has none).
func (r *repairs) setFeedback(id uint32, f *feedback) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f == nil {
		delete(r.fbs, id)
	} else {
		r.fbs[id] = f
	}
}

// counters are tunnel id's counters, made on first use; called with r.mu held.
func (r *repairs) counters(id uint32) *repairCounters {
	c := r.count[id]
	if c == nil {
		c = &repairCounters{}
		r.count[id] = c
	}
	return c
}

// repair starts, keeps or stops the tunnel's taps and the gap reader as its
// configuration says; called with a.mu held, in the agent's namespace (apply).
func (a *Agent) repair(t *tunnel) error {
	id := t.cfg.Id
	if !t.cfg.Repair {
		a.stopRepair(id)
		return nil
	}
	r := a.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gaps == nil {
		g, err := a.dp.Gaps()
		if err != nil {
			return status.Errorf(codes.Internal, "tunnel %d: repair: %v", id, err)
		}
		r.gaps = g
		go a.readGaps(g)
	}
	c := r.counters(id)
	want := map[tapKey]bool{}
	if !r.quiet[id] {
		for _, p := range t.paths {
			want[t.tapKey(p)] = true
		}
	}
	taps := r.taps[id]
	if len(taps) == 0 {
		taps = map[tapKey]*tap{}
		r.taps[id] = taps
		c.askedAt = 0 // new taps count from 0
	}
	for k, tp := range taps {
		if !want[k] {
			tp.close()
			delete(taps, k)
		}
	}
	for k := range want {
		if taps[k] != nil {
			continue
		}
		tp, err := openTap(k.ifindex, k.mtu, uint16(id), k.port, k.ipEncap)
		if err != nil {
			return status.Errorf(codes.FailedPrecondition, "tunnel %d: repair: %v", id, err)
		}
		taps[k] = tp
	}
	return nil
}

// tendTaps closes the taps of the tunnels that kept quietAfter packets since their peer
// last asked for a repair, and opens those of quiet tunnels whose peer asked since the
// last call; called in the agent's namespace (Run), where the taps' sockets must be made.
func (a *Agent) tendTaps() {
	r := a.rep
	r.mu.Lock()
	for id, taps := range r.taps {
		// A tap closed for a path the tunnel no longer has takes its count with it: kept
		// can fall below askedAt.
		if kept, at := keptBy(taps), r.counters(id).askedAt; kept > at && kept-at > r.quietAfter {
			r.closeTaps(id)
			r.quiet[id] = true
		}
	}
	r.mu.Unlock()
	if !r.arm.Swap(false) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, t := range a.tunnels {
		if err := a.repair(t); err != nil {
			a.opts.log.Warn("repair: open taps", "tunnel", t.cfg.Id, "err", err)
		}
	}
}

// keptBy is how many packets taps have kept.
func keptBy(taps map[tapKey]*tap) (n uint64) {
	for _, tp := range taps {
		n += tp.kept.Load()
	}
	return n
}

// stopRepair closes the tunnel's taps; called with a.mu held. The counters stay while
// the tunnel does (forgetRepair).
func (a *Agent) stopRepair(id uint32) {
	r := a.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeTaps(id)
	delete(r.quiet, id)
}

// closeTaps closes tunnel id's taps; called with r.mu held.
func (r *repairs) closeTaps(id uint32) {
	for _, tp := range r.taps[id] {
		tp.close()
	}
	delete(r.taps, id)
}

// forgetRepair stops the repair of a tunnel that is removed, counters and all.
func (a *Agent) forgetRepair(id uint32) {
	a.stopRepair(id)
	a.rep.mu.Lock()
	delete(a.rep.count, id)
	a.rep.mu.Unlock()
}

// closeRepairs stops every tunnel's repair and the gap reader (Close).
func (a *Agent) closeRepairs() {
	a.rep.mu.Lock()
	var ids []uint32
	for id := range a.rep.taps {
		ids = append(ids, id)
	}
	a.rep.mu.Unlock()
	for _, id := range ids {
		a.stopRepair(id)
	}
	a.rep.mu.Lock()
	if a.rep.gaps != nil {
		a.rep.gaps.Close()
		a.rep.gaps = nil
	}
	a.rep.mu.Unlock()
}

// readGaps asks for every gap the receiver reports until the reader is closed.
func (a *Agent) readGaps(g *datapath.GapReader) {
	for {
		gap, err := g.Read()
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err == nil {
			a.ask(gap)
		}
	}
}

// ask asks the tunnel's peer to resend the packets of gap, unless the loss looks like
// congestion (repairView), which TCP must see; then the resequencer is told to wait for
// the repairs.
func (a *Agent) ask(gap datapath.Gap) {
	a.mu.Lock()
	var t *tunnel
	for _, x := range a.tunnels {
		if x.slot == gap.Slot && x.asksRepairs() {
			t = x
		}
	}
	if t == nil || gap.Count > repairMaxRun {
		a.mu.Unlock()
		return
	}
	id, keys, run := t.cfg.Id, t.keys, a.reseqs[t.cfg.Id]
	a.mu.Unlock()
	a.rep.mu.Lock()
	f, c := a.rep.fbs[id], a.rep.counters(id)
	a.rep.mu.Unlock()
	via, congested := a.stats.repairView(id, gap)
	if congested {
		c.congested.Add(uint64(gap.Count))
		return
	}
	if f == nil || f.ask(request{path: gap.Path, via: via, first: gap.First, count: uint16(gap.Count)}, keys) != nil {
		return
	}
	c.asked.Add(uint64(gap.Count))
	if run != nil {
		run.rs.ExpectRepairs(int64(monoNow()) + run.rs.RepairWait())
	}
}

// A loss on a path that holds a standing queue, met at the queue's top, is congestion,
// for TCP to see; a queue that drains between bursts holds none. CoDel's rule (RFC 8289)
// tells a standing queue: its delay stayed above a target for a whole interval, with RFC
// 8289's target and interval, the target raised to four jitters or one full packet's
// serialization at the path's rate when those are more (RFC 8289 §4.4 for slow links).
// A drop-tail queue drops only when full, so the packet after its drop queued behind a
// full queue; a random loss meets the queue wherever a flow's sawtooth has it, and one
// that met it more than a target below its top is not the queue's.
const (
	codelTarget   = 5 * time.Millisecond
	codelInterval = 100 * time.Millisecond
	// A queue's top is where its delay stood in the deepest tenth of the samples that
	// carried data over the window, not the deepest sample: one stray reading (1.4 s on a
	// 100 ms queue) made every overflow look like random loss. A queue that overflows
	// spends longer than that at its top (cubic's plateau, BBR's full pipe).
	topQuantile = 0.9
)

// repairView is what the receiver's measurements of the tunnel's paths say about
// repairing gap now: via, the path whose smoothed one-way delay is lowest now, queueing
// included (0xff: none measured), for the repair to take; and congested, when the gap's
// path holds a standing queue (the minimum delay of every measurement epoch of the last
// codelInterval stood more than the target above the path's minimum over the agent's
// window) and the packet that showed the gap met that queue within the target of its
// top over the window (topQuantile).
func (s *sampler) repairView(id uint32, gap datapath.Gap) (via uint8, congested bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	via = 0xff
	h := s.hist[id]
	if h == nil || h.len() < 2 {
		return via, false
	}
	last := h.at(h.len() - 1)
	best := math.Inf(1)
	for i, p := range last.rx.Paths {
		if p.OwdCnt == 0 {
			continue
		}
		// Heard from in the last second: a path that went silent is no way to send.
		if last.mono-p.LastRxNs < uint64(time.Second) && p.OwdEwmaNs < best {
			via, best = uint8(i), p.OwdEwmaNs
		}
		if i != int(gap.Path) {
			continue
		}
		base, standing := math.Inf(1), math.Inf(1)
		var bytes, span uint64
		var delays []float64 // the path's smoothed delay at each sample it carried data in
		for k := range h.len() {
			q := h.at(k)
			qp := &q.rx.Paths[i]
			if k > 0 && qp.Packets > h.at(k - 1).rx.Paths[i].Packets {
				delays = append(delays, qp.OwdEwmaNs)
			}
			if !qp.HasMin {
				continue
			}
			m := float64(qp.OwdMinNs)
			base = min(base, m)
			if last.mono-q.mono < uint64(codelInterval) {
				standing = min(standing, m)
			}
			if age := last.mono - q.mono; age <= uint64(time.Second) && age > span {
				bytes, span = p.Bytes-qp.Bytes, age
			}
		}
		target := max(float64(codelTarget), 4*p.JitterNs)
		if bytes > 0 {
			target = max(target, 1500*float64(span)/float64(bytes))
		}
		if math.IsInf(standing, 0) || standing-base <= target || len(delays) == 0 {
			continue
		}
		slices.Sort(delays)
		congested = float64(gap.OwdNs) >= delays[int(topQuantile*float64(len(delays)-1))]-target
	}
	return via, congested
}

// resend answers the peer's request: each packet asked for that a tap still keeps goes
// again, as a repair, on the tunnel's lowest-delay path.
func (a *Agent) resend(id uint32, q request) {
	a.mu.Lock()
	t := a.tunnels[id]
	if t == nil || !t.cfg.Repair || int(q.path) >= len(t.paths) {
		a.mu.Unlock()
		return
	}
	from := t.paths[q.path]
	vi := int(q.via)
	if vi >= len(t.paths) || !t.paths[vi].usable() {
		vi = a.fastestPath(t)
	}
	if vi < 0 {
		a.mu.Unlock()
		return
	}
	via := *t.paths[vi]
	// Where the sender's program sends the path's packets: a NAT may have moved the port.
	port := uint16(t.cfg.Port)
	if tx, err := a.dp.ReadSender(t.slot); err == nil {
		port, _ = t.peerPort(&tx, vi)
	}
	var key *wire.Key
	if len(t.keys) > 0 {
		key = &t.keys[0]
	}
	a.rep.mu.Lock()
	src, dst := a.rep.taps[id][t.tapKey(from)], a.rep.taps[id][t.tapKey(&via)]
	c := a.rep.counters(id)
	c.askedAt = keptBy(a.rep.taps[id])
	closed := src == nil || dst == nil
	if closed {
		c.missing.Add(uint64(q.count))
		if a.rep.quiet[id] {
			delete(a.rep.quiet, id)
			a.rep.arm.Store(true)
		}
	}
	a.rep.mu.Unlock()
	a.mu.Unlock()
	if closed {
		return
	}
	buf := make([]byte, 0, src.frame)
	for i := range min(uint32(q.count), repairMaxRun) {
		b, ok := src.copyOut(buf[:0], q.path, q.first+i)
		if ok && asRepair(b, &via, uint8(vi), port, key) == nil && dst.send(b) == nil {
			c.resent.Add(1)
		} else {
			c.missing.Add(1)
		}
	}
}

// fastestPath is the usable path of lowest one-way delay as this end's receiver measures
// it (the other direction: the best guess when the request names no usable path), or as
// the controller estimates it when none is measured; -1 when no path is usable. Called
// with a.mu held.
func (a *Agent) fastestPath(t *tunnel) int {
	sp, measured := a.stats.spread(t.cfg.Id)
	best, bestDelay := -1, math.Inf(1)
	for i, p := range t.paths {
		if !p.usable() {
			continue
		}
		d := p.est.GetDelayUs()
		if measured {
			d = math.Inf(1)
			if sp.paths&(1<<i) != 0 {
				d = sp.owd[i]
			}
		}
		if best < 0 || d < bestDelay {
			best, bestDelay = i, d
		}
	}
	return best
}

// asRepair makes the kept frame b (virtio_net_hdr first) a repair on path via (index
// vi): its Ethernet and outer IPv4 addresses, the UDP port the path's packets go to, the
// path id with wire.PathRepair, a fresh send time and, on an authenticated tunnel, the
// tag under key.
func asRepair(b []byte, via *path, vi uint8, port uint16, key *wire.Key) error {
	off := keptPlaitOffset(b)
	if off < 0 || len(via.hopMAC) != 6 {
		return errors.New("not a Plait frame, or no next hop")
	}
	f := b[vnetHdrLen:]
	copy(f[0:6], via.hopMAC)
	copy(f[6:12], via.localMAC)
	ip := f[14:34]
	src, dst := via.local.As4(), via.remote.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], wire.Checksum(ip))
	if ip[9] == 17 {
		binary.BigEndian.PutUint16(f[14+20+2:], port)
	}
	h := b[off:]
	h[1] = vi | wire.PathRepair
	binary.BigEndian.PutUint32(h[12:], uint32(monoNow()))
	if h[0]&wire.FlagAuth == 0 {
		return nil
	}
	if key == nil {
		return errors.New("tagged frame, no key")
	}
	at := off + wire.HeaderLen
	if h[0]&wire.FlagTelemetry != 0 {
		at += wire.TelemetryLen
	}
	if len(b) < at+wire.TagLen {
		return errors.New("truncated frame")
	}
	tag, err := wire.Tag(key, h, b[at+wire.TagLen:])
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[at:], tag)
	return nil
}

// repairWait is how long the tunnel's resequencer waits for a repair of a hole proven
// lost before the first repair has come (0: repair is off): a request over the slowest
// path the receiver hears and its repair over the fastest, with four jitters; measured
// from the hole's first sighting, as the resequencer then measures repairs. Called with
// a.mu held.
func (a *Agent) repairWait(t *tunnel) int64 {
	if !t.asksRepairs() {
		return 0
	}
	sp, ok := a.stats.spread(t.cfg.Id)
	if !ok {
		return reseq.MaxHold
	}
	return int64(sp.hi + sp.lo + 4*sp.jitter)
}

// asksRepairs: the tunnel's receiver asks for repairs of its paths' losses, which spare
// its flows a window cut. A flow that keeps its window at a loss (BBR) is spared none:
// its holes would only wait, and TCP repairs its losses as soon.
func (t *tunnel) asksRepairs() bool { return t.cfg.Repair && t.cfg.WindowKept < 1 }

// repairStats describes the tunnel's repair, nil when it does not repair.
func (a *Agent) repairStats(t *tunnel, rx *datapath.RxTunnel) *pb.RepairStats {
	if !t.cfg.Repair {
		return nil
	}
	out := &pb.RepairStats{}
	if rx != nil {
		out.Gaps, out.Received = rx.Gaps, rx.Repairs
	}
	a.rep.mu.Lock()
	if c := a.rep.count[t.cfg.Id]; c != nil {
		out.Asked, out.Resent, out.Missing, out.Congested = c.asked.Load(), c.resent.Load(), c.missing.Load(), c.congested.Load()
	}
	for _, tp := range a.rep.taps[t.cfg.Id] {
		out.Kept += tp.kept.Load()
		out.TapBusyNs += tp.busyNs.Load()
	}
	a.rep.mu.Unlock()
	a.mu.Lock()
	run := a.reseqs[t.cfg.Id]
	a.mu.Unlock()
	if run != nil {
		out.WaitUs = float64(run.rs.RepairWait()) / 1e3
	}
	return out
}

// lastRx is the tunnel's latest receiver snapshot.
func (s *sampler) lastRx(id uint32) (*datapath.RxTunnel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hist[id]
	if h == nil || h.len() == 0 {
		return nil, fmt.Errorf("tunnel %d not sampled yet", id)
	}
	rx := h.at(h.len() - 1).rx
	return &rx, nil
}
