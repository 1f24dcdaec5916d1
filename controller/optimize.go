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

// Tuning of the optimiser.
const (
	// A new path set must promise this much more goodput, and the current one must have
	// held this long, before the split changes shape: path sets do not flap.
	setGain  = 1.05
	setDwell = 2 * time.Second
	// Arrival correction: each interval moves a path's delay parameter by this fraction of
	// how much later (or earlier) than the paths' average its packets arrived.
	// The loop sees a path's arrivals one path delay late, so the gain stays low.
	corrGain = 0.1
	corrMax  = 200e3 // µs
	// A path that carries packets but shows no queue while another path in use does is
	// under-fed: its capacity estimate is raised by this factor each interval until it
	// queues too. Over-estimates need no such care: an over-fed path queues and then
	// delivers exactly its capacity.
	probeUp = 1.15
	// Paths whose capacity is still unknown are guessed at this (or at the best known
	// path's capacity): a guess too high corrects itself within one busy stretch, one too
	// low by probing up. For a tunnel's reverse direction (ACKs) only delays matter.
	unknownRate = 10e6
	unknownWait = 2 * time.Second // see waitForTrains
	// minPackets is the smallest number of a path's packets in one report that the
	// arrival correction and probing read as "the path carries traffic".
	minPackets = 3
	// Bulk or light load. A direction whose delivery stays below a share of its lowest-
	// delay path's capacity runs edpf: packets take the earliest-arriving path, which for
	// light traffic (a tunnel's ACKs, interactive flows) is the fastest path alone. Once it
	// needs more it runs wrr at the paths' capacities: measured side by side on the A2 lab,
	// a bulk cubic flow gets 0.94 of the ideal link that way but 0.78 with in-order edpf,
	// whose queueing for order raises the round trip (HyStart leaves slow start early and
	// cubic refills the queues in step). It goes back to edpf only after staying light.
	bulkAbove  = 0.6
	lightBelow = 0.3
	idleBelow  = 0.02
	lightFor   = 2 * time.Second
	loadGain   = 0.3 // smoothing of the delivery rate the load decision reads
	// A flow's start (see feedFast): cubic's HyStart takes the smallest of a round's
	// first eight RTT samples and ends slow start once it exceeds the smallest ever by
	// max(4 ms, 1/8). The fastest path sets the smallest; with a share s it gives none of
	// a round's first eight samples with probability (1 − s)^8 (A2's 2 Mbit/s, 10 ms path
	// at 1/7: 29 %), and that round ends slow start early. While the flow is slow, that
	// path's share is raised to feedRate of what it can carry at the flow's rate, up to
	// feedShare (odds of 2 % a round), until the flow delivers startDone of the split's
	// capacity, or for startMax at most.
	feedShare = 0.4
	feedRate  = 0.45 // slow start doubles within a report or two: room for twice the rate
	startDone = 0.9
	startMax  = 3 * time.Second
	// HyStart's delay threshold, µs: an eighth of the smallest round trip, clamped as the
	// kernel clamps it (HYSTART_DELAY_MIN, HYSTART_DELAY_MAX).
	hystartMin = 4e3
	hystartMax = 16e3
	// The ACKs of a striped direction return on a path that makes the round trip exceed the
	// delay skew by this factor (see ackPath): Linux tolerates reordering up to a window
	// that grows with DSACKs to at most the smoothed round trip.
	ackMargin = 1.2
	// wrr's capacity weights are trimmed against delay asymmetry (see balance): a path
	// whose packets arrive later than the average, over a queue of its own, loses
	// balanceGain of its share per second of lateness, at most balanceMax.
	balanceGain = 0.5
	balanceMax  = 0.3
	// Where a path's queue can be predicted (Estimate.Ahead) the loop no longer waits a
	// path delay to see its effect, so a late path's share is set to drain its lateness
	// within drainHorizon, down to drainFloor of its capacity share.
	drainHorizon = 0.5 // s
	drainFloor   = 0.1
	// Loss below lossFloor is not news to the model. On the embedded lab, paths with no
	// loss configured showed 0.02-0.05 % of counted losses that TCP never felt (wrr went
	// through them at 0.98 of the ideal link), yet cubic's response to 0.03 % on one path
	// of S1-4 predicts a third of the goodput, and the model dropped the best path.
	lossFloor = 0.001
	// Early congestion signal (see congested): when the paths carrying a bulk flow hold
	// a growing queue ahead of signalFrac of the flow's base round trip (mean by share),
	// and it has stood through a round trip (at least standMin), the sender gives the
	// flow one early loss (or CE mark), at most every signalHold and every signalRTTs
	// round trips.
	signalFrac = 0.5
	signalMin  = 5e3 // µs
	// The queue also holds signalSlack packets beyond that: a window's cut lands on whole
	// segments and delayed ACKs clock out two at a time: on K1 (a pipe of 9 packets) cuts
	// from half a round trip of queue left the window at the pipe (0.94 of the ideal link;
	// 0.97 with the slack).
	signalSlack = 4
	signalHold  = time.Second
	signalRTTs  = 4
	standMin    = 100 * time.Millisecond // two agent reports: a round trip shorter holds one or none
	// The sending agent's trigger (pb.SignalTrigger) gives slow start's signal itself,
	// within triggerRounds round trips (at least triggerMin) of a flow's first packet:
	// slow start from ten packets passes 40,000 in twelve.
	triggerRounds = 12
	triggerMin    = 2 * time.Second
	// The trigger's rate is the most the split's paths were measured to carry together
	// over triggerKeep: a rate read too low (a busy stretch of slow start's bursts read
	// S1-4's 36 Mbit/s path as 21) makes a queue of its own and an early cut, one too
	// high only leaves the signal to the controller.
	triggerKeep = 10 * time.Second
)

