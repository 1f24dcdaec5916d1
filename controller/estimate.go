package controller

import (
	"math"
	"slices"
	"time"
)

// Observation is what one stats message says about one path in one direction: the
// sender's side from the sending agent, the rest from the receiving agent. Delays are in
// µs; NaN means "not measured in this interval".
type Observation struct {
	At        time.Time
	Interval  time.Duration
	TxBps     float64
	RxBps     float64 // delivery rate, wire bytes
	RxBytes   uint64  // cumulative, wire bytes
	RxPackets uint64  // cumulative
	Lost      uint64  // cumulative
	Late      uint64  // cumulative
	OwdMin    float64
	OwdMean   float64
	Queue     float64 // switch-stamped queueing delay; NaN without telemetry
	DispBps   float64 // packet-pair capacity estimate
	DispN     uint64
	RxAge     time.Duration // since the last packet (data or probe) arrived; <0: never
	InFlight  float64       // bytes sent on the path and not yet received; NaN if unknown
	// OthersBusy: another path of the direction stood queued at its last report, so the
	// flow asks more than the split gives the paths that do not.
	OthersBusy bool
}

// Estimate is the controller's belief about one path in one direction.
type Estimate struct {
	Alive         bool
	Capacity      float64 // bit/s on the wire; 0 until known
	CapacityKnown bool
	Base          float64 // propagation one-way delay, µs
	Queue         float64 // queueing delay now, µs
	Owd           float64 // mean one-way delay of the last interval, µs (NaN if no packets)
	Loss          float64 // random loss: fraction lost while the path held no standing queue
	LossKnown     bool    // Loss rests on enough packets to act on
	Late          float64 // fraction of the path's packets late behind its own, smoothed
	Busy          bool    // a standing queue: the path delivers at its capacity
	RxPackets     uint64  // packets in the last interval
	// Ahead is the queue a packet sent now meets, µs (NaN until capacity and base are
	// known): what is in flight takes InFlight/Capacity to deliver, of which Base is the
	// path's own delay. Queue is measured on arrivals and so is one path delay old.
	Ahead float64
}

// Tuning of the estimator. Liveness must react within the 300 ms a dead path may keep
// its weight; the agent probes idle paths every 25 ms, so silence of DownAfter means the
// path, not the traffic, stopped.
const (
	DownAfter      = 120 * time.Millisecond
	UpAfter        = 60 * time.Millisecond
	telemetryWin   = 300 * time.Millisecond // base from OWD − switch queue: tracks changes fast
	minOnlyWin     = 10 * time.Second       // base from minimum OWD: must outlast queues
	stepConfirm    = time.Second            // a shift of the minimum held this long is a new base
	minBusyQueueUs = 1500
	frameBits      = 1514 * 8        // a full-sized frame, what a bulk flow's packets are
	dispKeep       = 12              // recent reports with packet pairs kept ...
	dispAge        = 2 * time.Second // ... for at most this long ...
	dispMin        = 3               // ... unless fewer remain
	pairRaise      = 1.2             // pairs this far above a measured capacity raise it
	pairSpread     = 2.5             // reports of pairs this far from their median are outliers
	// Capacity comes from bytes delivered over a stretch in which the path never ran out
	// of queue: at least busyStretch long (50 ms reports hold a handful of packets on a
	// slow path, far too few), at most busyKeep.
	busyStretch = 300 * time.Millisecond
	busyKeep    = time.Second
	owdGain     = 0.3 // smoothing of the mean one-way delay the arrival correction reads
	// Random loss is counted over lossWindow, only in reports lossQuiet after the path
	// last queued (drops from a full queue are congestion, which the flow's own control
	// answers; the receiver sees them when the packets behind them arrive, after the
	// sender has backed off and the queue drained: on A2 counting them as random made the
	// model drop the 7 Mbit/s path; and slow start's bursts overflow a queue that drains
	// between them: on S1-4 they read as 3 % loss on the best path), and believed from
	// lossEvidence packets on.
	lossWindow   = 5 * time.Second
	lossQuiet    = time.Second
	lossEvidence = 200
	lossEvents   = 3
	outageGrace  = time.Second
)

