package scenario

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

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