// target is what the optimiser wants the sending agent to hold.
type target struct {
	mode    pb.Mode
	up      []bool
	weights []float64 // wrr
	est     []*pb.PathEstimate
	ackPath string // the path that carries ACK-sized packets; "": they follow the split
	signal  bool   // give the flow one congestion signal now
	trigger *pb.SignalTrigger
}

func (t target) equal(o target) bool {
	if t.mode != o.mode || !slices.Equal(t.up, o.up) || t.ackPath != o.ackPath || t.signal != o.signal ||
		len(t.weights) != len(o.weights) || len(t.est) != len(o.est) || !sameTrigger(t.trigger, o.trigger) {
		return false
	}
	for i := range t.weights {
		if !near(t.weights[i], o.weights[i], 0.01) {
			return false
		}
	}
	for i := range t.est {
		// A train's length need not follow the capacity closely.
		if !near(t.est[i].RateBps, o.est[i].RateBps, 0.01) || math.Abs(t.est[i].DelayUs-o.est[i].DelayUs) > 200 ||
			!near(t.est[i].CapacityBps, o.est[i].CapacityBps, 0.2) {
			return false
		}
	}
	return true
}

// sameTrigger tells triggers apart only by what matters: every rewrite of the agent's
// configuration flips its datapath's, and the estimates behind them move by a few percent.
func sameTrigger(a, b *pb.SignalTrigger) bool {
	if a == nil || b == nil {
		return a == b
	}
	return near(a.RateBps, b.RateBps, 0.1) && near(a.QueueUs, b.QueueUs, 0.1) && near(a.StandingUs, b.StandingUs, 0.1)
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// optimizer holds one direction's decisions between intervals.
type optimizer struct {
	load       float64 // smoothed delivery rate of the direction, bit/s
	bulk       bool
	lightSince time.Time

	set      []bool // paths the split may use
	setLive  []bool // paths that were alive when set was chosen
	setMode  model.Mode
	setSince time.Time
	corr     []float64 // arrival correction per path, µs
	starved  []int     // consecutive intervals a path in use showed no queue while another did
	// probed: the sender is a host agent, whose probe trains measure the paths a split
	// leaves idle (a split switch sends none); unknownSince is when each live path was
	// first seen without a known capacity (see waitForTrains).
	probed       bool
	unknownSince []time.Time
	reason       string
	predict      float64
	signalAt     time.Time // last congestion signal
	signals      int       // congestion signals given
	signalQ      float64   // the paths' mean queue at the last one, µs
	lastQueue    float64   // the paths' mean queue at the previous decision, µs
	starting     bool      // no flow has filled the split since the direction was idle
	startAt      time.Time // the first busy decision of that flow
	startSigs    int       // signals given before it
	trigger      *pb.SignalTrigger
	trigRates    []timed // the split's summed capacity at each decision, over triggerKeep
	triggered    uint32  // signals the sender's trigger gave, as last reported (seenTrig)
	seenTrig     bool
	byTrigger    int // of signals, those the sender's trigger gave
	// ackBase is the base one-way delay of the path the direction's ACKs return on, µs
	// (0 until the controller has routed them): with the forward base it makes the flow's
	// round trip, the clocks' offset cancelling between the two directions.
	ackBase float64
}

// A direction starts as bulk: a flow starting on the fastest path alone and then spread
// by weight meets reordering when TCP's tolerance is smallest (min_rtt/4), which costs a
// burst of spurious retransmissions and seconds of slow cubic growth; a light flow merely
// spends its first seconds striped.
func newOptimizer(n int, now time.Time) *optimizer {
	return &optimizer{corr: make([]float64, n), starved: make([]int, n), unknownSince: make([]time.Time, n), bulk: true, starting: true}
}

// decide chooses the split for the next interval. override is "auto" or a fixed mode;
// weights, when set, are the operator's.
func (o *optimizer) decide(now time.Time, ests []*pathEstimator, override string, weights []float64, tcp model.TCP) target {
	n := len(ests)
	t := target{up: make([]bool, n)}
	for i, e := range ests {
		t.up[i] = e.est.Alive
	}
	switch override {
	case "rr":
		t.mode, t.est = pb.Mode_MODE_RR, o.estimates(ests, make([]bool, n))
		o.reason = "operator: rr"
		return t
	case "wrr":
		t.mode, t.weights, t.est = pb.Mode_MODE_WRR, o.wrrWeights(ests, weights), o.estimates(ests, make([]bool, n))
		o.reason = "operator: wrr"
		return t
	case "edpf":
		t.mode, t.est = pb.Mode_MODE_EDPF, o.estimates(ests, allTrue(n))
		o.reason = "operator: edpf"
		return t
	}
	if countTrue(t.up) == 0 {
		t.mode, t.weights = pb.Mode_MODE_WRR, equal(n)
		o.reason = "every path is down, or none has carried a packet yet"
		return t
	}
	mode := model.EDPF
	if o.bulkLoad(now, ests) {
		mode = model.WRR
	}
	choice := o.chooseSet(now, ests, mode, tcp)
	if mode == model.WRR {
		t.mode, t.weights = pb.Mode_MODE_WRR, o.feedFast(now, ests, balance(ests, choice))
		t.signal = o.congested(now, ests, t.weights)
		o.trigger = o.triggerFor(now, ests, t.weights)
		t.trigger = o.trigger
		t.est = o.estimates(ests, o.set) // the probe trains' capacities
		return t
	}
	o.correct(ests)
	o.probe(ests)
	t.mode, t.est = pb.Mode_MODE_EDPF, o.estimates(ests, o.set)
	t.trigger = o.trigger // for the bulk flow that may follow
	return t
}

// bulkLoad decides, with hysteresis, whether the direction carries bulk traffic: more than
// a share of what its lowest-delay live path can carry.
func (o *optimizer) bulkLoad(now time.Time, ests []*pathEstimator) bool {
	var delivered float64
	fastest, fastDelay := -1, math.Inf(1)
	for i, e := range ests {
		if e.est.Alive && !math.IsNaN(e.est.Base) && e.est.Base < fastDelay {
			fastest, fastDelay = i, e.est.Base
		}
		delivered += e.lastRate()
	}
	o.load += loadGain * (delivered - o.load)
	if fastest < 0 {
		return o.bulk
	}
	c := capacity(ests, fastest)
	switch {
	case o.load < idleBelow*c:
		// Idle is not light: the next flow starts as a new direction's does, striped.
		// Counted as light, the idle seconds before an A2 flow put its slow start on the
		// fastest path alone, then spread it: a second of 1 Mbit/s and eight of regrowth.
		o.bulk, o.lightSince = true, time.Time{}
		o.starting, o.startAt, o.startSigs = true, time.Time{}, o.signals
	case !o.bulk && o.load > bulkAbove*c:
		o.bulk = true
		o.lightSince = time.Time{}
	case o.bulk && o.load < lightBelow*c:
		if o.lightSince.IsZero() {
			o.lightSince = now
		} else if now.Sub(o.lightSince) >= lightFor {
			o.bulk = false
		}
	case o.bulk:
		o.lightSince = time.Time{}
	}
	return o.bulk
}

// guess is the capacity assumed for a path whose capacity is not known yet.
func guess(ests []*pathEstimator) float64 {
	g := unknownRate
	for _, e := range ests {
		if e.est.CapacityKnown {
			g = max(g, e.est.Capacity)
		}
	}
	return g
}

func capacity(ests []*pathEstimator, i int) float64 {
	if e := ests[i].est; e.CapacityKnown && e.Capacity > 0 {
		return e.Capacity
	}
	return guess(ests)
}

// modelPaths describes the paths to the model as the estimator sees them.
func modelPaths(ests []*pathEstimator) []model.Path {
	ps := make([]model.Path, len(ests))
	for i, e := range ests {
		rate := capacity(ests, i)
		base := e.est.Base
		if math.IsNaN(base) || base < 0 {
			base = 0
		}
		loss := 0.0
		if e.est.LossKnown && e.est.Loss >= lossFloor {
			loss = math.Min(e.est.Loss, 0.5)
		}
		ps[i] = model.Path{Rate: rate, Delay: time.Duration(base * 1e3), Loss: loss}
	}
	return ps
}

// chooseSet picks the paths edpf may use: the model's best subset of the live paths,
// changed only when the gain is worth it and the current set has settled. While some
// path's capacity or base delay is unknown every live path stays in: the model would be
// choosing between guesses (a restarted agent's path read as 0 ms long and was dropped
// for its skew), and a path left out would never be measured.
//
// It returns the split's weights for wrr (capacity over the chosen set, 0 elsewhere).
func (o *optimizer) chooseSet(now time.Time, ests []*pathEstimator, mode model.Mode, tcp model.TCP) []float64 {
	var live []int
	unknown := 0
	liveMask := make([]bool, len(ests))
	trains := mode == model.WRR && o.probed // see waitForTrains
	for i, e := range ests {
		if e.est.Alive {
			live = append(live, i)
			liveMask[i] = true
			if !e.est.CapacityKnown || math.IsNaN(e.est.Base) || (trains && !e.measured()) {
				unknown++
			}
		}
	}
	weights := func() []float64 {
		w := make([]float64, len(ests))
		for i := range w {
			if o.set[i] {
				w[i] = capacity(ests, i)
			}
		}
		return w
	}
	if unknown > 0 {
		set := make([]bool, len(ests))
		for _, i := range live {
			set[i] = true
		}
		o.set, o.setLive, o.predict, o.setMode = set, nil, 0, mode
		o.reason = fmt.Sprintf("%v over every live path while %d are not measured yet", mode, unknown)
		if trains {
			o.waitForTrains(now, ests)
		}
		return weights()
	}
	all := modelPaths(ests)
	ps := make([]model.Path, len(live))
	for j, i := range live {
		ps[j] = all[i]
	}
	choice, err := model.BestSubset(ps, mode, tcp)
	if err != nil {
		o.reason = "model: " + err.Error()
		o.set = make([]bool, len(ests))
		for _, i := range live {
			o.set[i] = true
		}
		return weights()
	}
	best := make([]bool, len(ests))
	for _, j := range choice.Paths {
		best[live[j]] = true
	}
	// Paths dying or coming back, and a change of mode, are news rather than a change of
	// mind: decide afresh at once. Otherwise the model must promise enough to move.
	cur := o.set
	switch {
	case o.set == nil || !slices.Equal(liveMask, o.setLive) || mode != o.setMode:
		o.adopt(now, best, liveMask, mode, choice.Prediction.Goodput, fmt.Sprintf("%v: model's best set for %v", mode, describe(ps)))
	case slices.Equal(cur, best):
		o.predict = choice.Prediction.Goodput
	default:
		w := make([]float64, len(live))
		for j, i := range live {
			if cur[i] {
				w[j] = ps[j].Rate
			}
		}
		p, err := model.Predict(ps, model.Split{Mode: mode, Weights: w}, tcp)
		if err == nil && choice.Prediction.Goodput > p.Goodput*setGain && now.Sub(o.setSince) >= setDwell {
			o.adopt(now, best, liveMask, mode, choice.Prediction.Goodput, fmt.Sprintf("%v: model predicts %.0f%% more", mode, 100*(choice.Prediction.Goodput/p.Goodput-1)))
		} else if err == nil {
			o.predict = p.Goodput
		}
	}
	return weights()
}

// waitForTrains leaves a bulk split's paths of unknown capacity out of o.set for up to
// unknownWait, while at least one path of known capacity is in: the sending agent's probe
// trains measure an idle path within a second, and a guess is a poor split. A path read
// from one report of pairs waits too: one train on a loaded machine read
// A2's 5 Mbit/s path at 3.8, which left it under-fed and never measured again. On A2 a flow
// that started before a train reached the 100 ms path gave it twice its 5 Mbit/s by the
// guess; the reordering cost slow start, the flow crept at 2 Mbit/s, the path never
// queued, and no busy stretch measured it for the rest of the run.
func (o *optimizer) waitForTrains(now time.Time, ests []*pathEstimator) {
	var waiting, known []int
	for i, e := range ests {
		switch {
		case !o.set[i]:
			o.unknownSince[i] = time.Time{}
		case e.measured():
			known = append(known, i)
		default:
			if o.unknownSince[i].IsZero() {
				o.unknownSince[i] = now
			}
			if now.Sub(o.unknownSince[i]) < unknownWait {
				waiting = append(waiting, i)
			}
		}
	}
	if len(known) == 0 || len(waiting) == 0 {
		return
	}
	for _, i := range waiting {
		o.set[i] = false
	}
	o.reason = fmt.Sprintf("%v over the paths of known capacity while the probe trains measure %d more", model.WRR, len(waiting))
}

func describe(ps []model.Path) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%.2gMbit/%.0fms/%.1f%%", p.Rate/1e6, p.Delay.Seconds()*1e3, 100*p.Loss))
	}
	return strings.Join(parts, " ")
}

func (o *optimizer) adopt(now time.Time, set, live []bool, mode model.Mode, predicted float64, why string) {
	o.set, o.setLive, o.setMode, o.setSince, o.predict = set, live, mode, now, predicted
	var names []string
	for i, in := range set {
		if in {
			names = append(names, fmt.Sprint(i))
		}
	}
	o.reason = fmt.Sprintf("paths %s: %s", strings.Join(names, ","), why)
}

// correct moves each used path's delay parameter towards making its packets arrive with
// the others': measured arrival delay above the traffic-weighted mean of the paths in use
// means the scheduler thinks the path faster than it is. Corrections are kept centred so
// that they never drift the used paths away from the unused ones.
func (o *optimizer) correct(ests []*pathEstimator) {
	var sumW, sumOwd float64
	for i, e := range ests {
		if o.set[i] && e.est.RxPackets >= minPackets && !math.IsNaN(e.est.Owd) {
			sumW += float64(e.est.RxPackets)
			sumOwd += float64(e.est.RxPackets) * e.est.Owd
		}
	}
	if sumW == 0 {
		return
	}
	mean := sumOwd / sumW
	var sumC float64
	for i, e := range ests {
		switch {
		case o.set[i] && e.est.RxPackets >= minPackets && !math.IsNaN(e.est.Owd):
			o.corr[i] = math.Max(-corrMax, math.Min(corrMax, o.corr[i]+corrGain*(e.est.Owd-mean)))
			sumC += float64(e.est.RxPackets) * o.corr[i]
		case !o.set[i]:
			o.corr[i] /= 2
		}
	}
	centre := sumC / sumW
	for i, e := range ests {
		if o.set[i] && e.est.RxPackets >= minPackets {
			o.corr[i] -= centre
		}
	}
}

