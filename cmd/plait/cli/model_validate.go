package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/topo/validate"
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
				if !slices.Contains(validate.Configs, c) {
					return usagef(cmd, "--compare %q: the models predict %s", c, strings.Join(validate.Configs, ", "))
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
			progress := cmd.ErrOrStderr()
			v := validate.Validation{Compare: lf.compare, Paper: po, Set: validate.PaperSet{Bytes: pf.bytes != "", Segment: pf.segment != 0}, Pool: pool,
				Lab: func(_ context.Context, s *scenario.Scenario, name string, out io.Writer) (string, error) {
					return runScenario(cmd, "run", s, name, &lf, out)
				},
				Added: func(p validate.Point) { printValidatePoint(progress, p) },
			}
			if cmd.Flags().Changed("compare") { // a lab run has only what it ran; --from, all
				v.Only = lf.compare
			}
			rep, labs, err := v.Run(cmd.Context(), jobs, progress)
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
	f.StringSliceVar(&lf.compare, "compare", []string{scenario.ConfigRR, scenario.ConfigWRR}, "configurations to run and predict: "+strings.Join(validate.Configs, ", "))
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

// validateJobs lists the points to validate: the scenarios named, the ADA sweep, and
// the finished runs of --from.
func validateJobs(cmd *cobra.Command, args []string, adaSweep, sweepBase string, from []string) ([]validate.Job, error) {
	var jobs []validate.Job
	for _, a := range args {
		s, err := topo.LoadScenario(a)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, validate.ScenarioJob(s, topo.ScenarioName(s, a)))
	}
	if adaSweep != "" {
		adas, err := parseDurationList(adaSweep)
		if err != nil {
			return nil, usagef(cmd, "--ada-sweep: %v", err)
		}
		base, err := topo.LoadScenario(sweepBase)
		if err != nil {
			return nil, usagef(cmd, "--sweep-base: %v", err)
		}
		base.Name = topo.ScenarioName(base, sweepBase)
		for _, ada := range adas {
			if ada < 0 {
				return nil, usagef(cmd, "--ada-sweep: ADA %v is negative", ada)
			}
			jobs = append(jobs, validate.ADAJob(base, ada))
		}
	}
	for _, f := range from {
		js, err := validate.JobsFrom(f)
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

// printValidatePoint is the progress line of a point validated.
func printValidatePoint(w io.Writer, p validate.Point) {
	fmt.Fprintf(w, "   %s %s: measured %s, paper %s (%s), Plait %s (%s)\n", p.Scenario, p.Config,
		modelRate(p.Measured), checkRate(p.Paper), checkAccuracy(p.Paper), modelRate(p.Plait.Predicted), validate.FormatAccuracy(p.Plait.Accuracy))
}

func checkRate(c *validate.Check) string {
	if c == nil {
		return "-"
	}
	return modelRate(c.Predicted)
}

func checkAccuracy(c *validate.Check) string {
	if c == nil {
		return "-"
	}
	return validate.FormatAccuracy(c.Accuracy)
}

// validateRows is the table of a report, shared by the terminal and validate.md.
func validateRows(rep *validate.Report) [][]string {
	rows := [][]string{{"scenario", "links", "ADA", "ABA", "config", "measured", "runs", "lab repeat", "late >5 ms", "paper", "paper accuracy", "Plait", "Plait accuracy"}}
	for _, p := range rep.Points {
		runs, repeat, late := "-", "-", "-"
		if len(p.Runs) > 1 {
			runs = fmt.Sprintf("%.3g–%.3g (%d)", slices.Min(p.Runs)/1e6, slices.Max(p.Runs)/1e6, len(p.Runs))
		}
		if p.Repeat != nil {
			repeat = validate.FormatAccuracy(*p.Repeat)
		}
		if p.Late != nil {
			late = fmt.Sprintf("%.2f %%", 100**p.Late)
		}
		rows = append(rows, []string{p.Scenario, fmt.Sprint(p.Links), modelSeconds(p.ADA), modelRate(p.ABA), p.Config,
			modelRate(p.Measured), runs, repeat, late, checkRate(p.Paper), checkAccuracy(p.Paper), modelRate(p.Plait.Predicted), validate.FormatAccuracy(p.Plait.Accuracy)})
	}
	return rows
}

func printValidation(w io.Writer, rep *validate.Report) error {
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
	for _, l := range validate.Verdict(rep) {
		fmt.Fprintln(w, l)
	}
	return nil
}

func validationMarkdown(rep *validate.Report) []byte {
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
	for _, l := range validate.Verdict(rep) {
		b.WriteString("- " + l + "\n")
	}
	return b.Bytes()
}

// writeValidation writes validate.json, validate.md and, with plot, validate.png.
func writeValidation(dir string, rep *validate.Report, plot bool) error {
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
