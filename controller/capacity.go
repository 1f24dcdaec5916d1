package controller

import (
	"slices"
	"time"
)

// Capacity, from deliveries over a busy stretch and from packet pairs. The reasons:
// docs/controller.md#estimation.
const (
	dispKeep    = 12                     // recent reports with packet pairs kept ...
	dispAge     = 2 * time.Second        // ... for at most this long ...
	dispMin     = 3                      // ... unless fewer remain
	pairRaise   = 1.2                    // an idle path's trains this far above a measured capacity raise it
	pairSpread  = 2.5                    // reports of pairs this far from their median are outliers
	busyStretch = 300 * time.Millisecond // a busy stretch this long counts capacity: a report holds too few
)

type delivery struct {
	at    time.Time
	bytes uint64
	busy  bool
}

// pairReport is what one report's packet pairs measured: their rate and how many.
type pairReport struct {
	at     time.Time
	bps, n float64
}

// busyCapacity estimates the capacity from deliveries: over a stretch with a standing
// queue throughout the path delivers exactly its capacity, and a path that delivered
// more than the estimate over a long enough stretch has at least that.
func (e *pathEstimator) busyCapacity(o Observation) {
	est := &e.est
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
}

// pairCapacity estimates the capacity from packet pairs (probe trains on idle paths,
// bursts of data) until a busy stretch measures it exactly. Pairs read while the path
// carries a flow only raise the estimate, as the receiving host spreads a pair's
// arrivals under load; a path estimated too high queues, and its busy stretch measures
// it. After a busy stretch only the probe trains of an idle path raise it (a path the
// split left out, whose capacity may have grown since): data pairs of a loaded path read
// it high as often as low (K1's 1 Mbit/s path at 1.3-1.4, then taken for the best path
// alone), and a path in use that is fed short is the optimiser's to probe.
func (e *pathEstimator) pairCapacity(o Observation) {
	est := &e.est
	if e.hasPrev && sub(o.RxBytes, e.prev.RxBytes)*8 >= frameBits {
		e.lastFlow = o.At
	}
	// A report of one pair counts: a slow path's trains give one a report (K1's 200 kbit/s
	// path sends a frame every 60 ms and reports come every 50 ms), and measured() asks
	// for two reports anyway. Taking only reports of two or more, that path was read by
	// a report's chance pair or never, and the flow was split to it at a 10 Mbit/s guess.
	if o.DispN >= 1 && o.DispBps > 0 {
		e.pairs = append(e.pairs, pairReport{o.At, o.DispBps, float64(o.DispN)})
	}
	// A path's pairs come a few a second, so an estimate over a count of them lags a
	// change by seconds: the older reports age out, all but the newest dispMin.
	for len(e.pairs) > dispKeep || len(e.pairs) > dispMin && o.At.Sub(e.pairs[0].at) > dispAge {
		e.pairs = e.pairs[1:]
	}
	switch {
	case len(e.pairs) == 0:
	case !e.busyKnown:
		if m := pairRate(e.pairs); !est.CapacityKnown || m > est.Capacity || o.At.Sub(e.lastFlow) >= busyKeep {
			est.Capacity, est.CapacityKnown = m, true
		}
	case o.At.Sub(e.lastFlow) >= busyKeep:
		// Only pairs read since the path last carried a flow: the trains of its idle spell.
		quiet := slices.DeleteFunc(slices.Clone(e.pairs), func(r pairReport) bool { return !r.at.After(e.lastFlow) })
		if len(quiet) >= dispMin {
			if m := pairRate(quiet); m > pairRaise*est.Capacity {
				est.Capacity = m
			}
		}
	}
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

// raise lifts the capacity estimate of a path the split under-feeds.
func (e *pathEstimator) raise(f float64) {
	if e.est.CapacityKnown {
		e.est.Capacity *= f
	}
}

// pairRate is the packet pairs' bytes over their arrival gaps, summed over the reports
// (each report's rate is already such a ratio over its pairs). A ratio of sums and not a
// median of rates: a link that sends in bursts (an LTE cell per TTI) delivers a probe
// train over a whole number of bursts, so one train reads its path at a multiple of the
// burst spacing; over trains that met the bursts at every phase the arrival spans add up
// to the trains' serialisation times. Reports further than pairSpread from the (lower)
// median are left out: a train whose sender or link stalled for a few milliseconds spans
// them, and one whose pairs arrived in one batch, where bursts make at most a factor of
// two. See docs/controller.md#estimation.
func pairRate(s []pairReport) float64 {
	rates := make([]float64, len(s))
	for i, r := range s {
		rates[i] = r.bps
	}
	slices.Sort(rates)
	// The lower median: of two reports, one that read a fast path at the host's speed
	// (pairs that arrived in one batch: the lab's 53 Mbit/s path once read 5388) would
	// otherwise be the median and leave the other out, and the flow went to that path
	// alone.
	med := rates[(len(rates)-1)/2]
	var n, t float64
	for _, r := range s {
		if r.bps >= med/pairSpread && r.bps <= med*pairSpread {
			n += r.n
			t += r.n / r.bps
		}
	}
	return n / t
}
