package scenario

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
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
	DownFile, UpFile string         `json:"-"`
	down, up         *mmtrace.Trace `json:"-"`
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

// Event is a timed change of one path, in both directions.
type Event struct {
	At   time.Duration `json:"at_ns"`
	Path int           `json:"path"` // index into Paths
	// For undoes the change after this long; 0 keeps it. A down event's For is the outage.
	For  time.Duration `json:"for_ns"`
	Down bool          `json:"down,omitempty"`
	// The changes, nil where the event keeps the path's value.
	Rate   *float64       `json:"rate_bps,omitempty"`
	Delay  *time.Duration `json:"delay_ns,omitempty"`
	Jitter *time.Duration `json:"jitter_ns,omitempty"`
	Loss   *float64       `json:"loss,omitempty"`
	Burst  *float64       `json:"burst,omitempty"`
	Queue  *int           `json:"queue,omitempty"`
	Line   int            `json:"line"`
}

// End is when the event's change is undone, or At when it stays.
func (e Event) End() time.Duration { return e.At + e.For }

// Apply returns p with the event's changes.
func (e Event) Apply(p Path) Path {
	if e.Rate != nil {
		p.Rate = *e.Rate
	}
	if e.Delay != nil {
		p.Delay = *e.Delay
	}
	if e.Jitter != nil {
		p.Jitter = *e.Jitter
	}
	if e.Loss != nil {
		p.Loss, p.GE = *e.Loss, nil
		if e.Burst == nil {
			p.Burst = 0
		}
	}
	if e.Burst != nil {
		p.Burst, p.GE = *e.Burst, nil
	}
	if e.Queue != nil {
		p.Queue = *e.Queue
	}
	return p
}

var errNoChange = errors.New("nothing changes: give down (an outage's length) or rate, delay, jitter, loss, burst or queue")