// probe raises the capacity estimate of paths that carry packets yet stay queue-free
// while another path in use holds a queue: the flow wants more than the split gives
// them. A path edpf leaves idle (its delay is not worth it) is not under-fed.
func (o *optimizer) probe(ests []*pathEstimator) {
	anyBusy := false
	for i, e := range ests {
		anyBusy = anyBusy || (o.set[i] && e.est.Busy)
	}
	for i, e := range ests {
		if o.set[i] && anyBusy && !e.est.Busy && e.est.RxPackets >= minPackets {
			o.starved[i]++
			if o.starved[i] >= 2 {
				e.raise(probeUp)
			}
		} else {
			o.starved[i] = 0
		}
	}
}

// estimates are edpf's inputs for the paths of set, and every path's capacity where it is
// measured, which sizes the sending agent's probe trains; 0 asks for more trains.
func (o *optimizer) estimates(ests []*pathEstimator, set []bool) []*pb.PathEstimate {
	out := make([]*pb.PathEstimate, len(ests))
	for i, e := range ests {
		pe := &pb.PathEstimate{}
		if e.measured() {
			pe.CapacityBps = e.est.Capacity
		}
		base := e.est.Base
		if math.IsNaN(base) {
			base = 0
		}
		pe.DelayUs = math.Max(0, base+o.corr[i])
		if set[i] {
			pe.RateBps = capacity(ests, i)
		}
		out[i] = pe
	}
	return out
}

