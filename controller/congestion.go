package controller

import (
	"math"
	"slices"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// The early congestion signal: one loss (or CE mark) the sender gives a bulk flow whose
// queues stand and grow, before they overflow on every path at once. The reasons:
// docs/controller.md#congestion-signal.
const (
	signalFrac    = 0.5                    // queue ahead of this share of the base round trip
	signalMin     = 5e3                    // µs: ... and at least this
	signalSlack   = 4                      // packets more: a cut lands on whole segments
	cubicBeta     = 0.3                    // the share of its window a cubic flow gives up on a loss
	signalHold    = time.Second            // at most one signal this often ...
	signalRTTs    = 4                      // ... and every this many round trips
	standMin      = 100 * time.Millisecond // the queue stood this long (two reports) at least
	triggerRounds = 12                     // the agent's trigger covers slow start's first rounds
	triggerMin    = 2 * time.Second        // ... and at least this long
	triggerKeep   = 10 * time.Second       // its rate is the most carried over this: too low cuts early
)

// congested decides whether a bulk flow gets an early congestion signal. Capacity weights
// fill every path's queue in step, so a loss-based TCP that probes past the paths'
// capacity overflows all of them at once, which costs it several window reductions in a
// row or a timeout, where the ideal link's single queue costs one. When the paths hold a
// standing queue, and queue ahead of signalLevel on average (weighted by share: a share
// error of 2 % leaves one path nearly empty while the rest fill), the flows have more in
// flight than the paths carry, so one early signal costs little goodput: one window
// shrinks by cubic's 30 % and the queues absorb that. A queue that is already shrinking
// needs no signal: the flows are backing off.
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
	if queue < signalLevel(rtt, rate, o.flows) || !rising {
		return false
	}
	// The queue ahead is predicted from what is in flight, and in slow start that swells
	// with every burst while the window is still below the paths' bandwidth-delay product;
	// only a queue that stood through a round trip means the window has outgrown them.
	win := max(standMin, time.Duration(rtt)*time.Microsecond)
	// A standing queue within a path's noise (busyQueue: its jitter, or two frames'
	// serialisation) is none: sweep-3-07's paths, with 4 ms of jitter and 1-3.6 Mbit/s,
	// read 5-14 ms of queue that never emptied while the window was below the pipe, and
	// a send burst's queue ahead then drew a signal every two seconds.
	var standing, noise float64
	for i, e := range ests {
		if w[i] > 0 && e.est.Alive {
			if s := e.standing(now, win); s > 0 {
				standing += w[i] / total * s
			}
			noise += w[i] / total * e.est.busyQueue()
		}
	}
	if standing <= noise {
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

// signalLevel is the queue ahead, µs, at which n flows over a split of rate bit/s and a
// base round trip of rtt µs get an early signal. The signal cuts one flow's window, by
// cubic's β of its share: the queue that keeps the paths busy through the cut is
// rtt·(β/n)/(1−β/n), which signalFrac sets (with a margin) for one flow, and which a
// flow among n needs (1−β)/(n−β) of.
func signalLevel(rtt, rate, n float64) float64 {
	n = max(n, 1)
	return max(signalMin, signalFrac*(1-cubicBeta)/(n-cubicBeta)*rtt+signalSlack*frameBits/rate*1e6)
}

// flowRTT is a flow's base round trip over the split w, µs: data by share, ACKs back over
// their path (the fastest, until they have one), the clocks' offset cancelling between
// the two directions. Resequenced (inOrder), every packet reaches TCP when the slowest
// path in use delivers, so that path's delay is the data's: by share, sweep-3-07's
// signal level stood at half of 41 ms where the flow's round trip was 97 ms, and nine
// signals in 20 s held cubic's window at half the paths' bandwidth-delay product. NaN
// while a path in use has no base delay.
func (o *optimizer) flowRTT(ests []*pathEstimator, w []float64) float64 {
	var total, meanBase, maxBase float64
	minBase := math.Inf(1)
	for i, e := range ests {
		if w[i] == 0 || !e.est.Alive {
			continue
		}
		total += w[i]
		meanBase += w[i] * e.est.Base
		minBase, maxBase = min(minBase, e.est.Base), max(maxBase, e.est.Base)
	}
	if total == 0 {
		return math.NaN()
	}
	if o.inOrder {
		return maxBase + o.ackReturn(minBase)
	}
	return meanBase/total + o.ackReturn(minBase)
}

// triggerFor is the sending agent's part of the early signal, for slow start: the
// controller sees a queue a report and a path delay after it forms, while slow start
// adds a pipe's worth to it every round trip, so its own signal comes as the queue
// overflows. The agent keeps the queue the flow's bytes build at the split's rate and
// signals when it reaches the same level and has stood through a round trip (see
// pb.SignalTrigger). Only with every rate in use measured: a guessed rate would build a
// queue of its own.
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
	return &pb.SignalTrigger{RateBps: rate, QueueUs: signalLevel(rtt, rate, o.flows), StandingUs: rtt, WindowMs: uint32(window.Milliseconds())}
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