type rawEvent struct {
	At     string `yaml:"at"`
	Path   string `yaml:"path"`
	For    string `yaml:"for"`
	Down   string `yaml:"down"`
	Rate   string `yaml:"rate"`
	Delay  string `yaml:"delay"`
	Jitter string `yaml:"jitter"`
	Loss   string `yaml:"loss"`
	Burst  string `yaml:"burst"`
	Queue  *int   `yaml:"queue"`
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

func (re rawEvent) validate(s *Scenario, names map[string]int) (Event, error) {
	var e Event
	if re.At == "" {
		return e, errors.New("at: missing; write e.g. at: 8s (from the flow's start)")
	}
	var err error
	if e.At, err = ParseDuration(re.At); err != nil {
		return e, fmt.Errorf("at: %w", err)
	}
	i, ok := names[re.Path]
	if !ok {
		var have []string
		for _, p := range s.Paths {
			have = append(have, p.Name)
		}
		if re.Path == "" {
			return e, fmt.Errorf("path: missing; name one of %s", strings.Join(have, ", "))
		}
		return e, fmt.Errorf("path: %q is not a path of this scenario (paths: %s)", re.Path, strings.Join(have, ", "))
	}
	e.Path = i
	if re.For != "" {
		if e.For, err = ParseDuration(re.For); err != nil || e.For == 0 {
			return e, fmt.Errorf("for: %q: give how long the change lasts, e.g. 3s", re.For)
		}
	}
	changes := 0
	if re.Down != "" {
		if re.For != "" {
			return e, errors.New("down: the outage's length is down's value; drop for")
		}
		d, err := ParseDuration(re.Down)
		if err != nil || d == 0 {
			return e, fmt.Errorf("down: %q: give the outage's length, e.g. down: 3s", re.Down)
		}
		e.Down, e.For = true, d
		changes++
	}
	if re.Rate != "" {
		r, err := ParseRate(re.Rate)
		if err != nil {
			return e, fmt.Errorf("rate: %w", err)
		}
		e.Rate = &r
		changes++
	}
	for _, f := range []struct {
		name, v string
		dst     **time.Duration
	}{{"delay", re.Delay, &e.Delay}, {"jitter", re.Jitter, &e.Jitter}} {
		if f.v == "" {
			continue
		}
		d, err := ParseDuration(f.v)
		if err != nil {
			return e, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = &d
		changes++
	}
	if re.Loss != "" {
		l, err := ParsePercent(re.Loss)
		if err != nil {
			return e, fmt.Errorf("loss: %w", err)
		}
		e.Loss = &l
		changes++
	}
	if re.Burst != "" {
		b, err := parseBurst(re.Burst)
		if err != nil {
			return e, err
		}
		loss := s.Paths[i].Loss
		if e.Loss != nil {
			loss = *e.Loss
		}
		if loss == 0 {
			return e, errors.New("burst: give loss too (the path has none)")
		}
		if err := checkBurst(loss, b); err != nil {
			return e, err
		}
		e.Burst = &b
		changes++
	}
	if re.Queue != nil {
		if *re.Queue < 1 {
			return e, fmt.Errorf("queue: %d packets; a drop-tail queue holds at least 1", *re.Queue)
		}
		e.Queue = re.Queue
		changes++
	}
	if changes == 0 {
		return e, errNoChange
	}
	if e.Down && changes > 1 {
		return e, errors.New("down: an outage changes nothing else; give the other changes an event of their own")
	}
	return e, nil
}

// CheckEvents refuses events after the run ends and events of one path that overlap
// (one change to a path at a time), naming the lines. It runs again when a command line
// shortens the run.
func (s *Scenario) CheckEvents() error {
	d := s.Traffic.Duration
	for k, e := range s.Events {
		if e.At >= d || e.End() > d {
			what := fmt.Sprintf("at %v", e.At)
			if e.For > 0 {
				what = fmt.Sprintf("%v to %v", e.At, e.End())
			}
			return s.lined(fmt.Errorf("events[%d]: %s is after the run ends at %v (traffic.duration); move it into the run or lengthen the run", k, what, d))
		}
	}
	order := make([]int, len(s.Events))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(a, b int) bool {
		ea, eb := s.Events[order[a]], s.Events[order[b]]
		return ea.Path < eb.Path || ea.Path == eb.Path && ea.At < eb.At
	})
	for k := 1; k < len(order); k++ {
		prev, cur := s.Events[order[k-1]], s.Events[order[k]]
		if prev.Path != cur.Path || cur.At > prev.At && cur.At >= prev.End() {
			continue
		}
		a, b := min(order[k-1], order[k]), max(order[k-1], order[k])
		return s.lined(fmt.Errorf("events[%d]: overlaps events[%d] (line %d) on path %s at %v; a path takes one change at a time, so start this one when the other ends (%v)",
			b, a, s.Events[a].Line, s.Paths[cur.Path].Name, cur.At, prev.End()))
	}
	return nil
}

// SetDuration changes the run's length (a command-line override): omit shrinks to at most
// a fifth of it and the events are checked against it.
func (s *Scenario) SetDuration(d time.Duration) error {
	s.Traffic.Duration = d
	s.Traffic.Omit = min(s.Traffic.Omit, d/5)
	return s.CheckEvents()
}

// Dynamic says whether any path changes during a run: a trace or an event.
func (s *Scenario) Dynamic() bool {
	if len(s.Events) > 0 {
		return true
	}
	return slices.ContainsFunc(s.Paths, func(p Path) bool { return p.Trace != nil })
}

// AtTime is path i as it is at time t of the run, with the events up to then applied,
// and whether it is down.
func (s *Scenario) AtTime(i int, t time.Duration) (Path, bool) {
	p := s.Paths[i]
	down := false
	for _, e := range s.Events {
		if e.Path != i || e.At > t {
			continue
		}
		if e.For > 0 && t >= e.End() {
			continue // undone
		}
		if e.Down {
			down = true
		} else {
			p = e.Apply(p)
		}
	}
	return p, down
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
	if tr := s.Paths[i].Trace; tr != nil && tr.down != nil {
		t := tr.down
		if !down {
			t = tr.up
		}
		cur = t.Start(0, tr.Offset)
	}
	traced := s.Paths[i].Trace != nil
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

// Step is what the lab sets on a path, in both directions, from At on: an event's start,
// or its end when it is undone.
type Step struct {
	At    time.Duration
	Path  int
	State Path // the path's parameters from At on (its trace keeps running)
	Down  bool
	What  string // for the lab's log, e.g. "wifi down for 3s"
	Line  int    // the event's line in the scenario file
}

// Steps are the events' changes in time order.
func (s *Scenario) Steps() []Step {
	var out []Step
	for _, e := range s.Events {
		name := s.Paths[e.Path].Name
		at := func(t time.Duration, what string) {
			p, down := s.AtTime(e.Path, t)
			out = append(out, Step{At: t, Path: e.Path, State: p, Down: down, What: what, Line: e.Line})
		}
		if e.Down {
			at(e.At, fmt.Sprintf("%s down for %v", name, e.For))
			at(e.End(), name+" up again")
			continue
		}
		at(e.At, name+": "+e.describe())
		if e.For > 0 {
			at(e.End(), name+" back as before")
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].At < out[b].At })
	return out
}

func (e Event) describe() string {
	var parts []string
	if e.Rate != nil {
		parts = append(parts, "rate "+FormatRate(*e.Rate))
	}
	if e.Delay != nil {
		parts = append(parts, fmt.Sprintf("delay %v", *e.Delay))
	}
	if e.Jitter != nil {
		parts = append(parts, fmt.Sprintf("jitter %v", *e.Jitter))
	}
	if e.Loss != nil {
		parts = append(parts, fmt.Sprintf("loss %g%%", 100**e.Loss))
	}
	if e.Burst != nil {
		parts = append(parts, fmt.Sprintf("bursts of %g", *e.Burst))
	}
	if e.Queue != nil {
		parts = append(parts, fmt.Sprintf("queue %d", *e.Queue))
	}
	s := strings.Join(parts, ", ")
	if e.For > 0 {
		s += fmt.Sprintf(" for %v", e.For)
	}
	return s
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
