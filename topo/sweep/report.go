package sweep

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/plait/plait/topo/scenario"
)

// Result is one scenario of a sweep: its file, the lab run's folder and the goodput of
// every configuration (iperf3's receiver bytes over the whole run: the lab's goodput).
type Result struct {
	Name     string             `json:"name"`
	File     string             `json:"file"`
	Results  string             `json:"results,omitempty"`
	Error    string             `json:"error,omitempty"` // the lab run failed: no figures
	LossFree bool               `json:"loss_free"`
	CC       string             `json:"cc"`
	Flows    int                `json:"flows"`
	Paths    []scenario.Path    `json:"paths"`
	Goodput  map[string]float64 `json:"goodput_bps,omitempty"`
	// Late is the share of packets the embedded switches sent more than 5 ms late in
	// the auto run: above the lab's warning level the machine, not the paths, reordered.
	Late    *float64   `json:"auto_late_5ms,omitempty"`
	Load    [3]float64 `json:"load_avg"` // the machine's 1, 5 and 15 min load as the run started
	Seconds float64    `json:"seconds"`
}

// Ratios of auto's goodput to the configurations it is judged against.
const (
	VsIdeal      = "auto/ideal"
	VsSingleBest = "auto/single-best"
	VsMPTCP      = "auto/mptcp"
)

var ratioOf = map[string]string{VsIdeal: scenario.ConfigIdeal, VsSingleBest: scenario.ConfigSingleBest, VsMPTCP: scenario.ConfigMPTCP}

// Ratio is auto's goodput over config's in r, or NaN when either is missing.
func (r Result) Ratio(ratio string) float64 {
	a, okA := r.Goodput[scenario.ConfigAuto]
	b, okB := r.Goodput[ratioOf[ratio]]
	if !okA || !okB || b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Target is one of issue 30's criteria: the ratio at least Min on at least Share of the
// scenarios in scope (all, or the loss-free ones); Median, when set, asks the same of the
// ratio's median over all scenarios.
type Target struct {
	Ratio        string
	Min          float64
	Share        float64
	LossFreeOnly bool
	Median       float64
}

// Targets are issue 30's ("How it is judged").
var Targets = []Target{
	{Ratio: VsIdeal, Min: 0.92, Share: 1, LossFreeOnly: true, Median: 0.9},
	{Ratio: VsSingleBest, Min: 1, Share: 1},
	{Ratio: VsMPTCP, Min: 1, Share: 0.9},
}

func (t Target) String() string {
	scope := "scenario"
	if t.LossFreeOnly {
		scope = "loss-free scenario"
	}
	s := fmt.Sprintf("≥ %g on every %s", t.Min, scope)
	if t.Share < 1 {
		s = fmt.Sprintf("≥ %g on %g %% of the %ss", t.Min, 100*t.Share, scope)
	}
	if t.Median > 0 {
		s += fmt.Sprintf("; median ≥ %g over all", t.Median)
	}
	return s
}

// Row is the distribution of one ratio over a sweep's scenarios and how it meets its
// target.
type Row struct {
	Ratio     string  `json:"ratio"`
	N         int     `json:"n"` // scenarios with a figure
	Min       float64 `json:"min"`
	P10       float64 `json:"p10"`
	Median    float64 `json:"median"`
	Target    string  `json:"target"`
	Threshold float64 `json:"threshold"` // the target's minimum
	Met       int     `json:"met"`       // scenarios in the target's scope at or above its minimum
	Scope     int     `json:"scope"`     // scenarios in the target's scope
	OK        bool    `json:"ok"`        // the target holds
}

// Distribution is the table of Targets over rs (failed runs left out).
func Distribution(rs []Result) []Row {
	var rows []Row
	for _, t := range Targets {
		var all []float64
		row := Row{Ratio: t.Ratio, Target: t.String(), Threshold: t.Min}
		for _, r := range rs {
			v := r.Ratio(t.Ratio)
			if math.IsNaN(v) {
				continue
			}
			all = append(all, v)
			if t.LossFreeOnly && !r.LossFree {
				continue
			}
			row.Scope++
			if v >= t.Min {
				row.Met++
			}
		}
		row.N = len(all)
		slices.Sort(all)
		row.Min, row.P10, row.Median = quantile(all, 0), quantile(all, 0.1), quantile(all, 0.5)
		row.OK = row.N > 0 && float64(row.Met) >= t.Share*float64(row.Scope)
		if t.Median > 0 {
			row.OK = row.OK && row.Median >= t.Median
		}
		rows = append(rows, row)
	}
	return rows
}

// quantile of sorted xs, interpolated linearly between order statistics (NumPy's
// default); NaN for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	h := q * float64(len(xs)-1)
	lo := int(math.Floor(h))
	if lo+1 >= len(xs) {
		return xs[lo]
	}
	return xs[lo] + (h-float64(lo))*(xs[lo+1]-xs[lo])
}

