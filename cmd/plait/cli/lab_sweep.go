package cli

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/topo/sweep"
)

func newLabSweepCmd() *cobra.Command {
	var (
		n        int
		seed     uint64
		duration string
		results  string
		python   string
		drawOnly bool
		reseq    string
		repair   string
	)
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Run an ensemble of scenarios drawn from realistic ranges and report auto's distribution",
		Long: `sweep draws N scenarios from stated ranges (printed when it starts; the seed fixes
them), writes each as a scenario file, runs ideal, single-best, mptcp, wrr and auto on
each in the lab, and reports the distribution of auto/ideal, auto/single-best and
auto/mptcp (min, p10, median, and how many scenarios meet issue 30's targets) in
sweep.md, sweep.json and sweep.png.

Every scenario's lab run takes ` + sweep.LockFile + ` for itself only, so other lab runs
on the machine go in between; do not start the sweep under flock(1). Any scenario
reruns alone with plait lab run <sweep>/scenarios/<name>.yaml.`,
		Example: `  plait lab sweep --n 20 --seed 1
  plait lab sweep --n 8 --seed 1 --duration 10s
  plait lab sweep --n 20 --seed 1 --resequence auto
  plait lab sweep --n 20 --seed 1 --draw-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if n < 1 || n > 1000 {
				return usagef(cmd, "--n %d: give 1 to 1000 scenarios", n)
			}
			d, err := scenario.ParseDuration(duration)
			if err != nil || d <= 0 {
				return usagef(cmd, "--duration %q: want a positive duration such as 20s", duration)
			}
			if err := mechanismFlags(cmd, reseq, repair); err != nil {
				return err
			}
			_, err = sweep.Run(cmd.Context(), sweep.Options{
				Seed: seed, N: n, Duration: d, Ranges: sweep.Default, Results: results, DrawOnly: drawOnly,
				Resequence: reseq, Repair: repair,
				Python: python, Command: commandLine(cmd), Progress: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
			})
			return err
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&n, "n", 20, "scenarios to draw and run")
	fs.Uint64Var(&seed, "seed", 1, "seed of the draw: the same seed draws the same scenarios")
	fs.StringVar(&duration, "duration", (20 * time.Second).String(), "each run's traffic duration")
	fs.StringVar(&results, "results", "results", "folder for results/sweep-<seed>/<time>/")
	fs.StringVar(&python, "python", topo.Python, "Python interpreter with Mininet")
	fs.BoolVar(&drawOnly, "draw-only", false, "write the scenario files and run nothing")
	mechanismFlagVars(fs, &reseq, &repair)
	return cmd
}

// commandLine is cmd as called, with the flags given.
func commandLine(cmd *cobra.Command) string {
	args := []string{cmd.CommandPath()}
	cmd.Flags().Visit(func(f *pflag.Flag) { args = append(args, "--"+f.Name+" "+f.Value.String()) })
	return strings.Join(args, " ")
}
