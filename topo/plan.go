package topo

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

// LoadScenario reads arg as a scenario file, or else as the name of a shipped scenario.
func LoadScenario(arg string) (*scenario.Scenario, error) {
	if _, err := os.Stat(arg); err == nil {
		return scenario.Load(arg)
	}
	b, ok := Scenario(arg)
	if !ok {
		return nil, fmt.Errorf("scenario %q: no such file and no shipped scenario of that name (shipped: %s)",
			arg, strings.Join(Scenarios(), ", "))
	}
	s, err := scenario.Parse(b)
	if err == nil {
		err = s.LoadTraces(scenario.TraceDirs()...)
	}
	if err != nil {
		return nil, fmt.Errorf("shipped scenario %s: %w", arg, err)
	}
	return s, nil
}

// ScenarioName is s's name, or else the name of the file arg it was read from.
func ScenarioName(s *scenario.Scenario, arg string) string {
	if s.Name != "" {
		return s.Name
	}
	return strings.TrimSuffix(filepath.Base(arg), filepath.Ext(arg))
}

// Plan is what the Python lab reads: the validated scenario in plain units and the
// choices made in Go.
type Plan struct {
	Scenario   PlanScenario `json:"scenario"`
	Ideal      Link         `json:"ideal"`
	SingleBest SingleBest   `json:"single_best"`
	Plait      string       `json:"plait"`
	Out        string       `json:"out"`
	Repeat     int          `json:"repeat"`
	Version    string       `json:"plait_version"`
	BMv2JSON   string       `json:"bmv2_json"`
	LateWarn   float64      `json:"late_warn"`

	// The ideal link's trace when paths change (towards h2 and h1), which Run writes
	// beside the plan.
	idealDown, idealUp []uint32
}

// LateWarn is the share of packets the embedded switches may send more than 5 ms late
// before a lab run warns and a validation point says the lab, not the paths, reordered
// them: RACK's window grows in steps of a quarter of min_rtt (10 ms on S1), so lateness
// of that order is reordering TCP reacts to.
const LateWarn = 0.01

// PlanScenario is the scenario as the lab reads it.
type PlanScenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Shape       string   `json:"shape"`
	Switch      string   `json:"switch"`
	Encap       string   `json:"encap"`      // Plait's tunnel: ip or udp
	Auth        string   `json:"auth"`       // on: the tunnel tags its packets under a key made for the run
	Resequence  string   `json:"resequence"` // auto, on, off: whether both hosts put the tunnel's packets in order
	Repair      string   `json:"repair"`     // auto, on, off: whether both hosts repair losses on the paths
	Paths       []Link   `json:"paths"`
	Traffic     Traffic  `json:"traffic"`
	Compare     []string `json:"compare"`
	Capacity    float64  `json:"capacity_bps"`
	Dynamic     *Dynamic `json:"dynamic,omitempty"` // paths that change during a run
}

// Link is one path (or the ideal link) in plain units, as the plan and summary.json
// write it.
type Link struct {
	Name   string  `json:"name"`
	Rate   float64 `json:"rate_bps"` // with a trace, its cap (0: none)
	Delay  int64   `json:"delay_ns"`
	Jitter int64   `json:"jitter_ns"`
	Loss   float64 `json:"loss"`
	Queue  int     `json:"queue"`
	// Capacity is the mean rate towards h2 (wrr's weight); the rate unless a trace.
	Capacity float64 `json:"capacity_bps"`
	// GE is Gilbert–Elliott loss, p_good_to_bad/p_bad_to_good/loss_good/loss_bad.
	GE          *[4]float64 `json:"ge,omitempty"`
	TraceDown   string      `json:"trace_down,omitempty"` // files, towards h2 and h1
	TraceUp     string      `json:"trace_up,omitempty"`
	TraceOffset int64       `json:"trace_offset_ns,omitempty"`
}

// Dynamic is what the lab applies during every configuration's run: each step sets a
// path's link (both directions) at its time from the flow's start; the capacity series
// are for the plots.
type Dynamic struct {
	Steps       []Step               `json:"steps"`
	CapacityBin float64              `json:"capacity_bin_s"`
	Capacity    map[string][]float64 `json:"capacity_bps"`
}

// Step is one of scenario.Steps in plain units.
type Step struct {
	At   float64 `json:"at_s"`
	Path int     `json:"path"` // index into paths
	Link Link    `json:"link"` // without its trace, which keeps running
	Down bool    `json:"down"`
	What string  `json:"what"`
	Line int     `json:"line"`
}

// Traffic is the scenario's flow in plain units.
type Traffic struct {
	Duration float64        `json:"duration_s"`
	Omit     float64        `json:"omit_s"`
	CC       string         `json:"cc"`
	Flows    int            `json:"flows"`
	TCP      map[string]int `json:"tcp,omitempty"` // net.ipv4.tcp_<knob> on both hosts
}

// SingleBest is the path the single-best configuration runs plain TCP over, and why.
type SingleBest struct {
	Index     int     `json:"index"`
	Name      string  `json:"name"`
	Predicted float64 `json:"predicted_bps,omitempty"`
	Reason    string  `json:"reason"`
}

func linkOf(p scenario.Path) Link {
	l := Link{Name: p.Name, Rate: p.Rate, Delay: int64(p.Delay), Jitter: int64(p.Jitter), Loss: p.Loss, Queue: p.Queue, Capacity: p.MeanRate()}
	if g := p.LossModel(); g != nil {
		l.GE = &[4]float64{g.GoodToBad, g.BadToGood, g.LossGood, g.LossBad}
	}
	if tr := p.Trace; tr != nil {
		l.TraceDown, l.TraceUp, l.TraceOffset = tr.DownFile, tr.UpFile, int64(tr.Offset)
	}
	return l
}

