package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/plait/plait/model"
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
	cmd.AddCommand(newLabRunCmd(), newLabUpCmd(), newLabLsCmd(), newLabCleanCmd())
	return cmd
}

type labFlags struct {
	compare  []string
	duration string
	results  string
	python   string
	shape    string
	encap    string
	repeat   int
	tcp      map[string]int
}

func (f *labFlags) register(cmd *cobra.Command, run bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.python, "python", topo.Python, "Python interpreter with Mininet")
	fs.StringVar(&f.shape, "shape", "", "override the scenario's shape: parallel or split")
	fs.StringVar(&f.encap, "encap", "", "override the scenario's encap: ip (no NAT on the paths) or udp (as through NAT)")
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
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n, len(s.Paths), fmtRate(s.Capacity()), s.Description)
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
			return runPython(cmd, python, "clean", "")
		},
	}
	cmd.Flags().StringVar(&python, "python", topo.Python, "Python interpreter with Mininet")
	return cmd
}

// loadScenario reads SCENARIO as a file, or else as the name of a shipped scenario.
func loadScenario(arg string) (*scenario.Scenario, error) {
	if _, err := os.Stat(arg); err == nil {
		return scenario.Load(arg)
	}
	b, ok := topo.Scenario(arg)
	if !ok {
		return nil, fmt.Errorf("scenario %q: no such file and no shipped scenario of that name (shipped: %s)",
			arg, strings.Join(topo.Scenarios(), ", "))
	}
	s, err := scenario.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("shipped scenario %s: %w", arg, err)
	}
	return s, nil
}

// labPlan is what the Python lab reads: the validated scenario in plain units and the
// choices made in Go.
type labPlan struct {
	Scenario   labScenario `json:"scenario"`
	Ideal      labLink     `json:"ideal"`
	SingleBest singleBest  `json:"single_best"`
	Plait      string      `json:"plait"`
	Out        string      `json:"out"`
	Repeat     int         `json:"repeat"`
	Version    string      `json:"plait_version"`
	BMv2JSON   string      `json:"bmv2_json"`
	LateWarn   float64     `json:"late_warn"`
}

// lateWarn is the share of packets the embedded switches may send more than 5 ms late
// before a lab run warns and a validation point says the lab, not the paths, reordered
// them: RACK's window grows in steps of a quarter of min_rtt (10 ms on S1), so lateness
// of that order is reordering TCP reacts to.
const lateWarn = 0.01

type labScenario struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Shape       string     `json:"shape"`
	Switch      string     `json:"switch"`
	Encap       string     `json:"encap"` // Plait's tunnel: ip or udp
	Paths       []labLink  `json:"paths"`
	Traffic     labTraffic `json:"traffic"`
	Compare     []string   `json:"compare"`
	Capacity    float64    `json:"capacity_bps"`
}

type labLink struct {
	Name   string  `json:"name"`
	Rate   float64 `json:"rate_bps"`
	Delay  int64   `json:"delay_ns"`
	Jitter int64   `json:"jitter_ns"`
	Loss   float64 `json:"loss"`
	Queue  int     `json:"queue"`
}

type labTraffic struct {
	Duration float64        `json:"duration_s"`
	Omit     float64        `json:"omit_s"`
	CC       string         `json:"cc"`
	Flows    int            `json:"flows"`
	TCP      map[string]int `json:"tcp,omitempty"` // net.ipv4.tcp_<knob> on both hosts
}

type singleBest struct {
	Index     int     `json:"index"`
	Name      string  `json:"name"`
	Predicted float64 `json:"predicted_bps,omitempty"`
	Reason    string  `json:"reason"`
}

func linkOf(p scenario.Path) labLink {
	return labLink{Name: p.Name, Rate: p.Rate, Delay: int64(p.Delay), Jitter: int64(p.Jitter), Loss: p.Loss, Queue: p.Queue}
}

// Plain TCP over one path (no tunnel): 1500 − 20 IP − 20 TCP − 12 timestamps of payload,
// and 14 Ethernet + 40 + 12 bytes besides it on the wire.
const plainMSS, plainOverhead = 1448, 66

// chooseSingleBest picks the path whose single-path goodput the model predicts highest
// (one TCP flow alone on it: rate, delay, queue and loss all count); when the model
// cannot predict (a congestion control it does not know) it picks the highest rate.
func chooseSingleBest(s *scenario.Scenario) singleBest {
	best := singleBest{Index: -1}
	cc, err := model.ParseCC(s.Traffic.CC)
	if err == nil {
		tcp := model.TCP{CC: cc, MSS: plainMSS, Overhead: plainOverhead, Duration: s.Traffic.Duration}.WithSysctls(s.Traffic.TCP)
		for i, p := range model.PathsFromScenario(s.Paths) {
			pr, err := model.Predict([]model.Path{p}, model.Split{Mode: model.RR}, tcp)
			if err != nil {
				best.Index = -1
				break
			}
			if best.Index < 0 || pr.Goodput > best.Predicted {
				best = singleBest{Index: i, Name: p.Name, Predicted: pr.Goodput}
			}
		}
	}
	if best.Index >= 0 {
		best.Reason = fmt.Sprintf("the model's single-path prediction, %s", fmtRate(best.Predicted))
		return best
	}
	best = singleBest{Index: 0}
	for i, p := range s.Paths {
		if p.Rate > s.Paths[best.Index].Rate {
			best.Index = i
		}
	}
	best.Name = s.Paths[best.Index].Name
	best.Reason = "the highest rate (the model does not know cc " + s.Traffic.CC + ")"
	return best
}

