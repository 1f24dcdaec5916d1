package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/wire"
)

// validateConfigs are the lab configurations the models predict: Plait's predictor all
// of them (ideal and single-best are one plain TCP flow on one link), the paper's model
// rr only.
var validateConfigs = []string{scenario.ConfigIdeal, scenario.ConfigSingleBest, scenario.ConfigRR, scenario.ConfigWRR}

// validateTarget is the accuracy the issue asks of Plait's predictor at every point.
const validateTarget = 0.90

// Groups of validation points: the scenarios named on the command line, and an ADA sweep.
const (
	groupScenarios = "scenarios"
	groupRuns      = "lab runs"      // summaries given with --from
	groupADA       = "ADA sweep of " // + the base scenario's name
)

func newModelValidateCmd() *cobra.Command {
	var (
		lf        labFlags
		adaSweep  string
		sweepBase string
		from      []string
		outDir    string
		noPlot    bool
		asJSON    bool
		pool      bool
		pf        modelPaperFlags
	)
	cmd := &cobra.Command{
		Use:   "validate SCENARIO…",
		Short: "Run the lab for each scenario and report how well both models predicted it (eq. 24)",
		Long: `Validate runs 'plait lab run' for each SCENARIO (a file or a shipped name) with the
configurations the models predict, reads the steady goodput of summary.json (from the
scenario's omit on), and puts beside it seed 002's model (rr) and Plait's predictor
(every configuration) with the accuracy of eq. (24), 1 − |measured − predicted| /
measured. With --repeat, measured is the median
run, and "lab repeat" is the same accuracy of that median against the run farthest from
it: how well the lab predicts itself, a bound on what any one prediction can reach.

The predictions take the lab's own inputs: the scenario's paths, its congestion control,
duration and omitted start, the tunnel's MSS and per-packet bytes (compact encapsulation
in the parallel shape), plain TCP for ideal and single-best. The paper's model gets the
bytes the run moved as E and the tunnel's MSS as s unless --paper-bytes or
--paper-segment say otherwise.

--ada-sweep derives scenarios from --sweep-base by spreading its paths' one-way delays
from the smallest one, in their order, evenly to each average delay asymmetry (eq. 22),
as 'plait model sweep' spreads its links. --from re-evaluates finished runs without the
lab: a summary.json (or its folder), or a validate.json, whose runs keep their groups.
--pool merges the lab runs of one scenario with the same inputs (several --from, or new
runs beside stored ones) into one point per configuration, measured by the median of all
their runs: three runs of a configuration that sometimes collapses say little about its
typical goodput, every run ever made says more.

Progress and the lab's output go to stderr, the table (or --json) to stdout; the folder
--out/<time>/ gets validate.json, validate.md and validate.png (python3 with matplotlib).`,
		Example: `  plait model validate s1-2 s1-3 s1-4 --repeat 3
  plait model validate --ada-sweep 0,10,20,40,80ms --sweep-base s1-4
  plait model validate --from results/validate/20261121-090000/validate.json --no-plot
  plait model validate --pool --from results/S1-6/20261121-084354 --from results/S1-6/20261121-102002`,
		RunE: func(cmd *cobra.Command, args []string) error {
			jobs, err := validateJobs(cmd, args, adaSweep, sweepBase, from)
			if err != nil {
				return err
			}
			for _, c := range lf.compare {
				if !slices.Contains(validateConfigs, c) {
					return usagef(cmd, "--compare %q: the models predict %s", c, strings.Join(validateConfigs, ", "))
				}
			}
			if lf.repeat < 1 || lf.repeat > 20 {
				return usagef(cmd, "--repeat %d: give 1 to 20", lf.repeat)
			}
			if d, err := scenario.ParseDuration(lf.duration); lf.duration != "" && (err != nil || d <= 0) {
				return usagef(cmd, "--duration %q: want a positive duration such as 10s", lf.duration)
			}
			po, err := pf.options(cmd)
			if err != nil {
				return err
			}
			v := validation{lf: &lf, po: po, set: validatePaperSet{bytes: pf.bytes != "", segment: pf.segment != 0}, pool: pool}
			if cmd.Flags().Changed("compare") { // a lab run has only what it ran; --from, all
				v.only = lf.compare
			}
			rep, labs, err := v.run(cmd, jobs)
			if err != nil {
				return err
			}
			if len(rep.Points) > 0 {
				dir := filepath.Join(outDir, time.Now().Format("20060102-150405"))
				if err := writeValidation(dir, rep, !noPlot); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "== validate: results in %s\n", dir)
			}
			if asJSON {
				err = writeModelJSON(cmd.OutOrStdout(), rep)
			} else {
				err = printValidation(cmd.OutOrStdout(), rep)
			}
			if err == nil && len(rep.Failed) > 0 {
				err = fmt.Errorf("%d of %d lab runs failed (%s first: %s)", len(rep.Failed), labs, rep.Failed[0].Scenario, rep.Failed[0].Error)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&lf.python, "python", topo.Python, "Python interpreter with Mininet")
	f.StringSliceVar(&lf.compare, "compare", []string{scenario.ConfigRR, scenario.ConfigWRR}, "configurations to run and predict: "+strings.Join(validateConfigs, ", "))
	f.StringVar(&lf.duration, "duration", "", "override traffic.duration, e.g. 10s")
	f.StringVar(&lf.results, "results", "results", "folder for the lab runs' results/<scenario>/<time>/")
	f.IntVar(&lf.repeat, "repeat", 1, "run every configuration this many times; the median run counts")
	f.StringVar(&adaSweep, "ada-sweep", "", "also validate --sweep-base with its delays spread to these ADAs, e.g. 0,10,20,40,80ms")
	f.StringVar(&sweepBase, "sweep-base", "s1-4", "the scenario --ada-sweep starts from")
	f.StringArrayVar(&from, "from", nil, "re-evaluate a finished run: summary.json, its folder, or a validate.json (repeatable)")
	f.StringVar(&outDir, "out", "results/validate", "folder for <time>/validate.json, validate.md and validate.png")
	f.BoolVar(&noPlot, "no-plot", false, "write no PNG (no python3 needed)")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	f.BoolVar(&pool, "pool", false, "one point per scenario and configuration: the median of every run of the lab runs with the same inputs")
	pf.register(f)
	return cmd
}

// validateJob is one point to validate: a scenario to run in the lab, or the summary of
// a finished run.
type validateJob struct {
	group, label string
	name         string
	sc           *scenario.Scenario
	summary      string
}

// validatePaperSet says which paper options the user gave; the others follow the run.
type validatePaperSet struct{ bytes, segment bool }

// validateJobs lists the points to validate: the scenarios named, the ADA sweep, and
// the finished runs of --from.
func validateJobs(cmd *cobra.Command, args []string, adaSweep, sweepBase string, from []string) ([]validateJob, error) {
	var jobs []validateJob
	for _, a := range args {
		s, err := loadScenario(a)
		if err != nil {
			return nil, err
		}
		name := s.Name
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(a), filepath.Ext(a))
		}
		jobs = append(jobs, validateJob{group: groupScenarios, label: name, name: name, sc: s})
	}
	if adaSweep != "" {
		adas, err := parseDurationList(adaSweep)
		if err != nil {
			return nil, usagef(cmd, "--ada-sweep: %v", err)
		}
		base, err := loadScenario(sweepBase)
		if err != nil {
			return nil, usagef(cmd, "--sweep-base: %v", err)
		}
		if base.Name == "" {
			base.Name = strings.TrimSuffix(filepath.Base(sweepBase), filepath.Ext(sweepBase))
		}
		for _, ada := range adas {
			if ada < 0 {
				return nil, usagef(cmd, "--ada-sweep: ADA %v is negative", ada)
			}
			s := adaScenario(base, ada)
			jobs = append(jobs, validateJob{group: groupADA + base.Name, label: fmtADA(ada), name: s.Name, sc: s})
		}
	}
	for _, f := range from {
		js, err := jobsFrom(f)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, js...)
	}
	if len(jobs) == 0 {
		return nil, usagef(cmd, "nothing to validate: name scenarios (e.g. s1-2 s1-4), give --ada-sweep, or --from a summary.json")
	}
	return jobs, nil
}

