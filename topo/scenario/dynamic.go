package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/plait/plait/internal/mmtrace"
)

// Paths that change: a recorded trace in place of (or under) a fixed rate, bursty loss,
// and timed events.
//
//	paths:
//	  - {name: lte, trace: Verizon-LTE-short.down, delay: 20ms}            # both directions
//	  - {name: lte2, trace: {down: TMobile-LTE-short.down, up: TMobile-LTE-short.up},
//	     trace_offset: 30s, rate: 20mbit}                                   # the trace under a cap
//	  - {name: wifi, rate: 20mbit, delay: 5ms, loss: 2, burst: 4}         # Gilbert loss
//	  - {name: w2, rate: 8mbit, ge: {good_to_bad: 1, bad_to_good: 30, loss_good: 0, loss_bad: 50}}
//	events:
//	  - {at: 8s, path: wifi, down: 3s}                                     # an outage
//	  - {at: 5s, path: lte, delay: 60ms, for: 4s}                          # a change, undone after 4 s
//	  - {at: 12s, path: w2, rate: 2mbit}                                   # a change that stays
//
// A trace is a file in Mahimahi's mm-link format (internal/mmtrace); down carries the
// flow (h1 → h2, towards the device the trace was recorded on), up its ACKs. Relative
// names are looked for beside the scenario file, then in TraceDirs. trace_offset starts
// the trace that far in, so two paths can follow one trace out of step; with a rate as
// well, packets leave at the trace's opportunities no faster than the rate.

// GE is Gilbert–Elliott loss: each packet first moves a two-state chain, then is lost
// with its state's probability. All four are fractions.
type GE struct {
	GoodToBad float64 `json:"good_to_bad"`
	BadToGood float64 `json:"bad_to_good"`
	LossGood  float64 `json:"loss_good"`
	LossBad   float64 `json:"loss_bad"`
}

// MeanLoss is the chain's long-run loss rate.
func (g GE) MeanLoss() float64 {
	if g.GoodToBad+g.BadToGood == 0 {
		return g.LossGood
	}
	bad := g.GoodToBad / (g.GoodToBad + g.BadToGood)
	return bad*g.LossBad + (1-bad)*g.LossGood
}

// Gilbert is the two-state chain with a given mean loss and mean burst length (packets
// lost in a row): the bad state loses every packet and lasts burst packets on average.
func Gilbert(loss, burst float64) GE {
	r := 1 / burst
	return GE{GoodToBad: loss * r / (1 - loss), BadToGood: r, LossBad: 1}
}

// Trace is a path's recorded capacity.
type Trace struct {
	Down   string        `json:"down"` // as the file gives them
	Up     string        `json:"up"`
	Offset time.Duration `json:"offset_ns"`

	// Filled by LoadTraces.
	DownFile, UpFile string `json:"-"`
	down, up         *mmtrace.Trace
}

// Loaded returns the parsed traces, nil before LoadTraces.
func (t *Trace) Loaded() (down, up *mmtrace.Trace) { return t.down, t.up }

// MeanRate is the path's long-run capacity in bit/s on the wire towards h2: the trace's
// mean rate (at most the rate, when both are given), or the rate. 0 for a trace not
// loaded yet.
func (p Path) MeanRate() float64 {
	if p.Trace == nil {
		return p.Rate
	}
	if p.Trace.down == nil {
		return 0
	}
	// A trace counts IP packets, a rate Ethernet frames.
	m := p.Trace.down.MeanRate() * (mmtrace.OpportunityBytes + frameOverhead) / mmtrace.OpportunityBytes
	if p.Rate > 0 {
		m = min(m, p.Rate)
	}
	return m
}

// LossModel is the path's Gilbert–Elliott chain, nil for Bernoulli loss.
func (p Path) LossModel() *GE {
	switch {
	case p.GE != nil:
		return p.GE
	case p.Burst > 0:
		g := Gilbert(p.Loss, p.Burst)
		return &g
	}
	return nil
}

// TraceDirs are the folders relative trace names are looked for in after the scenario
// file's own: those of $PLAIT_TRACES (colon-separated), then the recorded traces beside a
// checkout, ../shared/reference/traces from the working folder and from the plait
// binary's checkout (bin/plait).
func TraceDirs() []string {
	var dirs []string
	if env := os.Getenv("PLAIT_TRACES"); env != "" {
		dirs = append(dirs, filepath.SplitList(env)...)
	}
	dirs = append(dirs, filepath.Join("..", "shared", "reference", "traces"))
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "..", "..", "shared", "reference", "traces"))
	}
	return dirs
}

