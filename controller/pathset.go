package controller

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/plait/plait/model"
)

// Which paths the split uses. The reasons: docs/controller.md#path-set.
const (
	setGain     = 1.05            // a new set must promise this much more goodput: sets do not flap
	setDwell    = 2 * time.Second // ... and the current one must have held this long
	unknownRate = 10e6            // an unmeasured path's guess (or the best known): it corrects itself
	unknownWait = 2 * time.Second // wrr waits this long for probe trains (see waitForTrains)
	lossFloor   = 0.001           // less loss than this is counting noise, not news to the model
)

// guess is the capacity assumed for a path whose capacity is not known yet.
func guess(ests []*pathEstimator) float64 {
	g := unknownRate
	for _, e := range ests {
		if e.est.CapacityKnown {
			g = max(g, e.est.Capacity)
		}
	}
	return g
}

func capacity(ests []*pathEstimator, i int) float64 {
	if e := ests[i].est; e.CapacityKnown && e.Capacity > 0 {
		return e.Capacity
	}
	return guess(ests)
}

// modelPaths describes the paths to the model as the estimator sees them, with seen of
// each path's random loss: the share the tunnel does not repair before TCP sees it.
//
// Losses count once every live path's packets have measured its loss since it came up:
// the more a path carries the sooner its loss is measured, and the busiest path's would
// be weighed against the others' read as none (sweep-7-03 left out its 9.7 Mbit/s path,
// 0.49 % measured, for three of 0.54-0.94 % not measured yet, then took it back).
func modelPaths(ests []*pathEstimator, seen float64) []model.Path {
	measured := true
	for _, e := range ests {
		measured = measured && (!e.est.Alive || e.lossCounted)
	}
	ps := make([]model.Path, len(ests))
	for i, e := range ests {
		rate := capacity(ests, i)
		base := e.est.Base
		if math.IsNaN(base) || base < 0 {
			base = 0
		}
		loss := 0.0
		if measured && e.est.LossKnown && e.est.Loss >= lossFloor {
			loss = math.Min(e.est.Loss, 0.5) * seen
		}
		ps[i] = model.Path{Rate: rate, Delay: time.Duration(base * 1e3), Loss: loss}
	}
	return ps
}