// validation is how a validate command runs its jobs.
type validation struct {
	lf   *labFlags
	po   model.PaperOptions
	set  validatePaperSet
	only []string // configurations to report; nil: every one the models predict
	pool bool
}

// labRun is a finished lab run, or several pooled: the summary validation reads and the
// files it came from.
type labRun struct {
	job   validateJob
	files []string
	sum   *labSummary
}

// run runs the lab for each job that names a scenario, one after the other, and puts
// both models beside every run. A lab that fails is reported and the others go on; it
// returns how many labs it ran.
func (v validation) run(cmd *cobra.Command, jobs []validateJob) (*validateReport, int, error) {
	labs := 0
	for _, j := range jobs {
		if j.sc != nil {
			labs++
		}
	}
	if labs > 0 && os.Geteuid() != 0 {
		return nil, 0, errors.New("the lab needs root (network namespaces, eBPF, raw sockets): run it with sudo, or re-evaluate finished runs with --from")
	}
	rep := &validateReport{Figure: "validate", Target: validateTarget}
	progress := cmd.ErrOrStderr()
	var done []labRun
	run := 0
	for _, j := range jobs {
		file := j.summary
		if j.sc != nil {
			run++
			fmt.Fprintf(progress, "== validate [%d/%d] %s: lab run of %s\n", run, labs, j.name, strings.Join(v.lf.compare, ", "))
			out, err := runScenario(cmd, "run", j.sc, j.name, v.lf, progress)
			if err != nil {
				if cmd.Context().Err() != nil {
					return nil, labs, err
				}
				fmt.Fprintf(progress, "== validate: %s failed: %v\n", j.name, err)
				rep.Failed = append(rep.Failed, validateFailure{Scenario: j.name, Error: err.Error()})
				continue
			}
			file = filepath.Join(out, "summary.json")
		}
		sum, err := readLabSummary(file)
		if err != nil {
			return nil, labs, err
		}
		r := labRun{job: j, files: []string{file}, sum: sum}
		if v.pool {
			done = append(done, r)
			continue
		}
		if err := v.addPoints(rep, r, progress); err != nil {
			return nil, labs, err
		}
	}
	for _, r := range poolRuns(done) {
		if err := v.addPoints(rep, r, progress); err != nil {
			return nil, labs, err
		}
	}
	return rep, labs, nil
}

