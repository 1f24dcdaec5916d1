package controller

import (
	"math"
	"slices"
)

// Evening the arrivals of the paths in use: edpf's delay correction and wrr's balance.
// The reasons: docs/controller.md#path-set.
const (
	corrGain     = 0.1   // delay correction per interval, of the lateness: seen a path delay late
	corrMax      = 200e3 // µs: the most the correction moves a path's delay
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
