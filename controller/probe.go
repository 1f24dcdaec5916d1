package controller

import (
	"math"
	"time"

	"github.com/plait/plait/model"
)

// Probing the capacity of paths the split under-feeds. The reasons:
// docs/controller.md#path-set.
const (
	probeUp = 1.15 // a path no busy stretch has measured grows by this per interval until it queues
	// A queued path's busy stretch this close to its estimate: the estimate is right. A
	// busy rate counts a 2 Mbit/s path's 50 packets over 300 ms, a few percent apart.
	agreeTol = 0.1
)

// pulse is a bounded probe of a measured path under wrr: its capacity estimate, and so
// its share, raised by gain from from at at, until the packets sent since have shown
// whether the path carries the more.
type pulse struct {
	at         time.Time
	from, gain float64
}

// probe raises the capacity estimate of paths that carry packets yet have held no queue
// through the flow's last round trip (at least standMin) while another path in use has
// held one throughout, long enough for a busy stretch to measure it: the flow wants more
// than the split gives them. A round trip, as each path shows the flow's window one path
// delay late: as a window cut drains the queues, the shortest path shows it first. (While
// the queued path is not measured yet, it may be the one estimated too high: a path whose
// capacity fell queues, and the others then carry less than they could as well.) Only an
// under-estimate needs this. A path estimated too high is fed past its capacity, queues,
// and its busy stretch measures it exactly; one estimated too low is fed below its
// capacity, never queues, and nothing it delivers says by how much (a self-clocked flow
// leaves no gaps for probe trains, and pairs read on a link that sends per TTI or a host
// that batches arrivals come out short: the lab's 1 ms TTI read a 79 Mbit/s path as 23).
// A path edpf leaves idle (its delay is not worth it) is not under-fed.
//
// A path no busy stretch has measured yet (read by pairs, or guessed), and every path
// under edpf, is raised by probeUp an interval until it queues, and its busy stretch then
// measures it. A measured path under wrr gets a pulse instead (startPulse, judge): a path
// fed its exact capacity holds no standing queue either while its partners are fed a
// little more, and raised until it queued, it took the flow's queue from them until it
// overflowed (S1-4's four measured paths: 94 Mbit/s and 6 retransmissions before wrr
// raised them, 70-76 and 1,300-2,200 with it).
func (o *optimizer) probe(now time.Time, ests []*pathEstimator, mode model.Mode) {
	w := make([]float64, len(ests))
	for i := range ests {
		if o.set[i] {
			w[i] = capacity(ests, i)
		}
	}
	win := standMin
	if rtt := o.flowRTT(ests, w); rtt > 0 {
		win = max(win, time.Duration(rtt)*time.Microsecond)
	}
	// The queued paths must be measured, and at their estimates: a queued path fed more
	// than it carries is the one estimated wrong (its capacity fell), and the others then
	// carry less than they could too.
	anyQueued := false
	for i, e := range ests {
		if rate, measured := e.busyRate(); o.set[i] && e.est.Alive && measured && rate >= (1-agreeTol)*e.est.Capacity && e.queued(now, win) {
			anyQueued = true
		}
	}
	pulsing, next := false, -1
	for i, e := range ests {
		if !e.pulse.at.IsZero() {
			if ended, carried := e.judge(now, o.set[i] && e.est.Alive && mode == model.WRR); !ended {
				pulsing = true
				continue
			} else if !carried {
				o.starved[i] = 0
				continue
			}
		}
		if !(o.set[i] && e.est.Alive && anyQueued && e.empty(now, win) && e.est.RxPackets >= minPackets) {
			o.starved[i] = 0
			continue
		}
		o.starved[i]++
		switch {
		case o.starved[i] < 2:
		case mode == model.WRR && e.busyKnown:
			if !e.carries(now, win) {
				break
			}
			if next < 0 || o.starved[i] > o.starved[next] {
				next = i
			}
		default:
			e.raise(probeUp)
		}
	}
	// One pulse at a time, on the path under-fed longest: wrr's shares are relative, and
	// paths raised together raise none.
	if next >= 0 && !pulsing {
		if h := o.headroom(now, ests, next, win); h > 0 {
			ests[next].startPulse(now, h)
		}
	}
}