type delivery struct {
	at    time.Time
	bytes uint64
	busy  bool
}

type lossCount struct {
	at        time.Time
	got, lost uint64
}

// pairReport is what one report's packet pairs measured: their rate and how many.
type pairReport struct {
	at     time.Time
	bps, n float64
}

type timed struct {
	at time.Time
	v  float64
}

type pathEstimator struct {
	est       Estimate
	prev      Observation
	hasPrev   bool
	settled   uint64  // cumulative losses seen in two reports in a row
	baseWin   []timed // per-interval base samples
	floors    []timed // per-interval queue met by the quickest packet (see standing)
	pairs     []pairReport
	deliv     []delivery // recent cumulative delivery, for busy-stretch capacity
	busyKnown bool       // capacity measured over a busy stretch at least once
	losses    []lossCount
	// aliveSince is when the path last came back from being down.
	aliveSince time.Time
	downSince  time.Time // when the path last went down
	lastQueued time.Time // when packets of the path last met a queue
	lastData   time.Time // the last report with data packets
	prevSent   time.Time // when the losses the previous report showed were sent
	lastGap    time.Time // when the receiver last counted a packet of the path missing
	lastBusy   time.Time // when the path last carried data over a queue that stood
}

// arrival is when a packet sent now would arrive, µs, and over how much queue: predicted
// where the path's queue can be (Ahead), else as the recent arrivals measured it
// (smoothed: a slow path's reports hold a packet or none).
func (e *Estimate) arrival() (owd, queue float64, predicted bool) {
	if !math.IsNaN(e.Ahead) {
		return e.Base + e.Ahead, e.Ahead, true
	}
	return e.Owd, max(0, e.Owd-e.Base), false
}

// standing is the queue the path held throughout the last win (up to busyKeep), µs: the
// least any of its packets met. Slow start's bursts fill a queue that drains between
// them while the window is below the path's bandwidth-delay product, so a queue that
// never emptied over a round trip is the window's excess. NaN without packets in win.
func (e *pathEstimator) standing(now time.Time, win time.Duration) float64 {
	return windowMin(e.floors, now, win)
}

func newPathEstimator() *pathEstimator {
	return &pathEstimator{est: Estimate{Alive: true, Base: math.NaN(), Queue: math.NaN(), Owd: math.NaN(), Ahead: math.NaN()}}
}

// update folds one observation in and returns the new estimate.
func (e *pathEstimator) update(o Observation) Estimate {
	est := &e.est
	switch {
	case o.RxAge < 0 || o.RxAge > DownAfter:
		if est.Alive {
			e.downSince = o.At
		}
		est.Alive = false
	case o.RxAge < UpAfter:
		if !est.Alive {
			e.aliveSince = o.At
		}
		est.Alive = true
	}

	if e.hasPrev && o.Lost > e.prev.Lost {
		e.lastGap = o.At
	}
	telemetry := !math.IsNaN(o.Queue)
	sample := o.OwdMin
	if telemetry && !math.IsNaN(o.OwdMean) {
		sample = o.OwdMean - o.Queue
	}
	if !math.IsNaN(sample) {
		e.baseWin = append(e.baseWin, timed{o.At, sample})
	}
	win := minOnlyWin
	if telemetry {
		win = telemetryWin
	}
	e.baseWin = slices.DeleteFunc(e.baseWin, func(s timed) bool { return o.At.Sub(s.at) > win })
	est.Base = windowMin(e.baseWin, o.At, win)
	if !telemetry {
		// A minimum that stayed above the base for a whole second, and barely moved, is a
		// longer path, not a queue (queues breathe with the flow) - unless the path carried
		// a flow over a standing queue or dropped packets meanwhile: a slow path's queue,
		// or one held full at its drop-tail limit, holds still too (K1's 200 kbit/s path
		// read as 200-500 ms long). Under load a longer path shows within minOnlyWin.
		recent := windowMin(e.baseWin, o.At, stepConfirm)
		if spread := windowMax(e.baseWin, o.At, stepConfirm) - recent; recent > est.Base+5000 && spread < 1000 &&
			e.span(o.At) >= stepConfirm && o.At.Sub(e.lastGap) >= stepConfirm && o.At.Sub(e.lastBusy) >= stepConfirm {
			e.baseWin = slices.DeleteFunc(e.baseWin, func(s timed) bool { return o.At.Sub(s.at) > stepConfirm })
			est.Base = recent
		}
	}
	switch {
	case math.IsNaN(o.OwdMean):
	case math.IsNaN(est.Owd):
		est.Owd = o.OwdMean
	default:
		est.Owd += owdGain * (o.OwdMean - est.Owd)
	}
	switch {
	case telemetry:
		est.Queue = o.Queue
	case !math.IsNaN(o.OwdMean) && !math.IsNaN(est.Base):
		est.Queue = max(0, o.OwdMean-est.Base)
	default:
		est.Queue = 0
	}

	// Lost is expected minus received at the moment the agent reads it, so a gap that a
	// packet still on its way fills a moment later counts in one report and is gone by the
	// next. Only a gap that outlived a report is a loss: on S1-4's 36 Mbit/s path such
	// passing gaps, summed report by report, read as 0.2 % loss while the receiver lost
	// nothing, and made the model drop the best path.
	var dRx, dLost, dLate uint64
	if e.hasPrev {
		settled := min(o.Lost, e.prev.Lost)
		dRx = sub(o.RxPackets, e.prev.RxPackets)
		dLost = sub(settled, e.settled)
		dLate = sub(o.Late, e.prev.Late)
		e.settled = settled
	}
	est.RxPackets = dRx
	if dRx > 0 {
		est.Late = 0.8*est.Late + 0.2*float64(dLate)/float64(dRx)
	}

	// Capacity. Over a stretch with a standing queue throughout, the path delivers
	// exactly its capacity; otherwise packet pairs bound it, and a path that delivered
	// more than the estimate over a long enough stretch has at least that.
	serial := 0.0
	if est.Capacity > 0 {
		serial = frameBits / est.Capacity * 1e6
	}
	// Busy means a standing queue throughout the report: even its quickest packet queued.
	// A mean queue is not enough: slow start's bursts fill a queue and let it drain
	// within every round trip, and counted as busy they made A2's 7 Mbit/s path 3.7.
	standing := standingQueue(o, est)
	est.Busy = dRx >= 2 && standing > max(minBusyQueueUs, 2*serial)
	if dRx > 0 && !math.IsNaN(standing) {
		e.floors = append(e.floors, timed{o.At, standing})
	}
	e.floors = slices.DeleteFunc(e.floors, func(s timed) bool { return o.At.Sub(s.at) > busyKeep })
	if dRx >= 1 && standing > max(minBusyQueueUs, 2*serial) {
		e.lastBusy = o.At // even one packet: a slow path's reports hold one or none
	}
	if dRx >= 2 && est.Queue > max(minBusyQueueUs, 2*serial) {
		e.lastQueued = o.At
	}
	// A loss comes to light when the packet behind it arrives, which after a stall (a
	// flow waiting out a retransmission timeout) is long after it was sent: it is judged
	// by the queue when the path last carried data. On S1-4 the drops of a congested
	// moment, revealed after a 2 s stall, read as random and the model kept one path.
	// A loss settles a report after it shows (see settled), so it is judged by the
	// earlier of the two reports' sending times.
	sent := o.At
	if o.At.Sub(e.lastData) > DownAfter {
		sent = e.lastData
	}
	judged := sent
	if e.prevSent.Before(sent) {
		judged = e.prevSent
	}
	e.prevSent = sent
	if dRx > 0 {
		e.lastData = o.At
	}
	// What an outage loses says nothing about the path once it works again: forget it,
	// and what is lost in the moments after it comes back.
	if !est.Alive {
		e.losses = nil
	} else if dRx+dLost > 0 && o.At.Sub(e.aliveSince) >= outageGrace && judged.Sub(e.lastQueued) >= lossQuiet {
		e.losses = append(e.losses, lossCount{o.At, dRx, dLost})
	}
	e.losses = slices.DeleteFunc(e.losses, func(l lossCount) bool { return o.At.Sub(l.at) > lossWindow })
	var got, lost uint64
	events := 0
	for _, l := range e.losses {
		got, lost = got+l.got, lost+l.lost
		if l.lost > 0 {
			events++
		}
	}
	// Random loss strikes report after report; one burst is an event of the path (or of
	// the lab: S1-4's paths without configured loss showed single bursts of 1 %), not a
	// rate to predict from.
	if est.LossKnown = got+lost >= lossEvidence && (lost == 0 || events >= lossEvents); est.LossKnown {
		est.Loss = float64(lost) / float64(got+lost)
	}
	e.deliv = append(e.deliv, delivery{o.At, o.RxBytes, est.Busy})
	e.deliv = slices.DeleteFunc(e.deliv, func(d delivery) bool { return o.At.Sub(d.at) > busyKeep })
	if rate, ok := e.busyRate(); ok {
		if e.busyKnown {
			est.Capacity = 0.5*est.Capacity + 0.5*rate
		} else {
			est.Capacity = rate
		}
		est.CapacityKnown, e.busyKnown = true, true
	} else if rate, ok := e.deliveredRate(); ok && est.CapacityKnown && rate > est.Capacity {
		// A floor only lifts an estimate: partial load says nothing about capacity.
		est.Capacity = rate
	}
	if o.DispN >= 2 && o.DispBps > 0 {
		e.pairs = append(e.pairs, pairReport{o.At, o.DispBps, float64(o.DispN)})
	}
	// A path's pairs come a few a second, so an estimate over a count of them lags a
	// change by seconds: the older reports age out, all but the newest dispMin.
	for len(e.pairs) > dispKeep || len(e.pairs) > dispMin && o.At.Sub(e.pairs[0].at) > dispAge {
		e.pairs = e.pairs[1:]
	}
	// Packet pairs (probe trains on idle paths, bursts of data) stand in until a busy
	// stretch measures the capacity exactly; but pairs read while the path carries a
	// flow only raise the estimate, as the receiving host spreads a pair's arrivals
	// under load: on S1-4 they read a 36 Mbit/s path the split fed short of its
	// capacity, so that it never queued, at 4-28 Mbit/s, its share followed them down,
	// and the flow lost a quarter of its rate. A path estimated too high queues, and
	// its busy stretch measures it.
	//
	// After a busy stretch pairs can only raise the estimate, on a path that has held no
	// queue for a while while another path does: one the split under-feeds never gets
	// another busy stretch, and its deliveries lift the estimate only as far as its
	// share lets it deliver. A raise that overshoots is corrected by the busy stretch it
	// brings. With every queue empty (after a congestion signal) the flow asks no more
	// than the paths carry, and pairs read then lifted all four of S1-4's paths by 57 %
	// at once, which over-fed one until the window collapsed.
	switch {
	case len(e.pairs) == 0:
	case !e.busyKnown:
		if m := pairRate(e.pairs); !est.CapacityKnown || m > est.Capacity || o.At.Sub(e.lastData) >= busyKeep {
			est.Capacity, est.CapacityKnown = m, true
		}
	case o.At.Sub(e.lastBusy) >= busyKeep && o.OthersBusy:
		// Only pairs read since the path last queued: the queue-free spell is the evidence.
		quiet := slices.DeleteFunc(slices.Clone(e.pairs), func(r pairReport) bool { return r.at.Sub(e.lastBusy) < busyKeep })
		if len(quiet) >= dispMin {
			if m := pairRate(quiet); m > pairRaise*est.Capacity {
				est.Capacity = m
			}
		}
	}
	est.Ahead = math.NaN()
	if est.CapacityKnown && est.Capacity > 0 && !math.IsNaN(o.InFlight) && !math.IsNaN(est.Base) {
		est.Ahead = max(0, o.InFlight*8/est.Capacity*1e6-est.Base)
	}
	e.prev, e.hasPrev = o, true
	return *est
}

