package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
)

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run a scenario's Mininet lab: every configuration side by side, or interactively",
		Long: `The lab builds a scenario's paths in Mininet (one P4 switch per path emulating its link,
an agent per host, the controller programming the switches) and runs one TCP flow over
them in each configuration of the scenario's compare list:

  ideal        one link with the sum of the paths' rates and the smallest delay
  single-best  plain TCP over the path the model predicts best on its own
  mptcp        Linux MPTCP, one subflow per path
  rr, wrr      Plait round robin / weights in proportion to the rates, held by the controller
  auto         Plait steered by the controller

SCENARIO is a file or the name of a shipped scenario (plait lab ls). The lab needs root,
Mininet, iperf3 and mptcpize (make deps installs them).`,
	}
	cmd.AddCommand(newLabRunCmd(), newLabSweepCmd(), newLabUpCmd(), newLabLsCmd(), newLabCleanCmd())
	return cmd
}

type labFlags struct {
	compare  []string
	duration string
	results  string
	python   string
	shape    string
	encap    string
	reseq    string
	repair   string
	repeat   int
	tcp      map[string]int
}

func (f *labFlags) register(cmd *cobra.Command, run bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.python, "python", topo.Python, "Python interpreter with Mininet")
	fs.StringVar(&f.shape, "shape", "", "override the scenario's shape: parallel or split")
	fs.StringVar(&f.encap, "encap", "", "override the scenario's encap: ip (no NAT on the paths) or udp (as through NAT)")
	mechanismFlagVars(fs, &f.reseq, &f.repair)
	fs.StringToIntVar(&f.tcp, "tcp", nil, "set the hosts' TCP knobs over traffic.tcp's, e.g. reordering=30,dsack=0 ("+strings.Join(scenario.TCPKnobNames(), ", ")+")")
	if run {
		fs.StringSliceVar(&f.compare, "compare", nil, "run only these configurations, e.g. rr,auto")
		fs.StringVar(&f.duration, "duration", "", "override traffic.duration, e.g. 5s")
		fs.StringVar(&f.results, "results", "results", "folder for results/<scenario>/<time>/")
		fs.IntVar(&f.repeat, "repeat", 1, "run every configuration this many times (in turns); the median run counts")
	}
}

