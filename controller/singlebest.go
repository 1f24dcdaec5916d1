package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/plait/plait/model"
)

// A striped set is held to the best single path's goodput, measured. The reasons:
// docs/controller.md#path-set.
const (
	// A striped set is judged over soloJudge of goodput, once the flow has left its start
	// and the set has held that long: long enough to average cubic's sawtooth and a
	// recovery or two, short enough to matter in a transfer of seconds.
	soloJudge = 3 * time.Second
	// Striping that delivers less than soloMargin of what the best single path delivers
	// alone (or, before that was measured, is predicted to) gives way to that path: the
	// margin keeps measurement noise from moving a flow that does as well either way.
	soloMargin = 0.9
	// The flow stays on the one path soloHold before striping is tried again (the paths
	// may have changed); the hold doubles with every try that measured worse, up to
	// soloMaxDoublings times.
	soloHold         = 10 * time.Second
	soloMaxDoublings = 3
)

// solo is the state of the single-path guard: the model predicts from what the estimator
// sees, and some of what costs a striped flow it cannot see (random loss under a standing
// queue, jitter, reordering TCP does not forgive: issue 30's LTE and Wi-Fi paths ran at
// a sixth to a third of their best path alone). The flow's measured goodput can.
type solo struct {
	path    int       // the path the flow is held on; -1: striping
	since   time.Time // when it was put there
	fails   int       // striped tries in a row that measured worse than one path
	retry   bool      // the striped set now is a try after a hold
	alone   float64   // goodput measured on a path alone, bit/s (0: not yet) ...
	aloneOn int       // ... on this path
	judging []bool    // the set being judged
	striped float64   // goodput the last striped try measured, bit/s
	goodput []timed   // the direction's goodput at each decision since the set changed
	reason  string
	setAt   time.Time // when the current set (striped or single) started to be judged
}

func newSolo() solo { return solo{path: -1} }

// guardSingle runs after the model chose a set for a bulk flow (best: the set, ps and
// live: the live paths as the model saw them). It returns the path the flow is to be
// held on, or -1 for the model's set: striping that measured worse than the best single
// path gives way to it. again tells that the hold just ended: the model's set is to be
// adopted afresh.
func (o *optimizer) guardSingle(now time.Time, ests []*pathEstimator, best []bool, live []int, ps []model.Path, tcp model.TCP) (alone int, again bool) {
	g := &o.solo
	tcp = tcp.WithDefaults()
	var wire float64
	for _, e := range ests {
		wire += e.lastRate()
	}
	goodput := wire * float64(tcp.MSS) / float64(tcp.MSS+tcp.Overhead)
	// Only a flow of full-sized packets is judged: the ACK stream of a flow the other
	// way (the direction's only traffic in a lab) is no bulk flow that wants more. The
	// verdict is bulkLoad's, which a report without packets leaves as it was: a stall is
	// part of what the set delivers. It is judged once packets come again, not while
	// none come: a flow that ended is no flow held down (the direction, idle, starts
	// afresh, o.starting).
	_, flowing := fullSized(ests)
	cur := o.set // the set the flow has run on
	if cur == nil {
		cur = best
	}
	if g.setAt.IsZero() || o.starting || !o.full || !slices.Equal(cur, g.judging) {
		g.setAt, g.goodput, g.judging = now, nil, slices.Clone(cur) // a flow's start is not judged
	}
	g.goodput = append(g.goodput, timed{now, goodput})
	g.goodput = slices.DeleteFunc(g.goodput, func(s timed) bool { return now.Sub(s.at) > soloJudge })
	judged := !o.starting && now.Sub(g.setAt) >= soloJudge && flowing
	var mean float64
	for _, s := range g.goodput {
		mean += s.v / float64(len(g.goodput))
	}

	if g.path >= 0 {
		if !ests[g.path].est.Alive {
			g.restart(now, -1)
			return -1, true
		}
		if judged {
			g.alone, g.aloneOn = mean, g.path
			// The move is a trial: a path alone that measures worse than the striping it
			// replaced (whose judging window caught a trough of several flows' sawtooth, or
			// whose path has since slowed down) gives the flow back to striping at once.
			if mean < g.striped {
				g.restart(now, -1)
				g.fails, g.retry = 0, false
				return -1, true
			}
		}
		hold := soloHold << min(g.fails, soloMaxDoublings)
		if now.Sub(g.since) < hold {
			return g.path, false
		}
		g.restart(now, -1) // try striping again
		g.retry = true
		return -1, true
	}
	if countTrue(cur) < 2 || !judged {
		return -1, false
	}
	// The best single path, by the model; once it was measured alone, what it delivered.
	single, bar := -1, 0.0
	for j, i := range live {
		p, err := model.Predict([]model.Path{ps[j]}, model.Split{Mode: model.WRR, Weights: []float64{1}}, tcp)
		if err == nil && p.Goodput > bar {
			single, bar = i, p.Goodput
		}
	}
	if single < 0 {
		return -1, false
	}
	if g.alone > 0 && g.aloneOn == single {
		bar = g.alone
	}
	if mean >= soloMargin*bar || g.rising(soloMargin*bar) {
		if now.Sub(g.setAt) >= 2*soloJudge {
			g.fails, g.retry = 0, false // striping held: a later failure starts from the shortest hold
		}
		return -1, false
	}
	g.striped = mean
	if g.retry {
		g.fails++
	}
	g.restart(now, single)
	g.reason = fmt.Sprintf("path %d alone: striped %.3g Mbit/s, below %.0f %% of the %.3g path %d delivers alone", single, mean/1e6, 100*soloMargin, bar/1e6, single)
	return single, false
}

// rising tells whether the judging window's goodput is on its way to bar: its
// least-squares trend, carried on for another judging window, reaches it. Flows still
// ramping are not judged (two cubic flows over 80 ms paths took 6 s to fill 70 Mbit/s
// and, judged half-way at 29, were held on a 45 Mbit/s path); a flow that striping
// holds down does not trend up for long, and is judged once its trend flattens.
func (g *solo) rising(bar float64) bool {
	n := float64(len(g.goodput))
	if n < 2 {
		return false
	}
	t0 := g.goodput[0].at
	var st, sv float64
	for _, s := range g.goodput {
		st += s.at.Sub(t0).Seconds()
		sv += s.v
	}
	mt, mv := st/n, sv/n
	var cov, vt float64
	for _, s := range g.goodput {
		dt := s.at.Sub(t0).Seconds() - mt
		cov += dt * (s.v - mv)
		vt += dt * dt
	}
	if vt == 0 {
		return false
	}
	end := g.goodput[len(g.goodput)-1].at.Sub(t0).Seconds()
	return mv+cov/vt*(end+soloJudge.Seconds()-mt) >= bar
}

// restart begins judging a new set: path alone, or striping (-1).
func (g *solo) restart(now time.Time, path int) {
	if path >= 0 {
		g.since = now
	}
	g.path, g.setAt, g.goodput, g.judging = path, now, nil, nil
}
