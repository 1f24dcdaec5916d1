package validate

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo"
)

// Check is one model's prediction of a measurement and its accuracy, eq. (24).
type Check struct {
	Predicted float64 `json:"predicted_bps"`
	Accuracy  float64 `json:"accuracy"`
}

// Point is one configuration of one lab run beside both models.
type Point struct {
	Group    string    `json:"group"`
	Label    string    `json:"label"`
	Scenario string    `json:"scenario"`
	Links    int       `json:"links"`
	ADA      float64   `json:"ada_s"`
	ABA      float64   `json:"aba_bps"`
	Config   string    `json:"config"`
	Measured float64   `json:"measured_bps"`
	Runs     []float64 `json:"measured_runs_bps,omitempty"`
	// Repeat is how well the lab predicts itself: eq. (24) of the median against the run
	// farthest from it. Below the target, the runs alone miss it.
	Repeat *float64 `json:"repeat_accuracy,omitempty"`
	// Late is the share of packets the switches sent more than 5 ms late: above topo.LateWarn
	// the machine's load, not the paths, reordered the flow, and the lab measured
	// something other than the scenario.
	Late        *float64    `json:"late_5ms_share,omitempty"`
	Retransmits int         `json:"retransmits"`
	Paper       *Check      `json:"paper,omitempty"` // rr only
	Plait       Check       `json:"plait"`
	Limit       model.Limit `json:"plait_limit"`
	Summary     string      `json:"summary"`
	Pooled      []string    `json:"pooled,omitempty"` // with --pool, every summary whose runs it has
}

// Failure is a lab run that failed.
type Failure struct {
	Scenario string `json:"scenario"`
	Error    string `json:"error"`
}

// Report is a validation: every point, and the lab runs that failed.
type Report struct {
	Figure string    `json:"figure"` // "validate", for plot.py
	Target float64   `json:"target"`
	Points []Point   `json:"points"`
	Failed []Failure `json:"failed,omitempty"`
}

// FormatAccuracy writes an accuracy as a percentage.
func FormatAccuracy(a float64) string { return fmt.Sprintf("%.1f %%", 100*a) }

// Verdict sums up each model's accuracy against the target.
func Verdict(rep *Report) []string {
	var plait, paper []float64
	var short []string
	noisy := 0        // points below the target whose own runs are too
	var late []string // points whose lab was late, below the target or not
	for _, p := range rep.Points {
		plait = append(plait, p.Plait.Accuracy)
		if p.Plait.Accuracy < rep.Target {
			short = append(short, fmt.Sprintf("%s %s (%s)", p.Scenario, p.Config, FormatAccuracy(p.Plait.Accuracy)))
			if p.Repeat != nil && *p.Repeat < rep.Target {
				noisy++
			}
		}
		if p.Late != nil && *p.Late > topo.LateWarn {
			late = append(late, fmt.Sprintf("%s %s (%.1f %%, Plait %s)", p.Scenario, p.Config, 100**p.Late, FormatAccuracy(p.Plait.Accuracy)))
		}
		if p.Paper != nil {
			paper = append(paper, p.Paper.Accuracy)
		}
	}
	// The median, as one run that collapsed can make an accuracy any negative number.
	span := func(xs []float64) string {
		slices.Sort(xs)
		return fmt.Sprintf("median %s over %d points (%s to %s)", FormatAccuracy(median(xs)), len(xs), FormatAccuracy(xs[0]), FormatAccuracy(xs[len(xs)-1]))
	}
	var out []string
	if len(plait) > 0 {
		out = append(out, "Plait's predictor: "+span(plait))
		if len(short) == 0 {
			out = append(out, fmt.Sprintf("every point at or above the %s target", FormatAccuracy(rep.Target)))
		} else {
			out = append(out, fmt.Sprintf("%d of %d points below the %s target: %s", len(short), len(plait), FormatAccuracy(rep.Target), strings.Join(short, ", ")))
			if noisy > 0 {
				out = append(out, fmt.Sprintf("%d of those %d are points where the lab misses the target itself: its median run predicts its farthest run (lab repeat) below %s", noisy, len(short), FormatAccuracy(rep.Target)))
			}
		}
	}
	if len(late) > 0 {
		out = append(out, fmt.Sprintf("%d points where the switches sent more than %.0f %% of packets over 5 ms late, so the machine's load reordered the paths besides their delays (more CPUs or fewer paths): %s",
			len(late), 100*topo.LateWarn, strings.Join(late, ", ")))
	}
	if len(paper) > 0 {
		out = append(out, "seed 002's model (rr): "+span(paper))
	}
	out = append(out, byGroup(rep)...)
	for _, f := range rep.Failed {
		out = append(out, fmt.Sprintf("lab run of %s failed: %s", f.Scenario, f.Error))
	}
	return out
}

// median is the middle of xs, or the mean of the two middle ones for an even count.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

// byGroup is the median accuracy at each link count, as seed 002 reports its
// model's (per link count, 2–8 links of S1), with the paper's beside it; an ADA sweep,
// whose points share one link count, is summed up by ADA instead, as the paper's
// delay-asymmetry figure is. One line per group; none for a group of one link count.
func byGroup(rep *Report) []string {
	type bucket struct {
		label        string
		at           float64 // where it sorts: links, or ADA in seconds
		plait, paper []float64
	}
	var names []string
	groups := map[string]map[string]*bucket{}
	for _, p := range rep.Points {
		name, b := "link count", bucket{label: fmt.Sprintf("%d links", p.Links), at: float64(p.Links)}
		if base, ok := strings.CutPrefix(p.Group, GroupADA); ok {
			name, b = fmt.Sprintf("ADA (%s, %d links)", base, p.Links), bucket{label: p.Label, at: p.ADA}
		}
		if groups[name] == nil {
			groups[name] = map[string]*bucket{}
			names = append(names, name)
		}
		acc := groups[name][b.label]
		if acc == nil {
			acc = &b
			groups[name][b.label] = acc
		}
		acc.plait = append(acc.plait, p.Plait.Accuracy)
		if p.Paper != nil {
			acc.paper = append(acc.paper, p.Paper.Accuracy)
		}
	}
	var out []string
	for _, name := range names {
		if len(groups[name]) < 2 {
			continue
		}
		buckets := slices.SortedFunc(maps.Values(groups[name]), func(x, y *bucket) int { return cmp.Compare(x.at, y.at) })
		var parts []string
		for _, acc := range buckets {
			part := fmt.Sprintf("%s %s", acc.label, FormatAccuracy(median(acc.plait)))
			if len(acc.paper) > 0 {
				part += fmt.Sprintf(" (paper %s)", FormatAccuracy(median(acc.paper)))
			}
			parts = append(parts, part)
		}
		out = append(out, fmt.Sprintf("median by %s, Plait's predictor (seed 002's model): %s", name, strings.Join(parts, ", ")))
	}
	return out
}