// balance trims capacity weights so that the paths in use deliver with equal one-way
// delay. Capacity weights are never exact, and under a bulk flow's standing queue an
// error integrates: 1 % too much share fills a path carrying a sixth of the flow by 6 %
// of its rate every second (K1's 200 kbit/s path held 0.4 s more queue than its 1 Mbit/s
// partner under weights off by 2 %). A path that arrives late gives up share until the
// queue behind its lateness has drained; a late path without a queue (a longer path)
// keeps its capacity share, as it cannot arrive any earlier.
func balance(ests []*pathEstimator, w []float64) []float64 {
	// The mean weighs paths by share: a slow path's reports hold a packet or none, but
	// its smoothed delay stands.
	var sumW, sumOwd float64
	for i, e := range ests {
		if owd, _, _ := e.est.arrival(); w[i] > 0 && !math.IsNaN(owd) {
			sumW += w[i]
			sumOwd += w[i] * owd
		}
	}
	if sumW == 0 {
		return w
	}
	mean := sumOwd / sumW
	out := slices.Clone(w)
	for i, e := range ests {
		owd, queue, predicted := e.est.arrival()
		if w[i] == 0 || math.IsNaN(owd) || math.IsNaN(queue) {
			continue
		}
		late := min(owd-mean, queue) / 1e6 // s
		switch {
		case late <= 0:
		case predicted:
			out[i] *= max(drainFloor, 1-late/drainHorizon)
		default:
			out[i] *= 1 - min(balanceGain*late, balanceMax)
		}
	}
	return out
}

