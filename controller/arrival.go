package controller

import (
	"math"
	"slices"
	"time"

	"github.com/plait/plait/model"
)

// Evening the arrivals of the paths in use: edpf's delay correction, wrr's balance, and
// probing the capacity of under-fed paths. The reasons: docs/controller.md#path-set.
const (
	corrGain     = 0.1   // delay correction per interval, of the lateness: seen a path delay late
	corrMax      = 200e3 // µs: the most the correction moves a path's delay
	probeUp      = 1.15  // an under-fed path's capacity grows by this per interval until it queues
	minPackets   = 3     // a path with this many packets in a report carries traffic
	balanceGain  = 0.5   // a late path over its own queue loses this share per second of lateness
	balanceMax   = 0.3   // ... at most this much
	drainHorizon = 0.5   // s: with its queue predicted, a late path drains its lateness this fast
	drainFloor   = 0.1   // ... down to this fraction of its capacity share
)

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

// probe raises the capacity estimate of paths that carry packets yet have held no queue
// through the flow's last round trip (at least standMin) while another path in use has
// held one throughout, long enough for a busy stretch to measure it: the flow wants more
// than the split gives them. A round trip, as each path shows the flow's window one path
// delay late: as a window cut drains the queues, the shortest path shows it first. (While the queued
// path is not measured yet, it may be the one estimated too high: a path whose capacity
// fell queues, and the others then carry less than they could as well.) Only an
// under-estimate needs this. A path estimated too high is fed
// past its capacity, queues, and its busy stretch measures it exactly; one estimated too
// low is fed below its capacity, never queues, and nothing it delivers says by how much
// (a self-clocked flow leaves no gaps for probe trains, and pairs read on a link that
// sends per TTI or a host that batches arrivals come out short: the lab's 1 ms TTI read a
// 79 Mbit/s path as 23). Raised until it queues too, it is then measured. A path edpf
// leaves idle (its delay is not worth it) is not under-fed. Under wrr only a path no busy
// stretch has measured yet is raised: wrr feeds every path its capacity share, so among
// measured paths fed exactly one queues a little more than the others by chance, and
// raising the others overfed them (S1-4's four measured paths: 94 Mbit/s and 6
// retransmissions before wrr probed, 70-76 and 1,300-2,200 with it).
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
	anyQueued := false
	for i, e := range ests {
		_, measured := e.busyRate()
		anyQueued = anyQueued || (o.set[i] && e.est.Alive && measured && e.queued(now, win))
	}
	for i, e := range ests {
		if o.set[i] && e.est.Alive && anyQueued && e.empty(now, win) && e.est.RxPackets >= minPackets &&
			(mode != model.WRR || !e.busyKnown) {
			o.starved[i]++
			if o.starved[i] >= 2 {
				e.raise(probeUp)
			}
		} else {
			o.starved[i] = 0
		}
	}
}

// balance trims capacity weights so that the paths in use deliver with equal one-way
// delay. Capacity weights are never exact, and under a bulk flow's standing queue an
// error integrates: 1 % too much share fills a path carrying a sixth of the flow by 6 %
// of its rate every second. A path that arrives late gives up share until the queue
// behind its lateness has drained; a late path without a queue (a longer path) keeps
// its capacity share, as it cannot arrive any earlier.
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
