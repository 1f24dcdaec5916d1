package controller

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/plait/plait/model"
)

// A flow's start: cubic's HyStart ends slow start once a round's smallest early RTT
// sample exceeds the smallest ever, which the fastest path sets only if it carries some of
// a round's first packets. The reasons: docs/controller.md#slow-start-feed.
const (
	feedShare  = 0.4             // the fastest path's share: HyStart misses it in 2 % of rounds
	feedRate   = 0.45            // of what it carries at the flow's rate: slow start doubles fast
	startDone  = 0.9             // the start ends at this share of the split's capacity delivered
	startMax   = 3 * time.Second // ... or after this long
	hystartMin = 4e3             // µs: HyStart's delay threshold clamped as the kernel does ...
	hystartMax = 16e3            // ... (HYSTART_DELAY_MIN, HYSTART_DELAY_MAX)
)

// feedFast raises the fastest path's share of w while a flow starts, if that share is
// small and every other path's round trip is beyond HyStart's threshold above its own:
// a round whose first samples miss the path ends slow start at a fraction of the pipe.
// The share stays within what the path carries at the flow's present rate, so that it
// does not queue and trip the same test.
//
// A resequenced flow needs none: the resequencer holds every path's packets to the
// slowest one's delay, so a round's samples are alike whichever paths carry it.
func (o *optimizer) feedFast(now time.Time, ests []*pathEstimator, w []float64, tcp model.TCP) []float64 {
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
	if tcp.Resequenced {
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