// feedFast raises the fastest path's share of w while a flow starts, if that share is
// small and every other path's round trip is beyond HyStart's threshold above its own:
// a round whose first samples miss the path ends slow start at a fraction of the pipe
// (A2: 2 of 3 runs at cwnd 24-102 against 243). The share stays within what the path
// carries at the flow's present rate, so that it does not queue and trip the same test.
func (o *optimizer) feedFast(now time.Time, ests []*pathEstimator, w []float64) []float64 {
	if !o.starting {
		return w
	}
	if o.startAt.IsZero() {
		o.startAt = now
	}
	var total, rate, split float64
	fast, fastBase := -1, math.Inf(1)
	for i, e := range ests {
		if w[i] > 0 && e.est.Alive {
			total += w[i]
			split += capacity(ests, i)
			if e.est.Base < fastBase {
				fast, fastBase = i, e.est.Base
			}
		}
		rate += e.lastRate()
	}
	if fast < 0 || now.Sub(o.startAt) > startMax || o.signals > o.startSigs || rate >= startDone*split {
		o.starting = false
		return w
	}
	ret := o.ackReturn(fastBase)
	rtt := fastBase + ret
	threshold := min(max(rtt/8, hystartMin), hystartMax)
	for i, e := range ests {
		if i != fast && w[i] > 0 && e.est.Alive && (math.IsNaN(e.est.Base) || e.est.Base+ret <= rtt+threshold) {
			return w
		}
	}
	share := feedShare
	if rate > 0 {
		share = min(share, feedRate*capacity(ests, fast)/rate)
	}
	rest := total - w[fast]
	if w[fast]/total >= share || rest <= 0 {
		return w
	}
	out := slices.Clone(w)
	out[fast] = share * rest / (1 - share)
	o.reason = fmt.Sprintf("flow start: path %d fed %.0f %% so that HyStart sees its round trip", fast, 100*share)
	return out
}