// addPoints puts both models beside every configuration of a (pooled) lab run.
func (v validation) addPoints(rep *validateReport, r labRun, progress io.Writer) error {
	pts, err := validatePoints(r.sum, r.files[0], r.job.group, r.job.label, v.only, v.po, v.set)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(r.files, ", "), err)
	}
	for i := range pts {
		p := &pts[i]
		if len(r.files) > 1 {
			p.Pooled = r.files
		}
		fmt.Fprintf(progress, "   %s %s: measured %s, paper %s (%s), Plait %s (%s)\n", p.Scenario, p.Config,
			modelRate(p.Measured), checkRate(p.Paper), checkAccuracy(p.Paper), modelRate(p.Plait.Predicted), fmtAccuracy(p.Plait.Accuracy))
	}
	rep.Points = append(rep.Points, pts...)
	return nil
}

// poolRuns merges the runs of one scenario whose inputs (paths, ideal link, the path run
// as single best, traffic, shape, encapsulation) are the same, in the order they first
// appear; the model's reasons for the single best path may differ.
func poolRuns(runs []labRun) []labRun {
	var out []labRun
	var members [][]labResult // every lab run's configurations, flattened, per merged run
	at := map[string]int{}
	for _, r := range runs {
		in, _ := json.Marshal([]any{r.sum.Scenario, r.sum.Paths, r.sum.Ideal, r.sum.SingleBest.Index, r.sum.Traffic, r.sum.Shape, r.sum.Encap})
		i, ok := at[string(in)]
		if !ok {
			i = len(out)
			at[string(in)] = i
			s := *r.sum
			out = append(out, labRun{job: r.job, sum: &s})
			members = append(members, nil)
		}
		out[i].files = append(out[i].files, r.files...)
		members[i] = append(members[i], r.sum.Configs...)
	}
	for i := range out {
		out[i].sum.Configs = poolConfigs(members[i])
	}
	return out
}