// LoadTraces finds and reads every path's trace files, looking for relative names in dirs
// in order. Errors name the scenario line.
func (s *Scenario) LoadTraces(dirs ...string) error {
	for i := range s.Paths {
		tr := s.Paths[i].Trace
		if tr == nil {
			continue
		}
		load := func(name string) (string, *mmtrace.Trace, error) {
			file, err := findTrace(name, dirs)
			if err != nil {
				return "", nil, s.lined(fmt.Errorf("paths[%d].trace: %w", i, err))
			}
			t, err := mmtrace.Load(file)
			if err != nil {
				return "", nil, s.lined(fmt.Errorf("paths[%d].trace: %w", i, err))
			}
			return file, t, nil
		}
		var err error
		if tr.DownFile, tr.down, err = load(tr.Down); err != nil {
			return err
		}
		if tr.Up == tr.Down {
			tr.UpFile, tr.up = tr.DownFile, tr.down
		} else if tr.UpFile, tr.up, err = load(tr.Up); err != nil {
			return err
		}
	}
	return nil
}

func findTrace(name string, dirs []string) (string, error) {
	if filepath.IsAbs(name) {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("%s: no such trace file", name)
		}
		return name, nil
	}
	var looked []string
	for _, d := range dirs {
		f := filepath.Join(d, name)
		if _, err := os.Stat(f); err == nil {
			return filepath.Abs(f)
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		looked = append(looked, d)
	}
	return "", fmt.Errorf("%s: no such trace in %s; the recorded cellular traces are Mahimahi's traces/ folder (github.com/ravinet/mahimahi): put them in one of these folders or name them in $PLAIT_TRACES",
		name, strings.Join(looked, ", "))
}

type rawGE struct {
	GoodToBad string `yaml:"good_to_bad"`
	BadToGood string `yaml:"bad_to_good"`
	LossGood  string `yaml:"loss_good"`
	LossBad   string `yaml:"loss_bad"`
}

// rawTrace is a file name (both directions) or {down: FILE, up: FILE}.
type rawTrace struct {
	Down, Up string
	set      bool
}

func (rt *rawTrace) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*rt = rawTrace{Down: one, Up: one, set: true}
		return nil
	}
	var two struct {
		Down string `yaml:"down"`
		Up   string `yaml:"up"`
	}
	if err := unmarshal(&two); err != nil {
		return errors.New("trace: give a file name, or {down: FILE, up: FILE}")
	}
	*rt = rawTrace{Down: two.Down, Up: two.Up, set: true}
	return nil
}

// validateDynamic reads a path's trace, trace_offset, burst and ge (validate has read
// the rest).
func (rp rawPath) validateDynamic(p *Path) error {
	if rp.Trace.set {
		if rp.Trace.Down == "" || rp.Trace.Up == "" {
			return errors.New("trace: give both down and up, e.g. {down: x.down, up: x.up}, or one file for both")
		}
		p.Trace = &Trace{Down: rp.Trace.Down, Up: rp.Trace.Up}
		if rp.TraceOffset != "" {
			d, err := ParseDuration(rp.TraceOffset)
			if err != nil {
				return fmt.Errorf("trace_offset: %w", err)
			}
			p.Trace.Offset = d
		}
	} else if rp.TraceOffset != "" {
		return errors.New("trace_offset: only a path with a trace has one")
	}
	if rp.Burst != "" {
		b, err := parseBurst(rp.Burst)
		if err != nil {
			return err
		}
		if p.Loss == 0 {
			return errors.New("burst: give loss too (the mean loss in percent); burst is the mean number of packets lost in a row")
		}
		if err := checkBurst(p.Loss, b); err != nil {
			return err
		}
		p.Burst = b
	}
	if rp.GE != nil {
		if rp.Loss != "" || rp.Burst != "" {
			return errors.New("ge: give either ge or loss (with burst), not both")
		}
		var g GE
		for _, f := range []struct {
			name, v string
			dst     *float64
		}{{"good_to_bad", rp.GE.GoodToBad, &g.GoodToBad}, {"bad_to_good", rp.GE.BadToGood, &g.BadToGood},
			{"loss_good", rp.GE.LossGood, &g.LossGood}, {"loss_bad", rp.GE.LossBad, &g.LossBad}} {
			if f.v == "" {
				return fmt.Errorf("ge.%s: missing; Gilbert–Elliott takes good_to_bad, bad_to_good, loss_good and loss_bad, each in percent", f.name)
			}
			v, err := parsePercentIncl(f.v)
			if err != nil {
				return fmt.Errorf("ge.%s: %w", f.name, err)
			}
			*f.dst = v
		}
		if g.GoodToBad > 0 && g.BadToGood == 0 {
			return errors.New("ge.bad_to_good: 0 with good_to_bad above 0 never leaves the bad state")
		}
		p.GE = &g
		p.Loss = g.MeanLoss()
	}
	return nil
}

func parseBurst(s string) (float64, error) {
	var b float64
	if _, err := fmt.Sscan(strings.TrimSpace(s), &b); err != nil || !(b >= 1) || math.IsInf(b, 0) {
		return 0, fmt.Errorf("burst: %q; give the mean number of packets lost in a row, at least 1", s)
	}
	return b, nil
}

