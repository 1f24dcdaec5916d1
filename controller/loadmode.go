package controller

import (
	"math"
	"time"
)

// Bulk or light load: a light direction runs edpf (for light traffic the fastest path
// alone), a bulk one wrr at the paths' capacities, which costs a bulk flow less queueing
// for order. The reasons: docs/controller.md#load-mode.
const (
	bulkAbove  = 0.6             // delivery above this share of the fastest path's capacity is bulk
	lightBelow = 0.3             // below this share for lightFor it is light again
	idleBelow  = 0.02            // below this share it is idle: the next flow starts afresh
	lightFor   = 2 * time.Second // light this long before leaving wrr: modes do not flap
	loadGain   = 0.3             // smoothing of the delivery rate the decision reads
)

// bulkLoad decides, with hysteresis, whether the direction carries bulk traffic: more than
// a share of what its lowest-delay live path can carry. A direction of full-sized packets
// that delivers little is not light either: it is a bulk flow whose window collapsed (a
// timeout, or a burst of spurious recoveries), which spread over the paths again as it
// regrows would meet reordering at its least tolerant; light traffic (ACKs, interactive
// flows) is made of small packets.
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
	if full, ok := fullSized(ests); ok {
		o.full = full // a report without packets leaves the verdict as it was
	}
	if fastest < 0 {
		return o.bulk
	}
	c := capacity(ests, fastest)
	switch {
	case o.load < idleBelow*c:
		// Idle is not light: the next flow starts as a new direction's does, striped.
		o.bulk, o.lightSince = true, time.Time{}
		o.starting, o.startAt, o.startSigs = true, time.Time{}, o.signals
	case !o.bulk && o.load > bulkAbove*c:
		o.bulk = true
		o.lightSince = time.Time{}
	case o.bulk && o.load < lightBelow*c && !o.full:
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

// fullSized: the direction's packets of the last report average at least half a
// full-sized frame, as a bulk flow's segments do; an ACK stream's or an interactive
// flow's do not. ok is false when the report held no packets.
func fullSized(ests []*pathEstimator) (full, ok bool) {
	var bits, pkts float64
	for _, e := range ests {
		bits += e.lastRate() * e.prev.Interval.Seconds()
		pkts += float64(e.est.RxPackets)
	}
	return pkts > 0 && bits/pkts >= frameBits/2, pkts > 0
}