// measured: the capacity rests on a busy stretch or on more than one report of packet
// pairs, not on a first train alone.
func (e *pathEstimator) measured() bool {
	return e.est.CapacityKnown && (e.busyKnown || len(e.pairs) >= 2)
}

// busyRate is the delivery rate over the latest stretch of busy reports, when that
// stretch is long enough to count a path's capacity.
func (e *pathEstimator) busyRate() (float64, bool) {
	n := len(e.deliv)
	if n < 2 || !e.deliv[n-1].busy {
		return 0, false
	}
	first := n - 1
	for first > 0 && e.deliv[first-1].busy {
		first--
	}
	// The report before the stretch marks its start: bytes after it were delivered busy.
	if first > 0 {
		first--
	}
	a, b := e.deliv[first], e.deliv[n-1]
	dt := b.at.Sub(a.at)
	if dt < busyStretch {
		return 0, false
	}
	return float64(sub(b.bytes, a.bytes)) * 8 / dt.Seconds(), true
}

// standingQueue is the queue a report's quickest packet met, µs (its one-way delay over
// the base), or the estimated queue when either is not measured.
func standingQueue(o Observation, est *Estimate) float64 {
	if math.IsNaN(o.OwdMin) || math.IsNaN(est.Base) {
		return est.Queue
	}
	return o.OwdMin - est.Base
}