func newLabRunCmd() *cobra.Command {
	var f labFlags
	cmd := &cobra.Command{
		Use:   "run SCENARIO",
		Short: "Run every configuration of a scenario and write summary.json, summary.md and plots",
		Example: `  plait lab run a2
  plait lab run topo/scenarios/k1.yaml --compare ideal,auto --duration 10s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLab(cmd, "run", args[0], &f)
		},
	}
	f.register(cmd, true)
	return cmd
}

func newLabUpCmd() *cobra.Command {
	var f labFlags
	cmd := &cobra.Command{
		Use:   "up SCENARIO",
		Short: "Build a scenario's lab and open the Mininet CLI (the lab goes when you leave)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLab(cmd, "up", args[0], &f)
		},
	}
	f.register(cmd, false)
	return cmd
}

func newLabLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the shipped scenarios",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPATHS\tCAPACITY\tDESCRIPTION")
			for _, n := range topo.Scenarios() {
				b, _ := topo.Scenario(n)
				s, err := scenario.Parse(b)
				if err != nil {
					return fmt.Errorf("shipped scenario %s: %w", n, err)
				}
				capacity := fmtRate(s.Capacity())
				if err := s.LoadTraces(scenario.TraceDirs()...); err != nil {
					capacity = "traces not found"
				} else if s.Dynamic() {
					capacity = "~" + fmtRate(s.RunCapacity())
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n, len(s.Paths), capacity, s.Description)
			}
			return tw.Flush()
		},
	}
}

func newLabCleanCmd() *cobra.Command {
	var python string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove what a lab that was killed left behind (processes, interfaces, pins)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return topo.Run(cmd.Context(), python, "clean", nil, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&python, "python", topo.Python, "Python interpreter with Mininet")
	return cmd
}

func runLab(cmd *cobra.Command, verb, arg string, f *labFlags) error {
	s, err := topo.LoadScenario(arg)
	if err != nil {
		return err
	}
	_, err = runScenario(cmd, verb, s, topo.ScenarioName(s, arg), f, cmd.OutOrStdout())
	return err
}

// runScenario runs the lab (verb run or up) on s with f's overrides, the lab's output going
// to stdout, and returns the results folder of a run.
func runScenario(cmd *cobra.Command, verb string, s *scenario.Scenario, name string, f *labFlags, stdout io.Writer) (string, error) {
	var err error
	if len(f.compare) > 0 {
		if s.Compare, err = scenario.ParseCompare(f.compare); err != nil {
			return "", usagef(cmd, "--%v", err)
		}
	}
	if f.duration != "" {
		d, err := scenario.ParseDuration(f.duration)
		if err != nil || d <= 0 {
			return "", usagef(cmd, "--duration %q: want a positive duration such as 5s", f.duration)
		}
		if err := s.SetDuration(d); err != nil {
			return "", usagef(cmd, "--duration %v: %v", d, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.tcp)) {
		v := f.tcp[name]
		if err := scenario.ParseTCPKnob(name, v); err != nil {
			return "", usagef(cmd, "--tcp %v", err)
		}
		if s.Traffic.TCP == nil {
			s.Traffic.TCP = map[string]int{}
		}
		s.Traffic.TCP[name] = v
	}
	if f.shape != "" {
		if f.shape != scenario.ShapeParallel && f.shape != scenario.ShapeSplit {
			return "", usagef(cmd, "--shape %q: use parallel or split", f.shape)
		}
		s.Shape = f.shape
	}
	if f.encap != "" {
		if f.encap != scenario.EncapIP && f.encap != scenario.EncapUDP {
			return "", usagef(cmd, "--encap %q: use ip or udp", f.encap)
		}
		s.Encap = f.encap
	}
	if err := mechanismFlags(cmd, f.reseq, f.repair); err != nil {
		return "", err
	}
	if f.reseq != "" {
		s.Resequence = f.reseq
	}
	if f.repair != "" {
		s.Repair = f.repair
	}
	if s.Shape == scenario.ShapeSplit && slices.Contains(s.Compare, scenario.ConfigMPTCP) {
		return "", fmt.Errorf("compare: mptcp needs one interface per path at the hosts, which only shape parallel has; drop it or use --compare")
	}
	if verb == "run" && (f.repeat < 1 || f.repeat > 20) {
		return "", usagef(cmd, "--repeat %d: give 1 to 20", f.repeat)
	}
	results := ""
	if verb == "run" {
		results = f.results
	}
	plan, err := topo.BuildPlan(s, name, results)
	if err != nil {
		return "", err
	}
	plan.Repeat = max(f.repeat, 1)
	if os.Geteuid() != 0 {
		return "", errors.New("the lab needs root (network namespaces, eBPF, raw sockets): run it with sudo")
	}
	if err := topo.Run(cmd.Context(), f.python, verb, plan, stdout, cmd.ErrOrStderr()); err != nil {
		return "", err
	}
	return plan.Out, nil
}

// mechanismFlagVars registers --resequence and --repair, which lab run and lab sweep
// share.
func mechanismFlagVars(fs *pflag.FlagSet, reseq, repair *string) {
	fs.StringVar(reseq, "resequence", "", "override the scenario's resequence: auto (for the auto configuration only), on (every Plait configuration: the receiving hosts put the tunnel's packets in order) or off")
	fs.StringVar(repair, "repair", "", "override the scenario's repair: auto (for the auto configuration only), on (every Plait configuration: the hosts resend packets lost on a path) or off")
}

// mechanismFlags checks --resequence and --repair ("" leaves the scenario's).
func mechanismFlags(cmd *cobra.Command, reseq, repair string) error {
	for _, f := range []struct{ name, v string }{{"resequence", reseq}, {"repair", repair}} {
		if f.v != "" && f.v != scenario.ResequenceAuto && f.v != scenario.ResequenceOn && f.v != scenario.ResequenceOff {
			return usagef(cmd, "--%s %q: use auto, on or off", f.name, f.v)
		}
	}
	return nil
}
