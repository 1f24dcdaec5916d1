package controller

import (
	"math"
	"slices"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// A controller that (re)connects to a sender adopts the split the sender holds instead
// of writing its own from estimates it does not have yet: a restarted controller's
// estimators start empty, and a split decided from them (capacities guessed, a flow
// taken for one that starts, even weights while nothing is measured) cost a running
// flow a stall of 0.5-0.8 s each time. The adopted split is held, but for liveness,
// until every live path is measured (a known base delay and capacity: what the model
// needs to choose), or for unknownWait at most, the time the optimiser gives the probe
// trains; from then on it changes when the estimates say so, through the usual
// hysteresis. A fresh sender's split (the operator's weights) is adopted the same way.

// adoptAgent makes the split an agent's tunnel holds the direction's current one.
func (c *Controller) adoptAgent(d *direction, t *pb.Tunnel, now time.Time) {
	cur := target{mode: t.Config.Mode, ackPath: t.Config.AckPath, trigger: t.Config.SignalTrigger, kept: t.Config.WindowKept,
		up: make([]bool, len(t.Paths)), weights: make([]float64, len(t.Paths))}
	if cur.trigger.GetRateBps() == 0 {
		cur.trigger = nil
	}
	// The configured weights, not the shares over the paths up now: a path the agent
	// took out keeps its weight for when it comes back.
	hasEst := false
	for i, p := range t.Paths {
		cur.up[i], cur.weights[i] = p.Up, p.Weight
		if len(t.Config.Weights) == len(t.Paths) {
			cur.weights[i] = t.Config.Weights[i]
		}
		hasEst = hasEst || p.Estimate != nil
	}
	if hasEst {
		for _, p := range t.Paths {
			e := p.Estimate
			if e == nil {
				e = &pb.PathEstimate{}
			}
			cur.est = append(cur.est, e)
		}
	}
	c.adopt(d, cur, now)
}

// adoptSplit makes a split switch's live shares the direction's current split.
func (c *Controller) adoptSplit(d *direction, shares []float64, now time.Time) {
	cur := target{mode: pb.Mode_MODE_WRR, up: make([]bool, len(shares)), weights: slices.Clone(shares)}
	for i := range cur.up {
		cur.up[i] = true
	}
	c.adopt(d, cur, now)
}

func (c *Controller) adopt(d *direction, cur target, now time.Time) {
	d.current, d.pushed = cur, true
	// The flow the sender carries, if any, is under way: it is not a start to feed (an
	// idle direction re-arms the start by itself, bulkLoad).
	d.opt.starting = false
	c.adopted[d] = now
}

// holding says whether a direction still holds the split it adopted, and stops holding
// once its estimates are complete or unknownWait has passed.
func (c *Controller) holding(d *direction, now time.Time) bool {
	at, ok := c.adopted[d]
	if !ok {
		return false
	}
	if now.Sub(at) < unknownWait && !measuredAll(d) {
		return true
	}
	delete(c.adopted, d)
	return false
}

// measuredAll: every live path of the direction has a known base delay and capacity,
// measured from a busy stretch or from more than one report of probe trains (a split
// switch's paths, which carry no trains, from any capacity estimate).
func measuredAll(d *direction) bool {
	for _, e := range d.ests {
		if !e.est.Alive {
			continue
		}
		if math.IsNaN(e.est.Base) || !e.est.CapacityKnown || (d.split == nil && !e.measured()) {
			return false
		}
	}
	return true
}

// livenessOnly is current with the paths' liveness as estimated: what changes between
// intervals, and while a direction holds an adopted split.
func livenessOnly(d *direction) target {
	want := cloneTarget(d.current)
	for i, e := range d.ests {
		if i < len(want.up) {
			want.up[i] = e.est.Alive
		}
	}
	return want
}
