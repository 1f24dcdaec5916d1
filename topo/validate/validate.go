// Package validate puts the lab's measurements beside the models' predictions: it runs
// the lab for each scenario (or reads finished runs), pools runs with the same inputs,
// predicts every configuration with Plait's predictor and seed 002's model, and sums up
// their accuracy (eq. 24). `plait model validate` is its command line.
package validate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

// Configs are the lab configurations the models predict: Plait's predictor all
// of them (ideal and single-best are one plain TCP flow on one link), the paper's model
// rr only.
var Configs = []string{scenario.ConfigIdeal, scenario.ConfigSingleBest, scenario.ConfigRR, scenario.ConfigWRR}

// Target is the accuracy the issue asks of Plait's predictor at every point.
const Target = 0.90

// Groups of validation points: the scenarios named on the command line, and an ADA sweep.
const (
	GroupScenarios = "scenarios"
	GroupRuns      = "lab runs"      // summaries given with --from
	GroupADA       = "ADA sweep of " // + the base scenario's name
)

// Job is one point to validate: a scenario to run in the lab, or the summary of
// a finished run.
type Job struct {
	Group, Label string
	Name         string
	Scenario     *scenario.Scenario
	Summary      string
}

// ScenarioJob is the job of running scenario s, named name, in the lab.
func ScenarioJob(s *scenario.Scenario, name string) Job {
	return Job{Group: GroupScenarios, Label: name, Name: name, Scenario: s}
}

// PaperSet says which paper options the user gave; the others follow the run.
type PaperSet struct{ Bytes, Segment bool }

// Validation is how a validate command runs its jobs.
type Validation struct {
	Compare []string // the configurations each lab run runs
	Paper   model.PaperOptions
	Set     PaperSet
	Only    []string // configurations to report; nil: every one the models predict
	Pool    bool
	// Lab runs scenario s, named name, in the lab with its output to out, and returns
	// the run's results folder.
	Lab func(ctx context.Context, s *scenario.Scenario, name string, out io.Writer) (string, error)
	// Added is told of each point as it is added, for progress.
	Added func(Point)
}

// labRun is a finished lab run, or several pooled: the summary validation reads and the
// files it came from.
type labRun struct {
	job   Job
	files []string
	sum   *labSummary
}

// Run runs the lab for each job that names a scenario, one after the other, and puts
// both models beside every run. A lab that fails is reported and the others go on; it
// returns how many labs it ran.
func (v Validation) Run(ctx context.Context, jobs []Job, progress io.Writer) (*Report, int, error) {
	labs := 0
	for _, j := range jobs {
		if j.Scenario != nil {
			labs++
		}
	}
	if labs > 0 && os.Geteuid() != 0 {
		return nil, 0, errors.New("the lab needs root (network namespaces, eBPF, raw sockets): run it with sudo, or re-evaluate finished runs with --from")
	}
	rep := &Report{Figure: "validate", Target: Target}
	var done []labRun
	run := 0
	for _, j := range jobs {
		file := j.Summary
		if j.Scenario != nil {
			run++
			fmt.Fprintf(progress, "== validate [%d/%d] %s: lab run of %s\n", run, labs, j.Name, strings.Join(v.Compare, ", "))
			out, err := v.Lab(ctx, j.Scenario, j.Name, progress)
			if err != nil {
				if ctx.Err() != nil {
					return nil, labs, err
				}
				fmt.Fprintf(progress, "== validate: %s failed: %v\n", j.Name, err)
				rep.Failed = append(rep.Failed, Failure{Scenario: j.Name, Error: err.Error()})
				continue
			}
			file = filepath.Join(out, "summary.json")
		}
		sum, err := readLabSummary(file)
		if err != nil {
			return nil, labs, err
		}
		r := labRun{job: j, files: []string{file}, sum: sum}
		if v.Pool {
			done = append(done, r)
			continue
		}
		if err := v.addPoints(rep, r); err != nil {
			return nil, labs, err
		}
	}
	for _, r := range poolRuns(done) {
		if err := v.addPoints(rep, r); err != nil {
			return nil, labs, err
		}
	}
	return rep, labs, nil
}

// addPoints puts both models beside every configuration of a (pooled) lab run.
func (v Validation) addPoints(rep *Report, r labRun) error {
	pts, err := points(r.sum, r.files[0], r.job.Group, r.job.Label, v.Only, v.Paper, v.Set)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(r.files, ", "), err)
	}
	for i := range pts {
		p := &pts[i]
		if len(r.files) > 1 {
			p.Pooled = r.files
		}
		if v.Added != nil {
			v.Added(*p)
		}
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