// congested decides whether a bulk flow gets an early congestion signal. Capacity weights
// fill every path's queue in step, so a loss-based TCP that probes past the paths'
// capacity overflows all of them at once: measured on S1-4, such tail drops across four
// paths cost cubic three or four window reductions in a row (1177 packets down to 288)
// or a timeout and seconds at a few Mbit/s, where the ideal link's single queue costs
// one. When the paths hold a standing queue, and queue ahead of half a base round trip
// on average (weighted by share: a share error of 2 % leaves one path nearly empty while
// the rest fill), the flow has more in flight than the paths carry, so one early signal costs
// little goodput: the window shrinks by cubic's 30 % and the queues absorb most of that.
// A queue that is already shrinking needs no signal: the flow is backing off (on A1 a
// second signal while slow start's overshoot drained cut the window to 59 packets, and
// the flow ran at half the paths' rate for 8 s).
func (o *optimizer) congested(now time.Time, ests []*pathEstimator, w []float64) bool {
	var total float64
	for i, v := range w {
		if ests[i].est.Alive {
			total += v
		}
	}
	if total <= 0 {
		return false
	}
	var queue, rate float64
	for i, e := range ests {
		share := w[i] / total
		if share == 0 || !e.est.Alive {
			continue
		}
		_, q, _ := e.est.arrival()
		if math.IsNaN(q) {
			return false
		}
		queue += share * q
		rate += capacity(ests, i)
	}
	rtt := o.flowRTT(ests, w)
	if math.IsNaN(rtt) {
		return false
	}
	rising := queue > o.lastQueue
	o.lastQueue = queue
	if queue < signalLevel(rtt, rate) || !rising {
		return false
	}
	// The queue ahead is predicted from what is in flight, and in slow start that swells
	// with every burst while the window is still below the paths' bandwidth-delay product;
	// only a queue that stood through a round trip means the window has outgrown them.
	win := max(standMin, time.Duration(rtt)*time.Microsecond)
	var standing float64
	for i, e := range ests {
		if w[i] > 0 && e.est.Alive {
			if s := e.standing(now, win); s > 0 {
				standing += w[i] / total * s
			}
		}
	}
	if standing < minBusyQueueUs {
		return false
	}
	hold := max(signalHold, time.Duration(signalRTTs*(rtt+queue))*time.Microsecond)
	if !o.signalAt.IsZero() && now.Sub(o.signalAt) < hold {
		return false
	}
	o.signalAt, o.signalQ = now, queue
	o.signals++
	return true
}

// signalLevel is the queue ahead, µs, at which a flow over a split of rate bit/s and a
// base round trip of rtt µs gets its early signal.
func signalLevel(rtt, rate float64) float64 {
	return max(signalMin, signalFrac*rtt+signalSlack*frameBits/rate*1e6)
}

// flowRTT is a flow's base round trip over the split w, µs: data by share, ACKs back over
// their path (the fastest, until they have one), the clocks' offset cancelling between
// the two directions. NaN while a path in use has no base delay.
func (o *optimizer) flowRTT(ests []*pathEstimator, w []float64) float64 {
	var total, meanBase float64
	minBase := math.Inf(1)
	for i, e := range ests {
		if w[i] == 0 || !e.est.Alive {
			continue
		}
		total += w[i]
		meanBase += w[i] * e.est.Base
		minBase = min(minBase, e.est.Base)
	}
	if total == 0 {
		return math.NaN()
	}
	return meanBase/total + o.ackReturn(minBase)
}

// ackReturn is the base one-way delay of the direction's ACKs, µs: their path's once the
// controller has routed them, until then the fastest path's (minBase).
func (o *optimizer) ackReturn(minBase float64) float64 {
	if o.ackBase > 0 {
		return o.ackBase
	}
	return minBase
}

// triggerFor is the sending agent's part of the early signal, for slow start: the
// controller sees a queue a report and a path delay after it forms, while slow start
// adds a pipe's worth to it every round trip (A1: 240 ms of queue overflow 250-300 ms
// after the window passes the pipe, as the signal comes). The agent keeps the queue the
// flow's bytes build at the split's rate and signals when it reaches the same level and
// has stood through a round trip (see pb.SignalTrigger). Only with every rate in use
// measured: a guessed rate would build a queue of its own.
func (o *optimizer) triggerFor(now time.Time, ests []*pathEstimator, w []float64) *pb.SignalTrigger {
	var rate float64
	for i, e := range ests {
		if w[i] == 0 || !e.est.Alive {
			continue
		}
		if !e.est.CapacityKnown || e.est.Capacity <= 0 {
			return nil
		}
		rate += e.est.Capacity
	}
	rtt := o.flowRTT(ests, w)
	if rate == 0 || math.IsNaN(rtt) {
		return nil
	}
	o.trigRates = append(o.trigRates, timed{now, rate})
	o.trigRates = slices.DeleteFunc(o.trigRates, func(r timed) bool { return now.Sub(r.at) > triggerKeep })
	for _, r := range o.trigRates {
		rate = max(rate, r.v)
	}
	window := max(triggerMin, time.Duration(triggerRounds*rtt)*time.Microsecond)
	return &pb.SignalTrigger{RateBps: rate, QueueUs: signalLevel(rtt, rate), StandingUs: rtt, WindowMs: uint32(window.Milliseconds())}
}

