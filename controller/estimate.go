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
	Jitter    float64       // smoothed |difference| of consecutive one-way delays (RFC 3550), µs; NaN if unknown
	InFlight  float64       // bytes sent on the path and not yet received; NaN if unknown
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
	// Jitter is the path's delay noise, µs: the receiver's RFC 3550 jitter, or what it
	// read while the path carried no data if that was more (see busy). A queue below
	// twice it over Spread is no evidence of one (see busyQueue).
	Jitter float64
	// Spread is how far over the base the one-way delays of the path's idle probes
	// reach, µs (the second highest of its latest idle reports): under load a link that
	// keeps order delivers at the top of that spread, queue or not (see busyQueue).
	Spread float64
	// Ahead is the queue a packet sent now meets, µs (NaN until capacity and base are
	// known): what is in flight takes InFlight/Capacity to deliver, of which Base is the
	// path's own delay. Queue is measured on arrivals and so is one path delay old.
	Ahead float64
}

// Tuning of the estimator. Liveness must react within the 300 ms a dead path may keep its
// weight. The reasons: docs/controller.md#estimation.
const (
	DownAfter      = 120 * time.Millisecond // silence this long is the path's: idle paths are probed every 25 ms
	UpAfter        = 60 * time.Millisecond  // a path is back once it is silent less than this
	telemetryWin   = 300 * time.Millisecond // base from OWD − switch queue: tracks changes fast
	minOnlyWin     = 10 * time.Second       // base from minimum OWD: must outlast queues
	stepConfirm    = time.Second            // a shift of the minimum held this long is a new base
	minBusyQueueUs = 1500                   // µs: less queue than this is jitter, not a standing queue
	spreadKeep     = 40                     // idle reports (2 s of them) the spread is read over
	frameBits      = 1514 * 8               // a full-sized frame, what a bulk flow's packets are
	busyKeep       = time.Second            // deliveries and queue floors are kept this long
	owdGain        = 0.3                    // smoothing of the mean one-way delay the arrival correction reads
	lossWindow     = 5 * time.Second        // random loss is counted over this long ...
	lossQuiet      = time.Second            // ... only this long after the path queued: drops from a queue are congestion
	lossBelowPeak  = 0.5                    // ... or while its queue stands below this share of its peak: drop-tail drops when full
	lossEvidence   = 200                    // packets before a loss rate is believed
	lossEvents     = 3                      // reports with losses before it is: one burst is an event, not a rate
	outageGrace    = time.Second            // losses this soon after an outage are the outage's
)