// headroom is the queue a pulse may add to path j, µs: the least standing queue a queued
// path in use holds (no path is made fuller than the flow keeps another; and as wrr
// splits the flow's window, what the pulse adds to the path's queue comes out of its
// partners'), and no more than the path has held itself, so its buffer takes it.
func (o *optimizer) headroom(now time.Time, ests []*pathEstimator, j int, win time.Duration) float64 {
	e := ests[j]
	if !e.est.CapacityKnown || e.est.Capacity <= 0 {
		return 0
	}
	h := e.held * 8 / e.est.Capacity * 1e6
	for i, p := range ests {
		if i != j && o.set[i] && p.est.Alive && p.queued(now, win) {
			h = min(h, p.standing(now, win))
		}
	}
	return h
}

// startPulse raises a measured path's capacity estimate by as much as adds headroom (µs)
// to its queue if the estimate was right, over the time the pulse runs before its
// packets have been measured: the path's delay, and standMin of their reports.
func (e *pathEstimator) startPulse(now time.Time, headroom float64) {
	owd := e.delay()
	if !e.est.CapacityKnown || math.IsNaN(owd) {
		return
	}
	gain := 1 + headroom/(owd+float64(standMin.Microseconds()))
	e.pulse = pulse{at: now, from: e.est.Capacity, gain: gain}
	e.est.Capacity *= gain
}

// judge ends a pulse once the path's reports tell what it carried (keep false: at once):
// a queue (the path reached its capacity) or standMin of the raised packets' arrivals
// without one. Either way the path's capacity is what it delivered since the raised
// packets began to arrive, between what it was raised from and to: a path that queued
// delivered its capacity, and one that did not has at least what it delivered. carried:
// more than before and without a queue, so another pulse may follow.
func (e *pathEstimator) judge(now time.Time, keep bool) (ended, carried bool) {
	p := &e.pulse
	arrive := p.at.Add(time.Duration(e.delay()) * time.Microsecond)
	queued := false
	for _, q := range e.queues {
		queued = queued || q.at.After(arrive) && q.v > e.est.busyQueue()
	}
	first, last := e.deliveredOver(func(at time.Time) bool { return at.After(arrive) })
	span := last.at.Sub(first.at)
	if keep && !queued && span < standMin && !p.stale(now) {
		return false, false
	}
	// Less a frame: a slow path's reports hold a few packets, and one more in the span
	// would read as a higher rate.
	rate := 0.0
	if keep && span > 0 {
		rate = (float64(sub(last.bytes, first.bytes))*8 - frameBits) / span.Seconds()
	}
	capacity := max(p.from, min(p.gain*p.from, rate))
	e.est.Capacity = capacity
	e.pulse = pulse{}
	return true, !queued && span >= standMin && rate > p.from
}

// stale: the pulse has run as long as deliveries are kept, and ends without a verdict
// (the path's reports stopped, or the optimiser stopped probing: a flow ended).
func (p pulse) stale(now time.Time) bool { return !p.at.IsZero() && now.Sub(p.at) >= busyKeep }

// delay is the path's one-way delay as its packets meet it, µs (NaN until measured).
func (e *pathEstimator) delay() float64 {
	if math.IsNaN(e.est.Owd) {
		return e.est.Base
	}
	return e.est.Owd
}

// carries: the path delivered its estimate over the last win (within agreeTol), so the
// split fed it its share and the flow took it. A path the flow leaves short (its window
// behind another path's queue, or cut) says nothing of its capacity when raised: the
// flow has no more to give it.
func (e *pathEstimator) carries(now time.Time, win time.Duration) bool {
	first, last := e.deliveredOver(func(at time.Time) bool { return now.Sub(at) <= win })
	span := last.at.Sub(first.at)
	return span > 0 && float64(sub(last.bytes, first.bytes))*8/span.Seconds() >= (1-agreeTol)*e.est.Capacity
}

// deliveredOver is the first and the last of the path's recent deliveries that in takes.
func (e *pathEstimator) deliveredOver(in func(at time.Time) bool) (first, last delivery) {
	for _, d := range e.deliv {
		if in(d.at) {
			if first.at.IsZero() {
				first = d
			}
			last = d
		}
	}
	return first, last
}