// poolConfigs merges the results of each configuration, in the order they first appear:
// all their runs, their median as the goodput, and the retransmissions of the result
// whose own goodput is nearest to it (summary.json keeps them for its median run only). A
// configuration that failed in one lab run keeps the others' runs; one that failed in all
// stays failed.
func poolConfigs(results []labResult) []labResult {
	var out []labResult
	for _, r := range results {
		if slices.ContainsFunc(out, func(o labResult) bool { return o.Config == r.Config }) {
			continue
		}
		var ok []labResult
		var runs []float64
		for _, s := range results {
			if s.Config != r.Config || s.Error != "" || !(s.Goodput > 0) {
				continue
			}
			ok = append(ok, s)
			if len(s.Runs) == 0 {
				runs = append(runs, s.Goodput)
			}
			runs = append(runs, s.Runs...)
		}
		if len(ok) == 0 {
			out = append(out, r)
			continue
		}
		med := median(runs)
		near := slices.MinFunc(ok, func(a, b labResult) int {
			return cmp.Compare(math.Abs(a.Goodput-med), math.Abs(b.Goodput-med))
		})
		var emu *labEmulation
		for _, s := range ok {
			if s.Emulation != nil {
				if emu == nil {
					emu = &labEmulation{}
				}
				emu.Sent += s.Emulation.Sent
				emu.Late5 += s.Emulation.Late5
			}
		}
		out = append(out, labResult{Config: r.Config, Goodput: med, Runs: runs, Retransmits: near.Retransmits, Emulation: emu})
	}
	return out
}

// adaScenario is base with its paths' one-way delays spread by model.Spread from the
// smallest of them to average delay asymmetry ada (eq. 22), each path keeping its rank:
// the rates, queues and traffic stay, only the delay asymmetry changes.
func adaScenario(base *scenario.Scenario, ada time.Duration) *scenario.Scenario {
	s := *base
	s.Paths = slices.Clone(base.Paths)
	s.Compare = slices.Clone(base.Compare)
	order := make([]int, len(s.Paths))
	lo := s.Paths[0].Delay
	for i, p := range s.Paths {
		order[i] = i
		lo = min(lo, p.Delay)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(base.Paths[a].Delay, base.Paths[b].Delay) })
	ds := model.Spread(len(order), lo.Seconds(), ada.Seconds())
	for rank, i := range order {
		s.Paths[i].Delay = time.Duration(math.Round(ds[rank]*1e6)) * time.Microsecond
	}
	s.Name = fmt.Sprintf("%s-ada%s", base.Name, fmtADA(ada))
	s.Description = fmt.Sprintf("%s with its delays spread from %v to an ADA of %v", base.Name, lo, ada)
	return &s
}

func fmtADA(ada time.Duration) string {
	return fmt.Sprintf("%gms", float64(ada)/float64(time.Millisecond))
}