type lossCount struct {
	at        time.Time
	got, lost uint64
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
	queues    []timed // per-interval queue, over lossWindow (see underPeak)
	pairs     []pairReport
	deliv     []delivery // recent cumulative delivery, for busy-stretch capacity
	busyKnown bool       // capacity measured over a busy stretch at least once
	pulse     pulse      // the path's probe under wrr, while one runs
	losses    []lossCount
	// aliveSince is when the path last came back from being down.
	aliveSince time.Time
	downSince  time.Time // when the path last went down
	lastQueued time.Time // when packets of the path last met a queue
	lastData   time.Time // the last report with data packets
	// lastFlow is the last report in which the path carried a flow: a full-sized frame's
	// bytes of data at least. Less is a trickle (the agents' liveness messages through
	// the tunnel, 146 bytes a few times a second), which leaves the trains' pairs alone.
	lastFlow    time.Time
	prevSent    time.Time // when the losses the previous report showed were sent
	lastGap     time.Time // when the receiver last counted a packet of the path missing
	lastBusy    time.Time // when the path last carried data over a queue that stood
	held        float64   // the most the path has held queued, bytes: its buffer holds that much
	idleJitter  float64   // the jitter the receiver last read while the path carried no data, µs
	idleFloors  []float64 // standing queue of the latest idle reports, µs (see Spread)
	quiet       int       // reports in a row known to hold no data packets
	stamped     bool      // the switches' stamps have shown a queue of the path (see telemetry)
	lossCounted bool      // enough packets have measured the path's loss since it came up (see modelPaths)
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

// queued: the path held a standing queue through the last win (even its quickest
// packets queued), so it delivers its capacity. One report is not enough: a jittery
// path's few packets of a report can all arrive late.
func (e *pathEstimator) queued(now time.Time, win time.Duration) bool {
	return e.standing(now, win) > e.est.busyQueue()
}

// empty: the path held no standing queue in any report of the last win.
func (e *pathEstimator) empty(now time.Time, win time.Duration) bool {
	return windowMax(e.floors, now, win) <= e.est.busyQueue()
}

// busyQueue is the least standing queue, µs, that says the path is busy: more than
// minBusyQueueUs, two full-sized frames' serialisation (a slow path's quickest packet
// waits behind one), and the spread of its idle delays plus twice its jitter. A link
// that keeps order under jitter holds each packet until the ones before it left, so
// under load its packets ride the top of the jitter: the lab's 95.6 Mbit/s path with
// ±4.2 ms of jitter showed a standing 1.5-3.9 ms at a tenth of its rate, and its busy
// stretches measured its share, not its capacity. Twice RFC 3550's jitter alone is short
// of that top, a mean difference and not a range: sweep-3-13's 35 Mbit/s path with
// ±4.1 ms read 0.9-1.8 ms of jitter under load, stood 3.5-7.9 ms at a quarter of its
// rate, and was fed 9 Mbit/s all run. Its probes' delays reach towards the top; a load's
// many packets reach past a few seconds of probes by about the jitter's scale.
func (est *Estimate) busyQueue() float64 {
	serial := 0.0
	if est.Capacity > 0 {
		serial = frameBits / est.Capacity * 1e6
	}
	jitter := 0.0
	if !math.IsNaN(est.Jitter) {
		jitter = est.Jitter
	}
	return max(minBusyQueueUs, 2*serial, est.Spread+2*jitter)
}

func newPathEstimator() *pathEstimator {
	return &pathEstimator{est: Estimate{Alive: true, Base: math.NaN(), Queue: math.NaN(), Owd: math.NaN(), Ahead: math.NaN(), Jitter: math.NaN()}, idleJitter: math.NaN()}
}

// update folds one observation in and returns the new estimate. The steps run in this
// order, each reading what the ones before it wrote.
func (e *pathEstimator) update(o Observation) Estimate {
	e.liveness(o)
	e.stamped = e.stamped || o.Queue > minBusyQueueUs
	e.baseDelay(o)
	e.meanDelay(o)
	e.queue(o)
	dRx, dLost := e.counts(o)
	e.busy(o, dRx)
	judged := e.lossJudgedAt(o, dRx)
	e.randomLoss(o, dRx, dLost, judged)
	e.busyCapacity(o)
	e.pairCapacity(o)
	if e.pulse.stale(o.At) {
		e.judge(o.At, false)
	}
	e.ahead(o)
	e.prev, e.hasPrev = o, true
	return e.est
}

// telemetry: the switches stamp the queue, which separates it from the path's delay.
// A stamp covers only the switches' own queues, not a link or a hop beyond them (a BMv2
// lab's link elements, an operator's uplink), where the path's queue may build while
// the stamps read none: so the stamps count once they have shown a queue of the path.
func (e *pathEstimator) telemetry(o Observation) bool { return e.stamped && !math.IsNaN(o.Queue) }

// liveness estimates whether the path works, from how long ago a packet last arrived:
// silence is only the path's once idle paths have missed several probes.
func (e *pathEstimator) liveness(o Observation) {
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
}

// baseDelay estimates the propagation delay as the least one-way delay of a window: a
// queue adds to every packet's delay, the path's own length to none differently.
func (e *pathEstimator) baseDelay(o Observation) {
	est := &e.est
	if e.hasPrev && o.Lost > e.prev.Lost {
		e.lastGap = o.At
	}
	telemetry := e.telemetry(o)
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
	est.Base = windowLow(e.baseWin, o.At, win)
	if !telemetry {
		// A minimum that stayed above the base for a whole second, and barely moved, is a
		// longer path, not a queue (queues breathe with the flow) - unless the path carried
		// a flow over a standing queue or dropped packets meanwhile: a slow path's queue,
		// or one held full at its drop-tail limit, holds still too. Under load a longer
		// path shows within minOnlyWin.
		recent := windowMin(e.baseWin, o.At, stepConfirm)
		if spread := windowMax(e.baseWin, o.At, stepConfirm) - recent; recent > est.Base+5000 && spread < 1000 &&
			e.span(o.At) >= stepConfirm && o.At.Sub(e.lastGap) >= stepConfirm && o.At.Sub(e.lastBusy) >= stepConfirm {
			e.baseWin = slices.DeleteFunc(e.baseWin, func(s timed) bool { return o.At.Sub(s.at) > stepConfirm })
			est.Base = recent
		}
	}
}

// meanDelay estimates the path's mean one-way delay, smoothed: a slow path's reports
// hold a packet or none, and the arrival correction reads it.
func (e *pathEstimator) meanDelay(o Observation) {
	est := &e.est
	switch {
	case math.IsNaN(o.OwdMean):
	case math.IsNaN(est.Owd):
		est.Owd = o.OwdMean
	default:
		est.Owd += owdGain * (o.OwdMean - est.Owd)
	}
}

// queue estimates the queueing delay now: the switches' stamp where there is one, else
// the mean one-way delay over the base.
func (e *pathEstimator) queue(o Observation) {
	est := &e.est
	switch {
	case e.telemetry(o):
		est.Queue = o.Queue
	case !math.IsNaN(o.OwdMean) && !math.IsNaN(est.Base):
		est.Queue = max(0, o.OwdMean-est.Base)
	default:
		est.Queue = 0
	}
}

// counts estimates the report's packets, settled losses and lateness, and returns the
// packets received and lost since the last report. Lost is expected minus received at
// the moment the agent reads it, so a gap that a packet still on its way fills a moment
// later counts in one report and is gone by the next: only a gap that outlived a report
// is a loss.
func (e *pathEstimator) counts(o Observation) (dRx, dLost uint64) {
	est := &e.est
	var dLate uint64
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
	return dRx, dLost
}

// busy estimates whether the path holds a standing queue throughout the report (even its
// quickest packet queued), which is when it delivers exactly its capacity. A mean queue
// is not enough: slow start's bursts fill a queue and let it drain within every round
// trip.
func (e *pathEstimator) busy(o Observation, dRx uint64) {
	est := &e.est
	// A link that keeps order under jitter hides it under load: each packet waits for
	// the ones before it, so consecutive delays differ little (sweep-5-12's path with
	// 2.3 ms of jitter read 1.5-1.8 ms idle, 0.3-0.8 ms under a flow), while its packets
	// still ride the jitter's top. The probes of an idle spell read the link's own.
	if !math.IsNaN(o.Jitter) {
		if dRx == 0 {
			e.idleJitter = o.Jitter
		}
		est.Jitter = o.Jitter
		if e.idleJitter > o.Jitter {
			est.Jitter = e.idleJitter
		}
	}
	standing := standingQueue(o, est)
	e.spread(o, dRx, standing)
	level := est.busyQueue()
	est.Busy = dRx >= 2 && standing > level
	if dRx > 0 && !math.IsNaN(standing) {
		e.floors = append(e.floors, timed{o.At, standing})
		e.held = max(e.held, standing*o.RxBps/8e6) // it drains at what it delivers
	}
	e.floors = slices.DeleteFunc(e.floors, func(s timed) bool { return o.At.Sub(s.at) > busyKeep })
	if dRx >= 1 && standing > level {
		e.lastBusy = o.At // even one packet: a slow path's reports hold one or none
	}
	if dRx >= 2 && est.Queue > level {
		e.lastQueued = o.At
	}
}

// spread takes an idle report's standing queue into the path's Spread: a report of
// probes alone after one without data either (a probe that follows a flow's last packets
// meets what is left of their queue: K1's 200 kbit/s path delivers a frame every 60 ms;
// and an estimator's first report counts no packets, as it has none before it to count
// from), with a delay measured against a known base.
func (e *pathEstimator) spread(o Observation, dRx uint64, standing float64) {
	if e.hasPrev && dRx == 0 {
		e.quiet++
	} else {
		e.quiet = 0
	}
	if e.quiet < 2 || math.IsNaN(o.OwdMin) || math.IsNaN(e.est.Base) {
		return
	}
	e.idleFloors = append(e.idleFloors, max(0, standing))
	if len(e.idleFloors) > spreadKeep {
		e.idleFloors = e.idleFloors[1:]
	}
	top := slices.Clone(e.idleFloors)
	slices.Sort(top)
	// The second highest: one probe the sending host held up is no spread.
	e.est.Spread = top[max(0, len(top)-2)]
}

// lossJudgedAt is when the losses the report shows were sent, by which their cause is
// judged: a loss comes to light when the packet behind it arrives, which after a stall
// (a flow waiting out a retransmission timeout) is long after it was sent, so it is
// judged by the queue when the path last carried data; and a loss settles a report after
// it shows (see counts), so by the earlier of the two reports' sending times.
func (e *pathEstimator) lossJudgedAt(o Observation, dRx uint64) time.Time {
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
	return judged
}

// randomLoss estimates the path's random loss over the recent window, from reports sent
// while it held no queue, or a queue that stood well below its peak (underPeak): drops
// from a full queue are congestion, which the flow's own control answers. What an outage loses says nothing about the path once it works again:
// it is forgotten, and what is lost in the moments after it comes back. Random loss
// strikes report after report; one burst is an event of the path, not a rate to predict
// from.
func (e *pathEstimator) randomLoss(o Observation, dRx, dLost uint64, judged time.Time) {
	est := &e.est
	under := e.underPeak(o, dRx, judged)
	if !est.Alive {
		e.losses = nil
	} else if dRx+dLost > 0 && o.At.Sub(e.aliveSince) >= outageGrace && (judged.Sub(e.lastQueued) >= lossQuiet || under) {
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
	e.lossCounted = est.Alive && (e.lossCounted || got+lost >= lossEvidence)
	if est.LossKnown = got+lost >= lossEvidence && (lost == 0 || events >= lossEvents); est.LossKnown {
		est.Loss = float64(lost) / float64(got+lost)
	}
}

// underPeak: the path's queue stood, from judged to now, below lossBelowPeak of the
// highest it held over lossWindow. A drop-tail queue drops only when full, so what is lost
// then is the path's, and a path that carries a bulk flow (whose queue always stands) has
// its random loss counted at all: without this, 0.2-0.9 % of loss on paths under a flow
// read as none, and the model kept lossy paths. A queue that drained is not judged so: the
// drops of its peak may come to light after it (see lossJudgedAt). Only reports with
// data count: the peak is what a flow fills, and a probe delayed while a host starts
// (sweep-5-06: 580 ms, before the flow) would pass every drop of a full queue for random.
func (e *pathEstimator) underPeak(o Observation, dRx uint64, judged time.Time) bool {
	if dRx >= 2 && !math.IsNaN(o.OwdMean) {
		e.queues = append(e.queues, timed{o.At, e.est.Queue})
	}
	e.queues = slices.DeleteFunc(e.queues, func(s timed) bool { return o.At.Sub(s.at) > lossWindow })
	peak, low, high := 0.0, math.Inf(1), 0.0
	for _, q := range e.queues {
		peak = max(peak, q.v)
		if !q.at.Before(judged.Add(-o.Interval)) {
			low, high = min(low, q.v), max(high, q.v)
		}
	}
	return low > e.est.busyQueue() && high < lossBelowPeak*peak
}

// ahead estimates the queue a packet sent now meets, from what is in flight: arrivals
// measure the queue one path delay late.
func (e *pathEstimator) ahead(o Observation) {
	est := &e.est
	est.Ahead = math.NaN()
	if est.CapacityKnown && est.Capacity > 0 && !math.IsNaN(o.InFlight) && !math.IsNaN(est.Base) {
		est.Ahead = max(0, o.InFlight*8/est.Capacity*1e6-est.Base)
	}
}

// standingQueue is the queue a report's quickest packet met, µs (its one-way delay over
// the base), or the estimated queue when either is not measured.
func standingQueue(o Observation, est *Estimate) float64 {
	if math.IsNaN(o.OwdMin) || math.IsNaN(est.Base) {
		return est.Queue
	}
	return o.OwdMin - est.Base
}

// lastRate is the path's delivery rate over its latest report.
func (e *pathEstimator) lastRate() float64 {
	if !e.hasPrev {
		return 0
	}
	return e.prev.RxBps
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

// windowLow is the second lowest of the samples in the last win (the only one, if one):
// a base two reports agree on. One report's minimum can be one packet's, and the base is
// held for seconds: sweep-5-19's path with 0.2 ms of jitter once read 2 ms under its
// base, which then read the path as queued at a tenth of its rate and measured it so,
// and sweep-5-02's first packets on a path read -2.1 s (a delay past the 2.1 s a 32-bit
// signed nanosecond difference holds).
func windowLow(s []timed, now time.Time, win time.Duration) float64 {
	lo, next := math.NaN(), math.NaN()
	for _, x := range s {
		switch {
		case now.Sub(x.at) > win:
		case math.IsNaN(lo) || x.v < lo:
			lo, next = x.v, lo
		case math.IsNaN(next) || x.v < next:
			next = x.v
		}
	}
	if math.IsNaN(next) {
		return lo
	}
	return next
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