// capacityBin is the plots' resolution of a changing path's capacity.
const capacityBin = 100 * time.Millisecond

// addDynamic puts a changing scenario's steps and capacity series into the plan, and
// the paths' opportunities merged for the ideal link.
func (p *Plan) addDynamic(s *scenario.Scenario) {
	if !s.Dynamic() {
		return
	}
	d := &Dynamic{Steps: []Step{}, CapacityBin: capacityBin.Seconds(), Capacity: map[string][]float64{}}
	for _, st := range s.Steps() {
		l := linkOf(st.State)
		l.TraceDown, l.TraceUp, l.TraceOffset = "", "", 0
		d.Steps = append(d.Steps, Step{At: st.At.Seconds(), Path: st.Path, Link: l, Down: st.Down, What: st.What, Line: st.Line})
	}
	for i, sp := range s.Paths {
		d.Capacity[sp.Name] = s.CapacityOverTime(i, capacityBin, s.Traffic.Duration)
	}
	p.Scenario.Dynamic = d
	p.Scenario.Capacity = s.RunCapacity()
	// The ideal link's trace outlasts the run: iperf3 and the queues drain after it.
	horizon := s.Traffic.Duration + 30*time.Second
	p.idealDown, p.idealUp = s.IdealOpportunities(true, horizon), s.IdealOpportunities(false, horizon)
	p.Ideal.Rate = 0 // the merged trace alone
}

// writeIdeal writes the ideal link's trace files into dir, when paths change.
func (p *Plan) writeIdeal(dir string) error {
	for _, f := range []struct {
		ms   []uint32
		name string
		dst  *string
	}{{p.idealDown, "ideal.down", &p.Ideal.TraceDown}, {p.idealUp, "ideal.up", &p.Ideal.TraceUp}} {
		if f.ms == nil {
			continue
		}
		var b strings.Builder
		for _, ms := range f.ms {
			fmt.Fprintf(&b, "%d\n", ms)
		}
		*f.dst = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.dst, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("write the ideal link's trace: %w", err)
		}
	}
	return nil
}

// Plain TCP over one path (no tunnel): 1500 − 20 IP − 20 TCP − 12 timestamps of payload,
// and 14 Ethernet + 40 + 12 bytes besides it on the wire.
const PlainMSS, PlainOverhead = 1448, 66

// ChooseSingleBest picks the path whose single-path goodput the model predicts highest
// (one TCP flow alone on it: rate, delay, queue and loss all count); when the model
// cannot predict (a congestion control it does not know) it picks the highest rate.
func ChooseSingleBest(s *scenario.Scenario) SingleBest {
	best := SingleBest{Index: -1}
	cc, err := model.ParseCC(s.Traffic.CC)
	if err == nil {
		tcp := model.TCP{CC: cc, MSS: PlainMSS, Overhead: PlainOverhead, Duration: s.Traffic.Duration}.WithSysctls(s.Traffic.TCP)
		for i, p := range model.PathsFromScenario(s.Paths) {
			pr, err := model.Predict([]model.Path{p}, model.Split{Mode: model.RR}, tcp)
			if err != nil {
				best.Index = -1
				break
			}
			if best.Index < 0 || pr.Goodput > best.Predicted {
				best = SingleBest{Index: i, Name: p.Name, Predicted: pr.Goodput}
			}
		}
	}
	if best.Index >= 0 {
		best.Reason = fmt.Sprintf("the model's single-path prediction, %s", scenario.HumanRate(best.Predicted))
		return best
	}
	best = SingleBest{Index: 0}
	for i, p := range s.Paths {
		if p.MeanRate() > s.Paths[best.Index].MeanRate() {
			best.Index = i
		}
	}
	best.Name = s.Paths[best.Index].Name
	best.Reason = "the highest rate (the model does not know cc " + s.Traffic.CC + ")"
	return best
}

// BuildPlan is the plan of a lab of s named name, whose results go to
// results/<name>/<time>/ (none with results "": the lab is interactive).
func BuildPlan(s *scenario.Scenario, name, results string) (*Plan, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the plait binary: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("find the plait binary: %w", err)
	}
	p := &Plan{
		Scenario: PlanScenario{
			Name: name, Description: s.Description, Shape: s.Shape, Switch: s.Switch, Encap: s.Encap, Auth: s.Auth, Resequence: s.Resequence, Repair: s.Repair, Compare: s.Compare,
			Capacity: s.Capacity(),
			Traffic: Traffic{Duration: s.Traffic.Duration.Seconds(), Omit: s.Traffic.Omit.Seconds(),
				CC: s.Traffic.CC, Flows: s.Traffic.Flows, TCP: s.Traffic.TCP},
		},
		Ideal:      linkOf(s.Ideal()),
		SingleBest: ChooseSingleBest(s),
		Plait:      exe,
		Version:    Revision(),
		LateWarn:   LateWarn,
	}
	for _, sp := range s.Paths {
		p.Scenario.Paths = append(p.Scenario.Paths, linkOf(sp))
	}
	p.addDynamic(s)
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

// Revision is the commit the binary was built from ("+dirty" with local changes), for
// the results to say what ran; "unknown" outside a git checkout.
func Revision() string {
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