// chooseSet picks the paths edpf may use: the model's best subset of the live paths,
// changed only when the gain is worth it and the current set has settled. While some
// path's capacity or base delay is unknown every live path stays in: the model would be
// choosing between guesses (a restarted agent's path read as 0 ms long and was dropped
// for its skew), and a path left out would never be measured.
//
// It returns the split's weights for wrr (capacity over the chosen set, 0 elsewhere).
func (o *optimizer) chooseSet(now time.Time, ests []*pathEstimator, mode model.Mode, tcp model.TCP) []float64 {
	var live []int
	unknown := 0
	liveMask := make([]bool, len(ests))
	trains := mode == model.WRR && o.probed // see waitForTrains
	for i, e := range ests {
		if e.est.Alive {
			live = append(live, i)
			liveMask[i] = true
			if !e.est.CapacityKnown || math.IsNaN(e.est.Base) || (trains && !e.measured()) {
				unknown++
			}
		}
	}
	weights := func() []float64 {
		w := make([]float64, len(ests))
		for i := range w {
			if o.set[i] {
				w[i] = capacity(ests, i)
			}
		}
		return w
	}
	if unknown > 0 {
		set := make([]bool, len(ests))
		for _, i := range live {
			set[i] = true
		}
		o.set, o.setLive, o.predict, o.setMode = set, nil, 0, mode
		o.reason = fmt.Sprintf("%v over every live path while %d are not measured yet", mode, unknown)
		if trains {
			o.waitForTrains(now, ests)
		}
		return weights()
	}
	all := modelPaths(ests, o.seen)
	ps := make([]model.Path, len(live))
	// The set is chosen with every path that no busy stretch has measured at the most it
	// might carry: pairs read a fast path short on a link that sends per TTI or under
	// jitter (sweep-1-06's 78.9 Mbit/s path read as 23, and the model dropped it), and a
	// path left out is never fed, so never probed or measured. In the set at its
	// estimate's weight, probing raises it until it queues, and then it is measured.
	opt := make([]model.Path, len(live))
	for j, i := range live {
		ps[j], opt[j] = all[i], all[i]
		if !ests[i].busyKnown {
			opt[j].Rate = max(opt[j].Rate, guess(ests))
		}
	}
	choice, err := model.BestSubset(opt, mode, tcp)
	if err != nil {
		o.reason = "model: " + err.Error()
		o.set = make([]bool, len(ests))
		for _, i := range live {
			o.set[i] = true
		}
		return weights()
	}
	choice = bounded(opt, ps, lean(opt, ps, choice, mode, tcp), mode, tcp)
	best := make([]bool, len(ests))
	for _, j := range choice.Paths {
		best[live[j]] = true
	}
	if mode == model.WRR {
		alone, again := o.guardSingle(now, ests, best, live, ps, tcp)
		if alone >= 0 {
			set := make([]bool, len(ests))
			set[alone] = true
			if !slices.Equal(set, o.set) {
				o.set, o.setLive, o.setMode, o.setSince = set, liveMask, mode, now
			}
			o.predict, o.reason = 0, o.solo.reason
			return weights()
		}
		if again {
			o.set = nil // striping again: the model's set is adopted afresh
		}
	}
	// Paths dying or coming back, and a change of mode, are news rather than a change of
	// mind: decide afresh at once. Otherwise the model must promise enough to move.
	cur := o.set
	switch {
	case o.set == nil || !slices.Equal(liveMask, o.setLive) || mode != o.setMode:
		o.adopt(now, best, liveMask, mode, choice.Prediction.Goodput, fmt.Sprintf("%v: model's best set for %v", mode, describe(ps)))
	case slices.Equal(cur, best):
		o.predict = choice.Prediction.Goodput
	default:
		w := make([]float64, len(live))
		for j, i := range live {
			if cur[i] {
				w[j] = opt[j].Rate
			}
		}
		p, err := model.Predict(opt, model.Split{Mode: mode, Weights: w}, tcp)
		// The dwell keeps a flow's set from flapping; with nothing delivered there is no flow
		// to disturb, and a set chosen on the first, rough estimates is not held into the
		// next flow's start (sweep-2-03: the set was held for 2 s after a pair reading of
		// 5 Gbit/s settled, the flow started on one path, and the 79 ms path added 1 s
		// into it collapsed four flows).
		idle := true
		for _, e := range ests {
			idle = idle && e.lastRate() == 0
		}
		if err == nil && choice.Prediction.Goodput > p.Goodput*setGain && (now.Sub(o.setSince) >= setDwell || idle) {
			o.adopt(now, best, liveMask, mode, choice.Prediction.Goodput, fmt.Sprintf("%v: model predicts %.0f%% more", mode, 100*(choice.Prediction.Goodput/p.Goodput-1)))
		} else if err == nil {
			o.predict = p.Goodput
		}
	}
	return weights()
}

// bounded keeps the optimism of the set's choice (opt: paths no busy stretch measured
// at the most they might carry) to adding paths to a set: a choice made only of paths
// raised so is a bet of the whole flow on guesses, taken only if, at the estimates (est)
// and weighed as the split will weigh them, it promises within setGain of the set the
// estimates choose; otherwise that set is taken (sweep-5-06: a 1 Mbit/s path, which
// pairs read right, raised to the lossy 13 Mbit/s path's rate, was given three flows
// alone until a busy stretch measured it, four times in 10 s).
func bounded(opt, est []model.Path, c model.Choice, mode model.Mode, tcp model.TCP) model.Choice {
	w := make([]float64, len(est))
	for _, j := range c.Paths {
		if opt[j].Rate <= est[j].Rate {
			return c // a path taken at its estimate: no bet
		}
		w[j] = est[j].Rate
	}
	safe, err := model.BestSubset(est, mode, tcp)
	if err != nil {
		return c
	}
	p, err := model.Predict(est, model.Split{Mode: mode, Weights: w}, tcp)
	if err != nil || p.Goodput*setGain >= safe.Prediction.Goodput {
		return c
	}
	return safe
}