func buildPlan(s *scenario.Scenario, name, results string) (*labPlan, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the plait binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("find the plait binary: %w", err)
	}
	p := &labPlan{
		Scenario: labScenario{
			Name: name, Description: s.Description, Shape: s.Shape, Switch: s.Switch, Encap: s.Encap, Compare: s.Compare,
			Capacity: s.Capacity(),
			Traffic: labTraffic{Duration: s.Traffic.Duration.Seconds(), Omit: s.Traffic.Omit.Seconds(),
				CC: s.Traffic.CC, Flows: s.Traffic.Flows, TCP: s.Traffic.TCP},
		},
		Ideal:      linkOf(s.Ideal()),
		SingleBest: chooseSingleBest(s),
		Plait:      exe,
		Version:    buildRevision(),
		LateWarn:   lateWarn,
	}
	for _, sp := range s.Paths {
		p.Scenario.Paths = append(p.Scenario.Paths, linkOf(sp))
	}
	if results != "" {
		out, err := filepath.Abs(filepath.Join(results, name, time.Now().Format("20060102-150405")))
		if err != nil {
			return nil, err
		}
		p.Out = out
	}
	for _, c := range []string{"p4/build/plait.json", filepath.Join(filepath.Dir(exe), "../p4/build/plait.json")} {
		if _, err := os.Stat(c); err == nil {
			p.BMv2JSON, _ = filepath.Abs(c)
			break
		}
	}
	return p, nil
}

func runLab(cmd *cobra.Command, verb, arg string, f *labFlags) error {
	s, err := loadScenario(arg)
	if err != nil {
		return err
	}
	name := s.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
	}
	_, err = runScenario(cmd, verb, s, name, f, cmd.OutOrStdout())
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
		s.Traffic.Duration = d
		s.Traffic.Omit = min(s.Traffic.Omit, d/5)
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
	if s.Shape == scenario.ShapeSplit && contains(s.Compare, scenario.ConfigMPTCP) {
		return "", fmt.Errorf("compare: mptcp needs one interface per path at the hosts, which only shape parallel has; drop it or use --compare")
	}
	if verb == "run" && (f.repeat < 1 || f.repeat > 20) {
		return "", usagef(cmd, "--repeat %d: give 1 to 20", f.repeat)
	}
	results := ""
	if verb == "run" {
		results = f.results
	}
	plan, err := buildPlan(s, name, results)
	if err != nil {
		return "", err
	}
	plan.Repeat = max(f.repeat, 1)
	if os.Geteuid() != 0 {
		return "", errors.New("the lab needs root (network namespaces, eBPF, raw sockets): run it with sudo")
	}
	dir, err := os.MkdirTemp("", "plait-lab-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	planFile := filepath.Join(dir, "plan.json")
	b, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(planFile, b, 0o644); err != nil {
		return "", err
	}
	if err := runPythonIn(cmd, f.python, dir, verb, planFile, stdout); err != nil {
		return "", err
	}
	return plan.Out, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func runPython(cmd *cobra.Command, python, verb, plan string) error {
	dir, err := os.MkdirTemp("", "plait-lab-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	return runPythonIn(cmd, python, dir, verb, plan, cmd.OutOrStdout())
}

// runPythonIn runs the lab's Python in dir. Ctrl-C reaches the Python process too (same
// process group); it cleans up and exits, and this waits for it (the signal only
// cancels the command's context, it does not kill the child).
func runPythonIn(cmd *cobra.Command, python, dir, verb, plan string, stdout io.Writer) error {
	if _, err := os.Stat(python); err != nil {
		return fmt.Errorf("%s not found: the lab runs on the system Python with Debian's mininet (apt-get install python3 mininet, or make deps)", python)
	}
	check := exec.Command(python, "-c", "import mininet.net, matplotlib, yaml")
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("%s cannot import mininet, matplotlib and yaml (%s): apt-get install mininet python3-matplotlib python3-yaml, or make deps",
			python, strings.TrimSpace(lastLine(string(out))))
	}
	entry, err := topo.Extract(dir)
	if err != nil {
		return err
	}
	args := []string{"-u", entry, verb}
	if plan != "" {
		args = append(args, "--plan", plan)
	}
	c := exec.Command(python, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, cmd.ErrOrStderr()
	c.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if verb != "up" {
		// Its own process group: a terminal's Ctrl-C reaches only this process, which
		// passes exactly one SIGINT on, so the lab's clean-up is not interrupted twice.
		// (up keeps the terminal's group: Mininet's CLI reads it and takes Ctrl-C.)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("run the lab: %w", err)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-cmd.Context().Done():
			if verb != "up" {
				c.Process.Signal(os.Interrupt)
			}
		case <-done:
		}
	}()
	err = c.Wait()
	close(done)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("lab %s failed (exit %d)", verb, ee.ExitCode())
		}
		return fmt.Errorf("run the lab: %w", err)
	}
	return nil
}

// buildRevision is the commit the binary was built from ("+dirty" with local changes),
// for the results to say what ran; "unknown" outside a git checkout.
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", ""
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value[:min(12, len(st.Value))]
		case "vcs.modified":
			if st.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	return rev + dirty
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