// sawTriggered takes the sender's count of triggered signals: the controller's own
// signal holds off after one as after its own.
func (o *optimizer) sawTriggered(now time.Time, n uint32) {
	if o.seenTrig && n > o.triggered {
		o.signals += int(n - o.triggered)
		o.byTrigger += int(n - o.triggered)
		o.signalAt, o.signalQ = now, o.lastQueue
	}
	o.triggered, o.seenTrig = n, true
}

func (o *optimizer) wrrWeights(ests []*pathEstimator, manual []float64) []float64 {
	if manual != nil {
		return slices.Clone(manual)
	}
	w := make([]float64, len(ests))
	for i, e := range ests {
		w[i] = 1
		if e.est.CapacityKnown && e.est.Capacity > 0 {
			w[i] = e.est.Capacity
		}
	}
	return w
}

// shares is the fraction of the packets each path gets under t.
func (t target) shares() []float64 {
	n := len(t.up)
	w := make([]float64, n)
	for i := range w {
		if !t.up[i] {
			continue
		}
		switch t.mode {
		case pb.Mode_MODE_RR:
			w[i] = 1
		case pb.Mode_MODE_WRR:
			w[i] = t.weights[i]
		case pb.Mode_MODE_EDPF:
			w[i] = t.est[i].RateBps
		}
	}
	var sum float64
	for _, v := range w {
		sum += v
	}
	for i := range w {
		if sum > 0 {
			w[i] /= sum
		}
	}
	return w
}

func equal(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// ackPath picks the path that carries the ACKs of a direction whose opposite direction
// stripes by wrr: the fastest live path that makes the round trip, as the data spreads
// over the forward paths, exceed their delay skew by ackMargin; when none does, the
// slowest. One path for all ACKs: spread over paths of different delays (even each ACK on
// the path that evens out its own segment's round trip), the ACKs that take fast paths
// carry SACK blocks for data that came on fast paths, and the sender learns of it early.
// Linux then sees the whole skew as reordering, with a reordering window of a quarter of
// the shortest round trip it sampled, and retransmits spuriously. Measured on A2 with a
// 20 s cubic flow (ideal link 13.25 Mbit/s): all ACKs on the 50 ms path 12.97 Mbit/s, on
// the 100 ms path 12.84, each ACK evening out its segment's round trip 8.30-9.16, ACKs on
// the 10 ms path 2.6 (srtt 70 ms below the 90 ms skew: cwnd held at 15 segments). It
// returns -1 while the delays are not known.
func ackPath(fwd []*pathEstimator, shares []float64, rev []*pathEstimator) (int, string) {
	var mean float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, e := range fwd {
		if i >= len(shares) || shares[i] == 0 {
			continue
		}
		if math.IsNaN(e.est.Base) {
			return -1, ""
		}
		mean += shares[i] * e.est.Base
		lo, hi = math.Min(lo, e.est.Base), math.Max(hi, e.est.Base)
	}
	if math.IsInf(lo, 0) {
		return -1, ""
	}
	skew := hi - lo
	best, slowest := -1, -1
	for j, e := range rev {
		if !e.est.Alive || math.IsNaN(e.est.Base) {
			continue
		}
		if slowest < 0 || e.est.Base > rev[slowest].est.Base {
			slowest = j
		}
		if mean+e.est.Base >= ackMargin*skew && (best < 0 || e.est.Base < rev[best].est.Base) {
			best = j
		}
	}
	if best < 0 {
		best = slowest
	}
	if best < 0 {
		return -1, ""
	}
	return best, fmt.Sprintf("ACKs on path %d: round trip %.0f ms over a delay skew of %.0f ms", best, (mean+rev[best].est.Base)/1e3, skew/1e3)
}