// deliveredRate is the delivery rate over the whole recent history, a floor of capacity.
func (e *pathEstimator) deliveredRate() (float64, bool) {
	n := len(e.deliv)
	if n < 2 {
		return 0, false
	}
	a, b := e.deliv[0], e.deliv[n-1]
	dt := b.at.Sub(a.at)
	if dt < busyStretch {
		return 0, false
	}
	return float64(sub(b.bytes, a.bytes)) * 8 / dt.Seconds(), true
}

// lastRate is the path's delivery rate over its latest report.
func (e *pathEstimator) lastRate() float64 {
	if !e.hasPrev {
		return 0
	}
	return e.prev.RxBps
}

// raise lifts the capacity estimate of a path the split under-feeds.
func (e *pathEstimator) raise(f float64) {
	if e.est.CapacityKnown {
		e.est.Capacity *= f
	}
}

func (e *pathEstimator) span(now time.Time) time.Duration {
	if len(e.baseWin) == 0 {
		return 0
	}
	return now.Sub(e.baseWin[0].at)
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func windowMin(s []timed, now time.Time, win time.Duration) float64 {
	m := math.NaN()
	for _, x := range s {
		if now.Sub(x.at) <= win && (math.IsNaN(m) || x.v < m) {
			m = x.v
		}
	}
	return m
}

func windowMax(s []timed, now time.Time, win time.Duration) float64 {
	m := math.NaN()
	for _, x := range s {
		if now.Sub(x.at) <= win && (math.IsNaN(m) || x.v > m) {
			m = x.v
		}
	}
	return m
}

// pairRate is the packet pairs' bytes over their arrival gaps, summed over the reports
// (each report's rate is already such a ratio over its pairs). A ratio of sums and not a
// median of rates: a link that sends in bursts (an LTE cell per TTI) delivers a probe
// train over a whole number of bursts, so one train reads its path at a multiple of the
// burst spacing, too fast or too slow; over trains that met the bursts at every phase the
// arrival spans add up to the trains' serialisation times. The median of S1-4's 14.7
// Mbit/s path over three trains of a 1 ms TTI read 12.8 or 19.2 Mbit/s. Reports further
// than pairSpread from the median are left out: a train whose sender or link stalled
// for a few milliseconds spans them (S1-4's 36 Mbit/s path once read 8.8 Mbit/s beside
// 39.9, which summed made it 14.4), where bursts make at most a factor of two.
func pairRate(s []pairReport) float64 {
	rates := make([]float64, len(s))
	for i, r := range s {
		rates[i] = r.bps
	}
	slices.Sort(rates)
	med := rates[len(rates)/2]
	var n, t float64
	for _, r := range s {
		if r.bps >= med/pairSpread && r.bps <= med*pairSpread {
			n += r.n
			t += r.n / r.bps
		}
	}
	return n / t
}
