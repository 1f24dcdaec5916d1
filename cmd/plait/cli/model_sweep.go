package cli

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

func newModelSweepCmd() *cobra.Command {
	var (
		figure    int
		links     []int
		minDelays string
		minRate   string
		adas      string
		abas      string
		queue     int
		outDir    string
		noPlot    bool
		asJSON    bool
		tf        modelTCPFlags
		pf        modelPaperFlags
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Sweep both models over delay and bandwidth asymmetry (seed 002's Figs. 7 and 8)",
		Long: `Sweep predicts round-robin striping over 1…n links whose delays (and rates) are evenly
spaced from a minimum with a given average delay asymmetry ADA (and bandwidth asymmetry
ABA), with seed 002's model and with Plait's predictor, and how many links Plait's
BestSubset keeps. It prints a table and writes figN.json, figN.csv and figN.png to --out.

Figure 8 (default): ADA 10…90 ms for minimum delays 5, 20, 35, 50 ms, 100 kbit/s links.
Figure 7: ADA 0…35 ms × ABA 0…700 kbit/s, minimum 5 ms and 100 kbit/s.
Lists are comma-separated or FROM:TO:STEP, e.g. --ada 0:35ms:5ms.
The PNG needs python3 with matplotlib (Debian: apt-get install python3-matplotlib).`,
		Example: `  plait model sweep --figure 8 --out results/model
  plait model sweep --figure 7 --links 4 --cc bbr --no-plot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec := model.SweepSpec{Figure: figure, Links: links, Queue: queue, ABAs: []float64{0}}
			switch figure {
			case 7:
				spec.MinDelays = []time.Duration{5 * time.Millisecond}
				spec.ADAs = durationRange(0, 35*time.Millisecond, 5*time.Millisecond)
				spec.ABAs = nil
				for a := 0.0; a <= 700e3; a += 100e3 {
					spec.ABAs = append(spec.ABAs, a)
				}
			case 8:
				spec.MinDelays = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 35 * time.Millisecond, 50 * time.Millisecond}
				spec.ADAs = durationRange(10*time.Millisecond, 90*time.Millisecond, 10*time.Millisecond)
			default:
				return usagef(cmd, "--figure %d: use 7 (ADA × ABA) or 8 (ADA per minimum delay)", figure)
			}
			var err error
			if minDelays != "" {
				if spec.MinDelays, err = parseDurationList(minDelays); err != nil {
					return usagef(cmd, "--min-delay: %v", err)
				}
			}
			if adas != "" {
				if spec.ADAs, err = parseDurationList(adas); err != nil {
					return usagef(cmd, "--ada: %v", err)
				}
			}
			if abas != "" {
				if spec.ABAs, err = parseRateList(abas); err != nil {
					return usagef(cmd, "--aba: %v", err)
				}
			}
			if spec.MinRate, err = scenario.ParseRate(minRate); err != nil {
				return usagef(cmd, "--min-rate: %v", err)
			}
			for _, n := range links {
				if n < 1 || n > model.MaxSubsetPaths {
					return usagef(cmd, "--links %d: give link counts from 1 to %d", n, model.MaxSubsetPaths)
				}
			}
			if queue < 0 {
				return usagef(cmd, "--queue %d: give a positive number of packets", queue)
			}
			if spec.TCP, err = tf.tcp(cmd, nil); err != nil {
				return err
			}
			if spec.Paper, err = pf.options(cmd); err != nil {
				return err
			}
			points, err := model.Sweep(spec)
			if err != nil {
				return err
			}
			if err := writeSweep(outDir, figure, points, !noPlot); err != nil {
				return err
			}
			if asJSON {
				return writeModelJSON(cmd.OutOrStdout(), points)
			}
			return printSweep(cmd.OutOrStdout(), points)
		},
	}
	f := cmd.Flags()
	f.IntVar(&figure, "figure", 8, "7: ADA × ABA per link count; 8: ADA per minimum delay")
	f.IntSliceVar(&links, "links", []int{1, 2, 3, 4}, "link counts")
	f.StringVar(&minDelays, "min-delay", "", "minimum one-way delays (default per figure)")
	f.StringVar(&minRate, "min-rate", "100kbit", "rate of the slowest link")
	f.StringVar(&adas, "ada", "", "average delay asymmetries (default per figure)")
	f.StringVar(&abas, "aba", "", "average bandwidth asymmetries, e.g. 0:700kbit:100kbit (default per figure)")
	f.IntVar(&queue, "queue", 0, fmt.Sprintf("drop-tail queue per link, packets (default %d)", scenario.DefaultQueue))
	f.StringVar(&outDir, "out", "results/model", "directory for figN.json, figN.csv and figN.png")
	f.BoolVar(&noPlot, "no-plot", false, "write the data but no PNG (no python3 needed)")
	f.BoolVar(&asJSON, "json", false, "print the points as JSON instead of a table")
	tf.register(f)
	pf.register(f)
	return cmd
}

func durationRange(from, to, step time.Duration) []time.Duration {
	var out []time.Duration
	for d := from; d <= to; d += step {
		out = append(out, d)
	}
	return out
}

// parseList reads "a,b,c" or "FROM:TO:STEP" with parse for each value.
func parseList(s string, parse func(string) (float64, error)) ([]float64, error) {
	if parts := strings.Split(s, ":"); len(parts) == 3 {
		var v [3]float64
		for i, p := range parts {
			x, err := parse(p)
			if err != nil {
				return nil, err
			}
			v[i] = x
		}
		if !(v[2] > 0) || v[1] < v[0] || (v[1]-v[0])/v[2] > 10_000 {
			return nil, fmt.Errorf("range %q: give FROM:TO:STEP with FROM ≤ TO and a positive STEP", s)
		}
		var out []float64
		for i := 0; v[0]+float64(i)*v[2] <= v[1]*(1+1e-12); i++ {
			out = append(out, v[0]+float64(i)*v[2])
		}
		return out, nil
	}
	var out []float64
	for _, p := range strings.Split(s, ",") {
		x, err := parse(p)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// parseDurationList reads durations as parseList does; a unit on the last value of a
// comma-separated list carries to the bare numbers before it: 0,10,20,40,80ms.
func parseDurationList(s string) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	last := strings.TrimSpace(parts[len(parts)-1])
	if unit := strings.TrimLeft(last, "0123456789."); unit != "" && unit != last {
		for i, p := range parts[:len(parts)-1] {
			if _, err := strconv.ParseFloat(strings.TrimSpace(p), 64); err == nil {
				parts[i] = strings.TrimSpace(p) + unit
			}
		}
		s = strings.Join(parts, ",")
	}
	xs, err := parseList(s, func(p string) (float64, error) {
		d, err := scenario.ParseDuration(p)
		return float64(d), err
	})
	out := make([]time.Duration, len(xs))
	for i, x := range xs {
		out[i] = time.Duration(x)
	}
	return out, err
}

func parseRateList(s string) ([]float64, error) {
	return parseList(s, func(p string) (float64, error) {
		if strings.TrimSpace(p) == "0" {
			return 0, nil
		}
		return scenario.ParseRate(p)
	})
}

// writeSweep writes the points as JSON and CSV and, with plot, draws the PNG with the
// system python3 and matplotlib.
func writeSweep(dir string, figure int, points []model.SweepPoint, plot bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sweep output: %w", err)
	}
	base := filepath.Join(dir, fmt.Sprintf("fig%d", figure))
	var js bytes.Buffer
	if err := writeModelJSON(&js, map[string]any{"figure": figure, "points": points}); err != nil {
		return err
	}
	if err := os.WriteFile(base+".json", js.Bytes(), 0o644); err != nil {
		return fmt.Errorf("sweep output: %w", err)
	}
	var cs bytes.Buffer
	w := csv.NewWriter(&cs)
	w.Write([]string{"links", "min_delay_s", "ada_s", "aba_bps", "capacity_bps", "paper_bps", "plait_bps", "best_bps", "best_links"})
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	for _, p := range points {
		w.Write([]string{strconv.Itoa(p.Links), g(p.MinDelay), g(p.ADA), g(p.ABA), g(p.Capacity), g(p.Paper), g(p.Plait), g(p.Best), strconv.Itoa(p.BestLinks)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("sweep csv: %w", err)
	}
	if err := os.WriteFile(base+".csv", cs.Bytes(), 0o644); err != nil {
		return fmt.Errorf("sweep output: %w", err)
	}
	if !plot {
		return nil
	}
	return runPlot(base+".json", base+".png")
}

// runPlot prefers Debian's python3, which is where python3-matplotlib installs.
func runPlot(in, out string) error {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		if py, err = exec.LookPath("python3"); err != nil {
			return errors.New("plot: python3 is not installed; install python3-matplotlib or pass --no-plot")
		}
	}
	cmd := exec.Command(py, "-", in, out)
	cmd.Stdin = bytes.NewReader(model.PlotScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			return fmt.Errorf("plot: %s has no matplotlib: install python3-matplotlib or pass --no-plot", py)
		}
		return fmt.Errorf("plot with %s: %w: %s", py, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func printSweep(w io.Writer, points []model.SweepPoint) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "LINKS\tMIN DELAY\tADA\tABA\tCAPACITY\tPAPER\tPLAIT RR\tBEST RR\tBEST LINKS\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", p.Links, modelSeconds(p.MinDelay), modelSeconds(p.ADA),
			modelRate(p.ABA), modelRate(p.Capacity), modelRate(p.Paper), modelRate(p.Plait), modelRate(p.Best), p.BestLinks)
	}
	return tw.Flush()
}
