package model

import (
	"fmt"
	"slices"
	"time"

	"github.com/plait/plait/topo/scenario"
)

// Assumptions say in words what the model takes for what it does not model in a
// scenario: a path that follows a trace is predicted at the trace's mean rate as if it
// were constant, bursty loss as random loss of the same mean, and events not at all (the
// paths as they start).
func Assumptions(s *scenario.Scenario) []string {
	var out []string
	for i, p := range s.Paths {
		if tr := p.Trace; tr != nil {
			down, _ := tr.Loaded()
			if down == nil {
				continue
			}
			w := s.CapacityOverTime(i, time.Second, down.Period())
			slices.Sort(w)
			lo, hi := w[len(w)/10], w[len(w)*9/10]
			cap := ""
			if p.Rate > 0 {
				cap = " under its rate " + scenario.FormatRate(p.Rate)
			}
			out = append(out, fmt.Sprintf("path %s follows trace %s%s: %s to %s in 1 s windows (10th to 90th percentile over its %v); the model takes its mean, %s, as a constant rate",
				p.Name, down.Name, cap, fmtBps(lo), fmtBps(hi), down.Period(), fmtBps(p.MeanRate())))
		}
		if g := p.LossModel(); g != nil {
			out = append(out, fmt.Sprintf("path %s loses packets in bursts (Gilbert–Elliott); the model takes its mean, %.3g %%, as random loss",
				p.Name, 100*p.Loss))
		}
	}
	switch n := len(s.Events); {
	case n == 1:
		out = append(out, "the scenario's event is not modelled: the prediction is for the paths as they start")
	case n > 1:
		out = append(out, fmt.Sprintf("the scenario's %d events are not modelled: the prediction is for the paths as they start", n))
	}
	return out
}

func fmtBps(v float64) string { return fmt.Sprintf("%.3g Mbit/s", v/1e6) }