// lean takes out of the model's choice the paths it can do without: while leaving one
// more out keeps the predicted goodput within setGain of the choice's, the one whose
// absence costs least goes. A path earns its place by the margin a new set must promise
// to be adopted: what the model does not see costs the marginal path most. Resequenced,
// its delay and its queue are every packet's; without the resequencer, its skew is
// reordering.
//
// The choice is judged as opt sees the paths (capacities no busy stretch has measured
// at the most they might carry), but a resequenced set's longest path as est sees it:
// its delay is every packet's whatever its share, so only what it is measured to carry
// pays for it (fat+thin's 1 Mbit/s, 101 ms path, which pairs read right, judged at the
// fat path's 50 held a flow at 22 Mbit/s where the fat path alone gives 47).
func lean(opt, est []model.Path, c model.Choice, mode model.Mode, tcp model.TCP) model.Choice {
	judge := slices.Clone(opt)
	w0 := slices.Clone(c.Split.Weights)
	if tcp.Resequenced && len(c.Paths) > 1 {
		long := c.Paths[0]
		for _, j := range c.Paths {
			if opt[j].Delay > opt[long].Delay {
				long = j
			}
		}
		judge[long] = est[long]
		if mode == model.WRR && opt[long].Rate > 0 {
			w0[long] *= est[long].Rate / opt[long].Rate // the split weighs by the estimate
		}
	}
	top, err := model.Predict(judge, model.Split{Mode: mode, Weights: w0}, tcp)
	if err != nil {
		return c
	}
	paths := slices.Clone(c.Paths)
	for len(paths) > 1 {
		var best []float64
		bestAt, bestGood := -1, 0.0
		for k, j := range paths {
			w := slices.Clone(w0)
			w[j] = 0
			p, err := model.Predict(judge, model.Split{Mode: mode, Weights: w}, tcp)
			if err != nil || p.Goodput*setGain < top.Goodput || bestAt >= 0 && p.Goodput <= bestGood {
				continue
			}
			best, bestAt, bestGood = w, k, p.Goodput
		}
		if bestAt < 0 {
			break
		}
		w0, paths = best, slices.Delete(paths, bestAt, bestAt+1)
	}
	if len(paths) == len(c.Paths) {
		return c
	}
	w := slices.Clone(c.Split.Weights)
	for j := range w {
		if !slices.Contains(paths, j) {
			w[j] = 0
		}
	}
	sp := model.Split{Mode: mode, Weights: w}
	p, err := model.Predict(opt, sp, tcp)
	if err != nil {
		return c
	}
	return model.Choice{Paths: paths, Split: sp, Prediction: p}
}

// waitForTrains leaves a bulk split's paths of unknown capacity out of o.set for up to
// unknownWait, while at least one path of known capacity is in: the sending agent's probe
// trains measure an idle path within a second, and a guess is a poor split (a path a
// wrong guess feeds may never queue, so no busy stretch measures it). A path read from
// one report of pairs waits too: one train on a loaded machine can read it short.
func (o *optimizer) waitForTrains(now time.Time, ests []*pathEstimator) {
	var waiting, known []int
	for i, e := range ests {
		switch {
		case !o.set[i]:
			o.unknownSince[i] = time.Time{}
		case e.measured():
			known = append(known, i)
		default:
			if o.unknownSince[i].IsZero() {
				o.unknownSince[i] = now
			}
			if now.Sub(o.unknownSince[i]) < unknownWait {
				waiting = append(waiting, i)
			}
		}
	}
	if len(known) == 0 || len(waiting) == 0 {
		return
	}
	for _, i := range waiting {
		o.set[i] = false
	}
	o.reason = fmt.Sprintf("%v over the paths of known capacity while the probe trains measure %d more", model.WRR, len(waiting))
}

func describe(ps []model.Path) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%.2gMbit/%.0fms/%.1f%%", p.Rate/1e6, p.Delay.Seconds()*1e3, 100*p.Loss))
	}
	return strings.Join(parts, " ")
}

func (o *optimizer) adopt(now time.Time, set, live []bool, mode model.Mode, predicted float64, why string) {
	o.set, o.setLive, o.setMode, o.setSince, o.predict = set, live, mode, now, predicted
	var names []string
	for i, in := range set {
		if in {
			names = append(names, fmt.Sprint(i))
		}
	}
	o.reason = fmt.Sprintf("paths %s: %s", strings.Join(names, ","), why)
}
