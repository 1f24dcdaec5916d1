package controller

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/model"
)

// direction is one way through a tunnel: packets from one end (an agent's eBPF sender, or
// a split switch) to the other end's receiver. The controller estimates and steers each
// direction on its own; a tunnel's reverse direction carries its ACKs.
type direction struct {
	tunnel *Tunnel
	from   string // sending agent (or the host a split switch serves)
	to     string // receiving agent
	split  *splitTarget

	paths    []string // names, in path-id order
	ests     []*pathEstimator
	opt      *optimizer
	writeErr string      // why the last write of the split failed; "" once one succeeds
	retryAt  []time.Time // per path of a split switch: when it was last given a share to retry
	// ackReason says why the direction's ACKs take the path they do (routeACKs).
	ackReason string

	override string    // auto, rr, wrr, edpf
	manual   []float64 // operator's weights, with override wrr

	tx, rx     *pb.TunnelStats // latest from each end
	prevRx     *pb.TunnelStats
	repairs    []lossCount // the receiver's losses (lost) and repairs (got) per report, over lossWindow
	current    target      // what the sender holds, as far as the controller knows
	pushed     bool        // current was written since the sender (re)connected
	goodput    float64     // delivered, last interval
	reordered  float64
	interPath  float64
	lastUpdate time.Time
}

// splitTarget is a split switch that serves a direction in place of a host sender.
type splitTarget struct {
	sw    *switchConn
	split *Split
}

func newDirection(t *Tunnel, from, to string, now time.Time) *direction {
	d := &direction{tunnel: t, from: from, to: to, override: "auto"}
	if t.Mode != "auto" {
		d.override = t.Mode
		d.manual = t.Weights
	}
	d.opt = newOptimizer(0, now)
	return d
}

func (d *direction) name() string { return fmt.Sprintf("tunnel %d %s->%s", d.tunnel.ID, d.from, d.to) }

// setPaths (re)sizes the direction's state when the sender tells its paths.
func (d *direction) setPaths(names []string, now time.Time) {
	if equalStrings(d.paths, names) {
		return
	}
	d.paths = names
	d.ests = make([]*pathEstimator, len(names))
	for i := range d.ests {
		d.ests[i] = newPathEstimator()
	}
	d.opt = newOptimizer(len(names), now)
	d.current, d.pushed = target{}, false
	if d.manual != nil && len(d.manual) != len(names) {
		d.manual = nil
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A split switch's paths carry no probes: silence on one says nothing while the whole
// direction is idle. So a path counts as silent by how much longer it has been quiet
// than the direction's latest arrival, one never heard from is given a share (its own
// packets then measure it), and a dead one is given a share again every splitRetry, for
// splitHold, to find out whether it came back.
const (
	splitDownAfter = 500 * time.Millisecond
	splitRetry     = 2 * time.Second
	splitHold      = time.Second
)

func (d *direction) splitAges(ages []time.Duration, now time.Time) {
	latest := time.Duration(-1)
	for _, a := range ages {
		if a >= 0 && (latest < 0 || a < latest) {
			latest = a
		}
	}
	if len(d.retryAt) != len(ages) {
		d.retryAt = make([]time.Time, len(ages))
	}
	for i, a := range ages {
		e := d.ests[i]
		switch {
		case a < 0 || now.Sub(d.retryAt[i]) < splitHold:
			ages[i] = 0
		case !e.est.Alive && now.Sub(e.downSince) >= splitRetry:
			d.retryAt[i] = now
			ages[i] = 0
		case a-latest > splitDownAfter:
			ages[i] = DownAfter + time.Millisecond
		default:
			ages[i] = 0
		}
	}
}

// observe folds the receiver's latest statistics into the path estimates, and into the
// trace when one is kept, and reports whether any path's liveness changed.
func (d *direction) observe(now time.Time, trace *tracer) (livenessChanged bool) {
	if d.rx == nil || len(d.ests) == 0 {
		return false
	}
	var txBps []float64
	if d.tx != nil {
		for _, p := range d.tx.Paths {
			txBps = append(txBps, p.TxBps)
		}
	}
	var goodput float64
	ages := make([]time.Duration, min(len(d.ests), len(d.rx.Paths)))
	for i := range ages {
		ages[i] = -1
		if ms := d.rx.Paths[i].LastRxAgeMs; !math.IsNaN(ms) {
			ages[i] = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if d.split != nil {
		d.splitAges(ages, now)
	}
	busy := func(e *pathEstimator) bool { return e.est.Alive && e.est.Busy }
	nBusy := 0
	for _, e := range d.ests {
		if busy(e) {
			nBusy++
		}
	}
	for i, e := range d.ests {
		if i >= len(ages) {
			break
		}
		p := d.rx.Paths[i]
		age := ages[i]
		o := Observation{
			At: now, Interval: time.Duration(d.rx.IntervalS * float64(time.Second)),
			RxBps: p.RxBps, RxBytes: p.RxBytes, RxPackets: p.RxPackets, Lost: p.Lost, Late: p.Late,
			OwdMin: p.OwdMinUs, OwdMean: p.OwdMeanUs, Queue: p.QueueUs,
			DispBps: p.DispersionBps, DispN: p.DispersionSamples, RxAge: age, Jitter: p.JitterUs,
		}
		if i < len(txBps) {
			o.TxBps = txBps[i]
		}
		o.InFlight = d.inFlight(i)
		was := e.est.Alive
		e.update(o)
		if trace != nil {
			trace.path(d, i, o, e)
		}
		livenessChanged = livenessChanged || was != e.est.Alive
		goodput += p.RxBps
	}
	d.goodput = goodput
	if d.prevRx != nil && d.rx.Reorder != nil && d.prevRx.Reorder != nil {
		r, p := d.rx.Reorder, d.prevRx.Reorder
		if n := sub(r.Received, p.Received); n > 0 {
			d.reordered = float64(sub(r.Reordered, p.Reordered)) / float64(n)
			d.interPath = float64(sub(r.InterPath, p.InterPath)) / float64(n)
		}
	}
	d.countRepairs(now)
	d.prevRx = d.rx
	d.lastUpdate = now
	return livenessChanged
}

// inFlight is how many bytes the sender has put on path i that the receiver has not yet
// received (nor seen skipped): its next path_seq, moved on by the path's send rate to the
// moment the receiver read its counters, less the highest path_seq the receiver has.
// Unlike a one-way delay, which tells of the packets that arrive now and so of the path
// as it was one path delay ago, this counts what was sent up to the last report. The
// agents' clocks are taken to agree, as one-way delays take them (one host's namespaces,
// or hosts under NTP or PTP): a millisecond off is a millisecond of queue. NaN when an
// end has not reported the path.
func (d *direction) inFlight(i int) float64 {
	if d.tx == nil || i >= len(d.tx.Paths) || i >= len(d.rx.Paths) || d.rx.Paths[i].RxPackets == 0 || d.tx.Paths[i].TxPackets == 0 {
		return math.NaN()
	}
	tx, rx := d.tx.Paths[i], d.rx.Paths[i]
	size := float64(tx.TxBytes) / float64(tx.TxPackets)
	// Sequence numbers wrap at 2^32; the difference of two recent ones does not. A
	// million packets apart, the two ends count different lives of the path (an agent
	// that restarted without its pins).
	n := int32(tx.NextPathSeq - rx.MaxPathSeq - 1)
	if n > 1<<20 || n < -1<<20 {
		return math.NaN()
	}
	dt := float64(d.rx.TimeUnixNano-d.tx.TimeUnixNano) / 1e9
	return max(0, float64(n)+tx.TxBps/8/size*dt) * size
}

// countRepairs keeps the receiver's path_seqs lost (asked for, or left to TCP as
// congestion) and repairs taken per report, over lossWindow.
func (d *direction) countRepairs(now time.Time) {
	r, p := d.rx.GetRepair(), d.prevRx.GetRepair()
	if r == nil || p == nil {
		d.repairs = nil
		return
	}
	lost := sub(r.Asked+r.Congested, p.Asked+p.Congested)
	if got := sub(r.Received, p.Received); lost > 0 || got > 0 {
		d.repairs = append(d.repairs, lossCount{now, got, lost})
	}
	d.repairs = slices.DeleteFunc(d.repairs, func(l lossCount) bool { return now.Sub(l.at) > lossWindow })
}

// resequenced: the direction's receiving agent hands its stack the tunnel's packets in
// order (its statistics carry its resequencer's), so TCP sees the paths as one.
func (d *direction) resequenced() bool { return d.rx.GetResequencer() != nil }

// unrepaired is the share of the paths' random losses that reaches TCP. Resequenced,
// a repaired packet fills its hole before TCP sees one: TCP meets only what was not
// repaired. Without the resequencer, the packets behind a hole show TCP the loss (its
// SACKs) a round trip before the repair can come, so every loss counts.
func (d *direction) unrepaired() float64 {
	if !d.resequenced() {
		return 1
	}
	var got, lost uint64
	for _, l := range d.repairs {
		got, lost = got+l.got, lost+l.lost
	}
	if lost == 0 {
		return 1
	}
	return 1 - min(float64(got)/float64(lost), 1)
}

// decide runs the optimiser for the next interval.
func (d *direction) decide(now time.Time, tcp model.TCP) target {
	if len(d.ests) == 0 {
		return target{}
	}
	tcp.Resequenced = d.resequenced()
	// The resequencer sees every data packet; without it the flows are not counted.
	if f := d.rx.GetResequencer().GetFlows(); f > 1 && !math.IsInf(f, 1) {
		tcp.Flows = f
	}
	d.opt.seen = d.unrepaired()
	if d.tx != nil && d.split == nil {
		d.opt.sawTriggered(now, d.tx.Triggered)
	}
	d.opt.probed = d.split == nil
	t := d.opt.decide(now, d.ests, d.override, d.manual, tcp)
	// The receiving agents hold their waits for repairs to what the window cut they
	// spare would cost.
	t.kept = tcp.CC.Beta()
	return t
}

// view describes the direction for the operator API.
func (d *direction) view() *pb.Direction {
	v := &pb.Direction{
		TunnelId: d.tunnel.ID, From: d.from, To: d.to, Control: d.override,
		GoodputBps: d.goodput, PredictedBps: d.opt.predict, Reordered: d.reordered, InterPath: d.interPath,
		Reason: d.opt.reason,
	}
	if d.current.ackPath != "" && d.ackReason != "" {
		v.Reason += "; " + d.ackReason
	}
	if o := d.opt; o.signals > 0 {
		v.Reason += fmt.Sprintf("; %d congestion signals (%d from the sender's trigger), the last %.1f s ago at a mean queue of %.0f ms",
			o.signals, o.byTrigger, d.lastUpdate.Sub(o.signalAt).Seconds(), o.signalQ/1e3)
	}
	if d.writeErr != "" {
		v.Reason = "cannot write the split (" + d.writeErr + "); wanted: " + v.Reason
	}
	if d.override == "wrr" && d.manual != nil {
		v.Control = "manual weights"
	}
	if d.split != nil {
		v.From = d.from + " (split switch " + d.split.sw.cfg.Name + ")"
	}
	v.Mode = modeString(d.current.mode)
	shares := d.current.shares()
	for i, name := range d.paths {
		e := d.ests[i].est
		_, queue, _ := e.arrival()
		pv := &pb.PathView{
			Name: name, Up: e.Alive, CapacityBps: e.Capacity, OwdUs: e.Base, QueueUs: queue,
			Loss: e.Loss, Late: e.Late,
		}
		if !e.CapacityKnown {
			pv.CapacityBps = math.NaN()
		}
		if i < len(shares) {
			pv.Weight = shares[i]
		}
		if d.opt.set != nil && i < len(d.opt.set) {
			pv.InUse = d.opt.set[i] && e.Alive
		}
		if i < len(d.current.est) {
			pv.DelayParamUs = d.current.est[i].DelayUs
		}
		if d.tx != nil && i < len(d.tx.Paths) {
			pv.TxBps = d.tx.Paths[i].TxBps
		}
		if d.rx != nil && i < len(d.rx.Paths) {
			pv.RxBps = d.rx.Paths[i].RxBps
		}
		v.Paths = append(v.Paths, pv)
	}
	return v
}

func modeString(m pb.Mode) string {
	if m == pb.Mode_MODE_UNSPECIFIED {
		return "-"
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "MODE_"))
}