// Report is what a sweep writes to sweep.json.
type Report struct {
	Seed         uint64    `json:"seed"`
	N            int       `json:"n"`
	Duration     float64   `json:"duration_s"`
	Ranges       string    `json:"ranges"`
	Configs      []string  `json:"configs"`
	PlaitVersion string    `json:"plait_version"`
	CPUs         int       `json:"cpus"`
	Results      []Result  `json:"scenarios"`
	Distribution []Row     `json:"distribution"`
	Command      string    `json:"command"`
	Started      string    `json:"started"`
	Finished     string    `json:"finished,omitempty"`
	LoadEnd      []float64 `json:"load_avg_end,omitempty"`
}

// Markdown is the report as a markdown page: the distribution table first, then every
// scenario's figures.
func (rep *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# plait lab sweep, seed %d\n\n", rep.Seed)
	fmt.Fprintf(&b, "`%s`: %d scenarios of %g s, plait %s, %d CPUs. Goodput: iperf3's receiver bytes over the whole run.\n\n",
		rep.Command, rep.N, rep.Duration, rep.PlaitVersion, rep.CPUs)
	b.WriteString("Drawn from:\n\n```\n" + rep.Ranges + "```\n\n")
	b.WriteString(DistributionTable(rep.Distribution))
	b.WriteString("\nPaths: Mbit/s / one-way ms, loss, ± jitter ms; goodput in Mbit/s.\n\n| scenario | paths | cc | flows | loss | ")
	for _, c := range rep.Configs {
		b.WriteString(c + " | ")
	}
	b.WriteString("auto/ideal | auto/single-best | auto/mptcp | late > 5 ms | load |\n|")
	b.WriteString(strings.Repeat("---|", 10+len(rep.Configs)))
	b.WriteString("\n")
	for _, r := range rep.Results {
		loss := "-"
		if !r.LossFree {
			loss = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | ", r.Name, pathsText(r.Paths), r.CC, r.Flows, loss)
		if r.Error != "" {
			fmt.Fprintf(&b, "failed: %s |%s\n", r.Error, strings.Repeat(" |", len(rep.Configs)+5))
			continue
		}
		for _, c := range rep.Configs {
			fmt.Fprintf(&b, "%s | ", mbit(r.Goodput[c]))
		}
		late := "-"
		if r.Late != nil {
			late = fmt.Sprintf("%.1f %%", 100**r.Late)
		}
		fmt.Fprintf(&b, "%s | %s | %s | %s | %.1f |\n", num(r.Ratio(VsIdeal)), num(r.Ratio(VsSingleBest)), num(r.Ratio(VsMPTCP)), late, r.Load[0])
	}
	return b.String()
}

// DistributionTable is the distribution as a markdown table.
func DistributionTable(rows []Row) string {
	var b strings.Builder
	b.WriteString("| ratio | n | min | p10 | median | target | met | holds |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d of %d | %s |\n", r.Ratio, r.N, num(r.Min), num(r.P10), num(r.Median),
			r.Target, r.Met, r.Scope, map[bool]string{true: "yes", false: "no"}[r.OK])
	}
	return b.String()
}

// pathsText is a scenario's paths in one cell: Mbit/s, one-way ms, loss, jitter.
func pathsText(ps []scenario.Path) string {
	var parts []string
	for _, p := range ps {
		s := fmt.Sprintf("%.3g/%.0f", p.Rate/1e6, p.Delay.Seconds()*1e3)
		if p.Loss > 0 {
			s += fmt.Sprintf(" %.2g%%", 100*p.Loss)
		}
		if p.Jitter > 0 {
			s += fmt.Sprintf(" ±%.1f", p.Jitter.Seconds()*1e3)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func mbit(bps float64) string {
	if bps <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g", bps/1e6)
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.3f", x)
}

// Write writes sweep.json and sweep.md into dir.
func (rep *Report) Write(dir string) error {
	rep.Distribution = Distribution(rep.Results)
	b, err := json.MarshalIndent(jsonSafe(rep), "", "  ")
	if err != nil {
		return fmt.Errorf("sweep.json: %w", err)
	}
	if err := os.WriteFile(dir+"/sweep.json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(dir+"/sweep.md", []byte(rep.Markdown()), 0o644)
}

// jsonSafe is rep with NaN (a ratio without figures) as null, which JSON can hold.
func jsonSafe(rep *Report) any {
	type row struct {
		Row
		Min    *float64 `json:"min"`
		P10    *float64 `json:"p10"`
		Median *float64 `json:"median"`
	}
	opt := func(x float64) *float64 {
		if math.IsNaN(x) {
			return nil
		}
		return &x
	}
	rows := make([]row, len(rep.Distribution))
	for i, r := range rep.Distribution {
		rows[i] = row{r, opt(r.Min), opt(r.P10), opt(r.Median)}
	}
	return struct {
		*Report
		Distribution []row `json:"distribution"`
	}{rep, rows}
}