// checkBurst refuses a mean loss and burst length no Gilbert chain has: the good state
// must last at least one packet on average.
func checkBurst(loss, burst float64) error {
	if loss/(1-loss) > burst {
		return fmt.Errorf("burst: %g packets at %g%% loss: the bursts would need to follow each other at once; give a burst of at least %.3g",
			burst, 100*loss, loss/(1-loss))
	}
	return nil
}

// parsePercentIncl is ParsePercent with 100 allowed (a state that loses everything).
func parsePercentIncl(s string) (float64, error) {
	if v, err := ParsePercent(s); err == nil {
		return v, nil
	}
	if strings.TrimSuffix(strings.TrimSpace(s), "%") == "100" {
		return 1, nil
	}
	return ParsePercent(s)
}

// Dynamic says whether any path changes during a run: a trace or an event.
func (s *Scenario) Dynamic() bool {
	if len(s.Events) > 0 {
		return true
	}
	return slices.ContainsFunc(s.Paths, func(p Path) bool { return p.Trace != nil })
}

// frameOverhead is what the links count beyond a trace's bytes: an opportunity carries
// 1500 bytes of IP packet, a fixed rate serialises Ethernet frames 14 bytes longer.
const frameOverhead = 14

// Opportunities are the times, from the run's start to horizon, at which path i can send
// a full-sized packet towards h2 (down) or h1 (up): its trace's opportunities under its
// rate, or its rate's, with the events applied. The ideal link and the plots of capacity
// over time come from them.
func (s *Scenario) Opportunities(i int, down bool, horizon time.Duration) []time.Duration {
	// The times the path's state can change: its events' starts and ends.
	cuts := []time.Duration{0, horizon}
	for _, e := range s.Events {
		if e.Path == i {
			cuts = append(cuts, e.At, e.End())
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []time.Duration
	var cur mmtrace.Cursor
	tr := s.Paths[i].Trace
	traced := tr != nil
	if traced {
		if tr.down == nil {
			return nil // not loaded: no capacity known
		}
		t := tr.down
		if !down {
			t = tr.up
		}
		cur = t.Start(0, tr.Offset)
	}
	next := time.Duration(0) // when the rate lets the next packet go
	for k := 0; k+1 < len(cuts) && cuts[k] < horizon; k++ {
		from, to := cuts[k], min(cuts[k+1], horizon)
		p, isDown := s.AtTime(i, from)
		var gap time.Duration
		if p.Rate > 0 {
			gap = time.Duration(float64((mmtrace.OpportunityBytes+frameOverhead)*8) / p.Rate * float64(time.Second))
		}
		if isDown {
			continue
		}
		if traced {
			// A packet leaves at the first opportunity after the previous one left, and
			// no sooner than its time at the rate: the link's rule (p4switch).
			for start := max(from, next); ; {
				cur.SkipTo(int64(start))
				at := time.Duration(cur.Time())
				if at >= to {
					break
				}
				cur.Next()
				dep := at
				if gap > 0 {
					dep = max(at, start+gap)
				}
				out = append(out, dep)
				next, start = dep, dep
			}
			continue
		}
		for at := max(from, next); at < to; at += gap {
			out = append(out, at)
			next = at + gap
		}
	}
	return out
}

// IdealOpportunities is the ideal configuration's link when paths change: every path's
// opportunities (Opportunities) merged into one trace, in ms, up to horizon.
func (s *Scenario) IdealOpportunities(down bool, horizon time.Duration) []uint32 {
	var all []uint32
	for i := range s.Paths {
		for _, at := range s.Opportunities(i, down, horizon) {
			all = append(all, uint32(at/time.Millisecond))
		}
	}
	slices.Sort(all)
	if len(all) == 0 || all[len(all)-1] == 0 { // a trace lasts some time
		all = append(all, uint32(horizon/time.Millisecond))
	}
	return all
}

// CapacityOverTime is path i's capacity towards h2 in bit/s on the wire per bin up to
// horizon, from its opportunities (a full-sized frame each).
func (s *Scenario) CapacityOverTime(i int, bin, horizon time.Duration) []float64 {
	out := make([]float64, int(horizon/bin))
	for _, at := range s.Opportunities(i, true, horizon) {
		if k := int(at / bin); k < len(out) {
			out[k] += (mmtrace.OpportunityBytes + frameOverhead) * 8 / bin.Seconds()
		}
	}
	return out
}

// RunCapacity is the paths' capacity towards h2 averaged over the run, in bit/s on the
// wire: Capacity for constant paths, else what their opportunities carry in the run.
func (s *Scenario) RunCapacity() float64 {
	if !s.Dynamic() {
		return s.Capacity()
	}
	d := s.Traffic.Duration
	n := 0
	for i := range s.Paths {
		n += len(s.Opportunities(i, true, d))
	}
	return float64(n) * (mmtrace.OpportunityBytes + frameOverhead) * 8 / d.Seconds()
}
