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