// jobsFrom reads the runs --from names: a summary.json (or its folder), or a
// validate.json, whose points' runs keep their group and label.
func jobsFrom(name string) ([]validateJob, error) {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		for _, f := range []string{"summary.json", "validate.json"} {
			if _, err := os.Stat(filepath.Join(name, f)); err == nil {
				name = filepath.Join(name, f)
				break
			}
		}
	}
	name, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	var probe struct {
		Figure string          `json:"figure"`
		Points []validatePoint `json:"points"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("--from %s: %w", name, err)
	}
	if probe.Figure != "validate" {
		return []validateJob{{group: groupRuns, summary: name}}, nil
	}
	var jobs []validateJob
	seen := map[string]bool{}
	for _, p := range probe.Points {
		for _, f := range append([]string{p.Summary}, p.Pooled...) {
			if !seen[f] {
				seen[f] = true
				jobs = append(jobs, validateJob{group: p.Group, label: p.Label, summary: f})
			}
		}
	}
	return jobs, nil
}

// labSummary is what validation reads of a lab run's summary.json (topo/report.py).
type labSummary struct {
	Scenario   string      `json:"scenario"`
	Shape      string      `json:"shape"`
	Encap      string      `json:"encap"` // absent before ip encapsulation: udp
	Paths      []labLink   `json:"paths"`
	Ideal      labLink     `json:"ideal_link"`
	SingleBest singleBest  `json:"single_best"`
	Traffic    labTraffic  `json:"traffic"`
	Configs    []labResult `json:"configs"`
}

// labResult reads the steady goodput, from traffic.omit on, the span the models predict
// (TCP.Omit), not the whole-run headline.
type labResult struct {
	Config      string        `json:"config"`
	Goodput     float64       `json:"goodput_steady_bps"`
	Runs        []float64     `json:"goodput_steady_runs_bps"`
	Retransmits int           `json:"retransmits"`
	Emulation   *labEmulation `json:"emulation"` // absent from runs before the switches counted it
	Error       string        `json:"error"`
}

// labEmulation counts the packets the embedded switches sent and sent more than 5 ms
// after their time, over every run of a configuration (older summaries kept the median run's only).
type labEmulation struct {
	Sent  float64 `json:"sent"`
	Late5 float64 `json:"late_5ms"`
}

func readLabSummary(file string) (*labSummary, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("lab summary: %w", err)
	}
	var s labSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab summary %s: %w", file, err)
	}
	if len(s.Paths) == 0 || s.Traffic.Duration <= 0 {
		return nil, fmt.Errorf("lab summary %s: no paths or no duration; is it a plait lab run's summary.json?", file)
	}
	return &s, nil
}

// modelCheck is one model's prediction of a measurement and its accuracy, eq. (24).
type modelCheck struct {
	Predicted float64 `json:"predicted_bps"`
	Accuracy  float64 `json:"accuracy"`
}

// validatePoint is one configuration of one lab run beside both models.
type validatePoint struct {
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
	// Late is the share of packets the switches sent more than 5 ms late: above lateWarn
	// the machine's load, not the paths, reordered the flow, and the lab measured
	// something other than the scenario.
	Late        *float64    `json:"late_5ms_share,omitempty"`
	Retransmits int         `json:"retransmits"`
	Paper       *modelCheck `json:"paper,omitempty"` // rr only
	Plait       modelCheck  `json:"plait"`
	Limit       model.Limit `json:"plait_limit"`
	Summary     string      `json:"summary"`
	Pooled      []string    `json:"pooled,omitempty"` // with --pool, every summary whose runs it has
}

type validateFailure struct {
	Scenario string `json:"scenario"`
	Error    string `json:"error"`
}

type validateReport struct {
	Figure string            `json:"figure"` // "validate", for plot.py
	Target float64           `json:"target"`
	Points []validatePoint   `json:"points"`
	Failed []validateFailure `json:"failed,omitempty"`
}

// labTCP is the flow of a lab configuration as the predictor sees it: the scenario's
// congestion control, duration, omitted start and TCP knobs, and the MSS and per-packet
// wire bytes of plain TCP (ideal, single-best) or of the tunnel: compact in the parallel
// shape (in UDP or IP); in the split shape the hosts send 1500-byte packets and the
// switches add encapsulation and telemetry.
func labTCP(sum *labSummary, config string) (model.TCP, error) {
	cc, err := model.ParseCC(sum.Traffic.CC)
	if err != nil {
		return model.TCP{}, err
	}
	t := model.TCP{CC: cc, MSS: plainMSS, Overhead: plainOverhead,
		Duration: seconds(sum.Traffic.Duration), Omit: seconds(sum.Traffic.Omit)}
	switch {
	case config != scenario.ConfigRR && config != scenario.ConfigWRR:
	case sum.Shape == scenario.ShapeSplit:
		t.Overhead += wire.EncapLen + wire.TelemetryLen
	default:
		o := wire.Overhead(sum.Encap == scenario.EncapIP, true)
		t.MSS -= o
		t.Overhead += o
	}
	return t.WithSysctls(sum.Traffic.TCP), nil
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func modelPath(l labLink) model.Path {
	return model.Path{Name: l.Name, Rate: l.Rate, Delay: time.Duration(l.Delay), Jitter: time.Duration(l.Jitter), Loss: l.Loss, Queue: l.Queue}
}

// validatePoints puts both models beside each measured configuration of a lab run that
// they predict (only those of compare, when given).
func validatePoints(sum *labSummary, file, group, label string, compare []string, po model.PaperOptions, set validatePaperSet) ([]validatePoint, error) {
	paths := make([]model.Path, len(sum.Paths))
	for i, l := range sum.Paths {
		paths[i] = modelPath(l)
	}
	if label == "" {
		label = sum.Scenario
	}
	var out []validatePoint
	for _, r := range sum.Configs {
		if !slices.Contains(validateConfigs, r.Config) || (len(compare) > 0 && !slices.Contains(compare, r.Config)) {
			continue
		}
		if r.Error != "" || !(r.Goodput > 0) {
			return nil, fmt.Errorf("%s measured no goodput (%s): nothing to compare", r.Config, r.Error)
		}
		tcp, err := labTCP(sum, r.Config)
		if err != nil {
			return nil, err
		}
		p := validatePoint{Group: group, Label: label, Scenario: sum.Scenario, Links: len(paths),
			ADA: model.ADA(paths), ABA: model.ABA(paths), Config: r.Config, Measured: r.Goodput,
			Runs: r.Runs, Retransmits: r.Retransmits, Summary: file}
		if len(r.Runs) > 1 {
			worst := 1.0
			for _, x := range r.Runs {
				worst = min(worst, model.Accuracy(x, r.Goodput))
			}
			p.Repeat = &worst
		}
		if e := r.Emulation; e != nil && e.Sent > 0 {
			late := e.Late5 / e.Sent
			p.Late = &late
		}
		var pred model.Prediction
		switch r.Config {
		case scenario.ConfigIdeal:
			pred, err = model.Predict([]model.Path{modelPath(sum.Ideal)}, model.Split{}, tcp)
		case scenario.ConfigSingleBest:
			if sum.SingleBest.Index < 0 || sum.SingleBest.Index >= len(paths) {
				return nil, fmt.Errorf("single-best: path index %d of %d paths", sum.SingleBest.Index, len(paths))
			}
			pred, err = model.Predict(paths[sum.SingleBest.Index:sum.SingleBest.Index+1], model.Split{}, tcp)
		case scenario.ConfigRR:
			pred, err = model.Predict(paths, model.Split{Mode: model.RR}, tcp)
			if err == nil {
				p.Paper, err = paperCheck(paths, po, set, tcp, r.Goodput)
			}
		case scenario.ConfigWRR:
			// The lab's weights are the paths' rates, which is also Split's default.
			pred, err = model.Predict(paths, model.Split{Mode: model.WRR}, tcp)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Config, err)
		}
		p.Plait = modelCheck{Predicted: pred.Goodput, Accuracy: model.Accuracy(r.Goodput, pred.Goodput)}
		p.Limit = pred.Limit
		out = append(out, p)
	}
	return out, nil
}

// paperCheck runs seed 002's model on the run: E is what the run moved (goodput over the
// whole duration) and s the tunnel's MSS, unless the user set them.
func paperCheck(paths []model.Path, po model.PaperOptions, set validatePaperSet, tcp model.TCP, measured float64) (*modelCheck, error) {
	if !set.bytes {
		po.Bytes = measured * tcp.Duration.Seconds() / 8
	}
	if !set.segment {
		po.Segment = tcp.MSS
	}
	res, err := model.Paper(paths, po)
	if err != nil {
		return nil, fmt.Errorf("paper model: %w", err)
	}
	return &modelCheck{Predicted: res.Throughput, Accuracy: model.Accuracy(measured, res.Throughput)}, nil
}

func fmtAccuracy(a float64) string { return fmt.Sprintf("%.1f %%", 100*a) }

func checkRate(c *modelCheck) string {
	if c == nil {
		return "-"
	}
	return modelRate(c.Predicted)
}

func checkAccuracy(c *modelCheck) string {
	if c == nil {
		return "-"
	}
	return fmtAccuracy(c.Accuracy)
}

// validateRows is the table of a report, shared by the terminal and validate.md.
func validateRows(rep *validateReport) [][]string {
	rows := [][]string{{"scenario", "links", "ADA", "ABA", "config", "measured", "runs", "lab repeat", "late >5 ms", "paper", "paper accuracy", "Plait", "Plait accuracy"}}
	for _, p := range rep.Points {
		runs, repeat, late := "-", "-", "-"
		if len(p.Runs) > 1 {
			runs = fmt.Sprintf("%.3g–%.3g (%d)", slices.Min(p.Runs)/1e6, slices.Max(p.Runs)/1e6, len(p.Runs))
		}
		if p.Repeat != nil {
			repeat = fmtAccuracy(*p.Repeat)
		}
		if p.Late != nil {
			late = fmt.Sprintf("%.2f %%", 100**p.Late)
		}
		rows = append(rows, []string{p.Scenario, fmt.Sprint(p.Links), modelSeconds(p.ADA), modelRate(p.ABA), p.Config,
			modelRate(p.Measured), runs, repeat, late, checkRate(p.Paper), checkAccuracy(p.Paper), modelRate(p.Plait.Predicted), fmtAccuracy(p.Plait.Accuracy)})
	}
	return rows
}

// validateVerdict sums up each model's accuracy against the target.
func validateVerdict(rep *validateReport) []string {
	var plait, paper []float64
	var short []string
	noisy := 0        // points below the target whose own runs are too
	var late []string // points whose lab was late, below the target or not
	for _, p := range rep.Points {
		plait = append(plait, p.Plait.Accuracy)
		if p.Plait.Accuracy < rep.Target {
			short = append(short, fmt.Sprintf("%s %s (%s)", p.Scenario, p.Config, fmtAccuracy(p.Plait.Accuracy)))
			if p.Repeat != nil && *p.Repeat < rep.Target {
				noisy++
			}
		}
		if p.Late != nil && *p.Late > lateWarn {
			late = append(late, fmt.Sprintf("%s %s (%.1f %%, Plait %s)", p.Scenario, p.Config, 100**p.Late, fmtAccuracy(p.Plait.Accuracy)))
		}
		if p.Paper != nil {
			paper = append(paper, p.Paper.Accuracy)
		}
	}
	// The median, as one run that collapsed can make an accuracy any negative number.
	span := func(xs []float64) string {
		slices.Sort(xs)
		return fmt.Sprintf("median %s over %d points (%s to %s)", fmtAccuracy(median(xs)), len(xs), fmtAccuracy(xs[0]), fmtAccuracy(xs[len(xs)-1]))
	}
	var out []string
	if len(plait) > 0 {
		out = append(out, "Plait's predictor: "+span(plait))
		if len(short) == 0 {
			out = append(out, fmt.Sprintf("every point at or above the %s target", fmtAccuracy(rep.Target)))
		} else {
			out = append(out, fmt.Sprintf("%d of %d points below the %s target: %s", len(short), len(plait), fmtAccuracy(rep.Target), strings.Join(short, ", ")))
			if noisy > 0 {
				out = append(out, fmt.Sprintf("%d of those %d are points where the lab misses the target itself: its median run predicts its farthest run (lab repeat) below %s", noisy, len(short), fmtAccuracy(rep.Target)))
			}
		}
	}
	if len(late) > 0 {
		out = append(out, fmt.Sprintf("%d points where the switches sent more than %.0f %% of packets over 5 ms late, so the machine's load reordered the paths besides their delays (more CPUs or fewer paths): %s",
			len(late), 100*lateWarn, strings.Join(late, ", ")))
	}
	if len(paper) > 0 {
		out = append(out, "seed 002's model (rr): "+span(paper))
	}
	out = append(out, validateByGroup(rep)...)
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

// validateByGroup is the median accuracy at each link count, as seed 002 reports its
// model's (per link count, 2–8 links of S1), with the paper's beside it; an ADA sweep,
// whose points share one link count, is summed up by ADA instead, as the paper's
// delay-asymmetry figure is. One line per group; none for a group of one link count.
func validateByGroup(rep *validateReport) []string {
	type bucket struct {
		label        string
		at           float64 // where it sorts: links, or ADA in seconds
		plait, paper []float64
	}
	var names []string
	groups := map[string]map[string]*bucket{}
	for _, p := range rep.Points {
		name, b := "link count", bucket{label: fmt.Sprintf("%d links", p.Links), at: float64(p.Links)}
		if base, ok := strings.CutPrefix(p.Group, groupADA); ok {
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
			part := fmt.Sprintf("%s %s", acc.label, fmtAccuracy(median(acc.plait)))
			if len(acc.paper) > 0 {
				part += fmt.Sprintf(" (paper %s)", fmtAccuracy(median(acc.paper)))
			}
			parts = append(parts, part)
		}
		out = append(out, fmt.Sprintf("median by %s, Plait's predictor (seed 002's model): %s", name, strings.Join(parts, ", ")))
	}
	return out
}

func printValidation(w io.Writer, rep *validateReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, r := range validateRows(rep) {
		if i == 0 {
			for j := range r {
				r[j] = strings.ToUpper(r[j])
			}
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range validateVerdict(rep) {
		fmt.Fprintln(w, l)
	}
	return nil
}

func validationMarkdown(rep *validateReport) []byte {
	var b bytes.Buffer
	b.WriteString("# Prediction accuracy against the lab\n\n")
	b.WriteString("Accuracy is eq. (24) of seed 002, 1 − |measured − predicted| / measured. Measured is the lab's\n")
	b.WriteString("goodput (summary.json: the median run; runs gives the range of all, Mbit/s, and their number;\n")
	b.WriteString("a pooled point takes the median of every run of the lab runs it pools); lab repeat is the\n")
	b.WriteString("same accuracy of that median against the run farthest from it, the lab predicting itself;\n")
	b.WriteString("late >5 ms is the share of packets the switches sent more than 5 ms after their time, over\n")
	b.WriteString("every run (older summaries kept the median run's only). The paper's model predicts rr only.\n\n")
	for i, r := range validateRows(rep) {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat("---|", len(r)) + "\n")
		}
	}
	b.WriteString("\n")
	for _, l := range validateVerdict(rep) {
		b.WriteString("- " + l + "\n")
	}
	return b.Bytes()
}

// writeValidation writes validate.json, validate.md and, with plot, validate.png.
func writeValidation(dir string, rep *validateReport, plot bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("validate output: %w", err)
	}
	var js bytes.Buffer
	if err := writeModelJSON(&js, rep); err != nil {
		return err
	}
	base := filepath.Join(dir, "validate")
	if err := os.WriteFile(base+".json", js.Bytes(), 0o644); err != nil {
		return fmt.Errorf("validate output: %w", err)
	}
	if err := os.WriteFile(base+".md", validationMarkdown(rep), 0o644); err != nil {
		return fmt.Errorf("validate output: %w", err)
	}
	if !plot {
		return nil
	}
	return runPlot(base+".json", base+".png")
}
