package controller

import (
	"math"
	"slices"

	pb "github.com/plait/plait/api/plait/v1"
)

// When a new target is news to the sending agent: every rewrite of its configuration costs
// a datapath update, and the estimates move by a few percent each interval. The reasons:
// docs/controller.md#hysteresis.
const (
	shareTol    = 0.01 // weights and rates within 1 % make the same split
	delayTolUs  = 200  // delays within this many µs are the same
	capacityTol = 0.2  // a probe train's length need not follow the capacity or spread closely
	triggerTol  = 0.1  // a trigger's estimates move by a few percent each rewrite
)

func (t target) equal(o target) bool {
	if t.mode != o.mode || !slices.Equal(t.up, o.up) || t.ackPath != o.ackPath || t.signal != o.signal || t.kept != o.kept ||
		len(t.weights) != len(o.weights) || len(t.est) != len(o.est) || !sameTrigger(t.trigger, o.trigger) {
		return false
	}
	for i := range t.weights {
		if !near(t.weights[i], o.weights[i], shareTol) {
			return false
		}
	}
	for i := range t.est {
		// A train's length need not follow the capacity or the spread closely.
		if !near(t.est[i].RateBps, o.est[i].RateBps, shareTol) || math.Abs(t.est[i].DelayUs-o.est[i].DelayUs) > delayTolUs ||
			!near(t.est[i].CapacityBps, o.est[i].CapacityBps, capacityTol) || !near(t.est[i].SpreadUs, o.est[i].SpreadUs, capacityTol) {
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
	return near(a.RateBps, b.RateBps, triggerTol) && near(a.QueueUs, b.QueueUs, triggerTol) && near(a.StandingUs, b.StandingUs, triggerTol)
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }
