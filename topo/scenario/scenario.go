// Package scenario reads Plait's scenario files: the paths of a lab (rate, one-way delay,
// jitter, loss, queue), the traffic to run over them (duration, omit, cc, flows, the
// hosts' TCP knobs), the configurations to compare, the shape, switch and encapsulation.
// The model, the lab and the CLI share these types so that a prediction and a lab run
// start from the same description. Every field but paths[].rate (or a trace in its
// place) has a default; unknown fields are errors, each naming the field and its line.
// The schema: docs/lab.md#scenario-files; traces, bursty loss and events (dynamic.go):
// docs/traces.md.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultQueue is the drop-tail limit, in packets, of a path whose file gives none.
const DefaultQueue = 100

// MaxPaths is the most paths one striped tunnel carries (the datapath's limit).
const MaxPaths = 8

// Configurations are what a lab run can compare, in the order a run takes them.
var Configurations = []string{ConfigIdeal, ConfigSingleBest, ConfigMPTCP, ConfigRR, ConfigWRR, ConfigAuto}

// The configurations of compare.
const (
	ConfigIdeal      = "ideal"       // one TCP flow over one link: sum of the rates, smallest delay
	ConfigSingleBest = "single-best" // one TCP flow over the best single path
	ConfigMPTCP      = "mptcp"       // Linux MPTCP, one subflow per path
	ConfigRR         = "rr"          // Plait, round robin
	ConfigWRR        = "wrr"         // Plait, static weights in proportion to the rates
	ConfigAuto       = "auto"        // Plait, steered by the controller
)

// Lab shapes.
const (
	ShapeParallel = "parallel" // h1 — one switch per path — h2; the hosts' eBPF splits
	ShapeSplit    = "split"    // h1 — split switch — path switches — merge switch — h2
)

// How Plait's tunnel carries its header on the lab's paths (see wire).
const (
	EncapIP  = "ip"  // right after IPv4: the lab's paths have no NAT
	EncapUDP = "udp" // in UDP, as paths through NAT need
)

// Whether the lab's tunnel tags its packets (docs/security.md).
const (
	AuthOn  = "on"  // a key made for the run, as operators' tunnels have
	AuthOff = "off" // untagged: the lab's links are its own
)

// Resequencing at the receiving hosts (agent: TunnelConfig.resequence); repair
// (TunnelConfig.repair) takes the same three values.
const (
	ResequenceAuto = "auto" // for the auto configuration only (the controller's)
	ResequenceOn   = "on"   // for every Plait configuration
	ResequenceOff  = "off"
)

// Switch targets.
const (
	SwitchAuto     = "auto"     // BMv2 when simple_switch_grpc is installed, else embedded
	SwitchEmbedded = "embedded" // plait switch
	SwitchBMv2     = "bmv2"     // simple_switch_grpc
)

// Scenario is one parsed and validated scenario file.
type Scenario struct {
	Name        string
	Description string
	Shape       string
	Switch      string
	Encap       string
	Auth        string
	Resequence  string
	Repair      string
	Paths       []Path
	Traffic     Traffic
	Compare     []string
	Events      []Event

	lines map[string]int // the line of each field, by its name in errors (paths[1].rate)
}

// Capacity is the sum of the paths' mean rates in bit/s.
func (s *Scenario) Capacity() float64 {
	var c float64
	for _, p := range s.Paths {
		c += p.MeanRate()
	}
	return c
}

// Ideal is the one link of the ideal configuration: the sum of the paths' mean rates, the
// smallest of their delays, no jitter or loss, and the sum of their queues (the buffer
// the paths hold together, so the ideal link is never shorter of buffer than the paths).
func (s *Scenario) Ideal() Path {
	p := Path{Name: ConfigIdeal, Rate: s.Capacity(), Delay: s.Paths[0].Delay}
	for _, q := range s.Paths {
		p.Delay = min(p.Delay, q.Delay)
		p.Queue += q.Queue
	}
	return p
}

// Path is one emulated path.
type Path struct {
	Name string `json:"name"`
	// Rate is the fixed rate; with a trace, the cap under it (0: the trace alone).
	Rate   float64       `json:"rate_bps"`
	Delay  time.Duration `json:"delay_ns"` // one-way, each direction
	Jitter time.Duration `json:"jitter_ns"`
	Loss   float64       `json:"loss"`  // fraction of packets, 0 ≤ Loss < 1 (the mean with GE or Burst)
	Queue  int           `json:"queue"` // drop-tail limit in packets
	// Burst is the mean loss burst in packets: Gilbert loss of mean Loss; 0 for Bernoulli.
	Burst float64 `json:"burst,omitempty"`
	GE    *GE     `json:"ge,omitempty"`    // Gilbert–Elliott's four parameters, as given
	Trace *Trace  `json:"trace,omitempty"` // a recorded capacity
}

// Traffic is what runs over the paths.
type Traffic struct {
	Duration time.Duration
	// Omit is the start of every run left out of its goodput (slow start and the
	// controller's first estimates); the same for every configuration.
	Omit  time.Duration
	CC    string // Linux congestion control, e.g. cubic or bbr
	Flows int
	// TCP holds the hosts' net.ipv4.tcp_<knob> settings the file gives, by knob; the
	// kernel's defaults stand for the rest.
	TCP map[string]int
}

// TCPKnobs are the hosts' TCP settings a scenario may give: those of Linux that decide how
// a flow meets reordering (the remedies seed 004 compares: DSACK, Eifel by timestamps,
// F-RTO; RACK and the duplicate-ACK threshold), with the values each accepts.
var TCPKnobs = map[string]struct {
	Min, Max int
	Meaning  string
}{
	"dsack":          {0, 1, "report duplicate SACKs (0 also freezes RACK's reordering window)"},
	"frto":           {0, 2, "F-RTO after a timeout: 0 off, 1 basic, 2 SACK-enhanced (default)"},
	"timestamps":     {0, 2, "TCP timestamps (Eifel detection); 0 gives their 12 bytes to payload"},
	"recovery":       {0, 7, "bits: 1 RACK loss detection, 2 static reordering window, 4 no duplicate-ACK threshold"},
	"reordering":     {1, 300, "initial reordering degree: SACKed segments before dupthresh recovery (default 3)"},
	"max_reordering": {1, 10000, "highest reordering degree TCP learns (default 300)"},
}

// TCPKnobNames lists TCPKnobs' names in order.
func TCPKnobNames() []string { return slices.Sorted(maps.Keys(TCPKnobs)) }

// ParseTCPKnob validates one knob=value setting (traffic.tcp's entries, --tcp on the
// command line).
func ParseTCPKnob(name string, value int) error {
	k, ok := TCPKnobs[name]
	if !ok {
		return fmt.Errorf("%s: not a TCP knob the lab sets; use %s", name, strings.Join(TCPKnobNames(), ", "))
	}
	if value < k.Min || value > k.Max {
		return fmt.Errorf("%s: %d is out of range %d..%d (%s)", name, value, k.Min, k.Max, k.Meaning)
	}
	return nil
}

// DefaultOmit is the warm-up left out of the steady goodput when the file gives no
// traffic.omit (at most a fifth of the duration).
const DefaultOmit = 2 * time.Second

// The raw types mirror the file; values stay strings until validation so that every
// error can name the field it came from.
type rawScenario struct {
	Name        string     `yaml:"name"`
	Description string     `yaml:"description"`
	Shape       string     `yaml:"shape"`
	Switch      string     `yaml:"switch"`
	Encap       string     `yaml:"encap"`
	Auth        string     `yaml:"auth"`
	Resequence  string     `yaml:"resequence"`
	Repair      string     `yaml:"repair"`
	Paths       []rawPath  `yaml:"paths"`
	Traffic     rawTraffic `yaml:"traffic"`
	Compare     []string   `yaml:"compare"`
	Events      []rawEvent `yaml:"events"`
}

type rawPath struct {
	Name        string   `yaml:"name"`
	Rate        string   `yaml:"rate"`
	Delay       string   `yaml:"delay"`
	Jitter      string   `yaml:"jitter"`
	Loss        string   `yaml:"loss"`
	Queue       *int     `yaml:"queue"`
	Burst       string   `yaml:"burst"`
	GE          *rawGE   `yaml:"ge"`
	Trace       rawTrace `yaml:"trace"`
	TraceOffset string   `yaml:"trace_offset"`
}

type rawTraffic struct {
	Duration string            `yaml:"duration"`
	Omit     string            `yaml:"omit"`
	CC       string            `yaml:"cc"`
	Flows    *int              `yaml:"flows"`
	TCP      map[string]string `yaml:"tcp"`
}

// Load reads and validates a scenario file and its traces (looked for beside it, then in
// TraceDirs).
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	s, err := Parse(data)
	if err == nil {
		err = s.LoadTraces(append([]string{filepath.Dir(path)}, TraceDirs()...)...)
	}
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// Parse validates a scenario given as YAML. Unknown fields are errors, so a misspelt
// key is reported instead of silently taking its default. Traces are not read: see
// LoadTraces.
func Parse(data []byte) (*Scenario, error) {
	lines := fieldLines(data)
	s, err := parse(data)
	if err != nil {
		return nil, (&Scenario{lines: lines}).lined(err)
	}
	s.lines = lines
	for k := range s.Events {
		s.Events[k].Line = lines[fmt.Sprintf("events[%d]", k)]
	}
	if err := s.CheckEvents(); err != nil {
		return nil, err
	}
	return s, nil
}

// fieldLines maps each field of a YAML document, named as errors name it
// (paths[1].rate), to its line; empty when the YAML does not parse (the decoder's own
// error names the line then).
func fieldLines(data []byte) map[string]int {
	lines := map[string]int{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return lines
	}
	var walk func(n *yaml.Node, name string)
	walk = func(n *yaml.Node, name string) {
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				if name != "" {
					k = name + "." + k
				}
				lines[k] = n.Content[i].Line
				walk(n.Content[i+1], k)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				k := fmt.Sprintf("%s[%d]", name, i)
				lines[k] = c.Line
				walk(c, k)
			}
		}
	}
	walk(doc.Content[0], "")
	return lines
}

// lined puts the line of the field an error names (its text up to the first ": ", or
// the nearest enclosing field) in front of it.
func (s *Scenario) lined(err error) error {
	field, _, ok := strings.Cut(err.Error(), ": ")
	for ok && field != "" {
		if n, found := s.lines[field]; found {
			return fmt.Errorf("line %d: %w", n, err)
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return err
}

func parse(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw rawScenario
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: a scenario needs at least a paths list")
		}
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	s := &Scenario{Name: raw.Name, Description: raw.Description}
	if s.Name != "" && !nameRE.MatchString(s.Name) {
		return nil, fmt.Errorf("name: %q: use letters, digits, '.', '_' and '-' (it names the results folder)", s.Name)
	}
	var err error
	if s.Shape, err = oneOf("shape", raw.Shape, ShapeParallel, ShapeParallel, ShapeSplit); err != nil {
		return nil, err
	}
	if s.Switch, err = oneOf("switch", raw.Switch, SwitchAuto, SwitchAuto, SwitchEmbedded, SwitchBMv2); err != nil {
		return nil, err
	}
	if s.Encap, err = oneOf("encap", raw.Encap, EncapIP, EncapIP, EncapUDP); err != nil {
		return nil, err
	}
	if s.Auth, err = oneOf("auth", raw.Auth, AuthOn, AuthOn, AuthOff); err != nil {
		return nil, err
	}
	if s.Resequence, err = oneOf("resequence", raw.Resequence, ResequenceAuto, ResequenceAuto, ResequenceOn, ResequenceOff); err != nil {
		return nil, err
	}
	if s.Repair, err = oneOf("repair", raw.Repair, ResequenceAuto, ResequenceAuto, ResequenceOn, ResequenceOff); err != nil {
		return nil, err
	}
	if len(raw.Paths) == 0 {
		return nil, errors.New("paths: no paths; give at least one, e.g. - {rate: 5mbit, delay: 45ms}")
	}
	if len(raw.Paths) > MaxPaths {
		return nil, fmt.Errorf("paths: %d paths, at most %d fit one tunnel", len(raw.Paths), MaxPaths)
	}
	names := map[string]int{}
	for i, rp := range raw.Paths {
		p, err := rp.validate(i)
		if err != nil {
			return nil, fmt.Errorf("paths[%d].%w", i, err)
		}
		if j, dup := names[p.Name]; dup {
			return nil, fmt.Errorf("paths[%d].name: %q is also the name of paths[%d]; names must be unique", i, p.Name, j)
		}
		names[p.Name] = i
		s.Paths = append(s.Paths, p)
	}
	t, err := raw.Traffic.validate()
	if err != nil {
		return nil, fmt.Errorf("traffic.%w", err)
	}
	s.Traffic = t
	if s.Compare, err = validateCompare(raw.Compare); err != nil {
		return nil, err
	}
	for k, re := range raw.Events {
		e, err := re.validate(s, names)
		if errors.Is(err, errNoChange) {
			return nil, fmt.Errorf("events[%d]: %w", k, err)
		} else if err != nil {
			return nil, fmt.Errorf("events[%d].%w", k, err)
		}
		s.Events = append(s.Events, e)
	}
	return s, nil
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	ccRE   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// pathNameRE: path names go into agent, controller and plot labels.
	pathNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,14}$`)
)

// oneOf returns v, or def when v is empty, or an error naming field when v is not one of
// allowed.
func oneOf(field, v, def string, allowed ...string) (string, error) {
	if v == "" {
		return def, nil
	}
	if !slices.Contains(allowed, v) {
		return "", fmt.Errorf("%s: %q is not one of %s", field, v, strings.Join(allowed, ", "))
	}
	return v, nil
}

// validateCompare checks the configurations; none listed means all of them.
func validateCompare(cs []string) ([]string, error) {
	if len(cs) == 0 {
		return slices.Clone(Configurations), nil
	}
	seen := map[string]int{}
	for i, c := range cs {
		if !slices.Contains(Configurations, c) {
			return nil, fmt.Errorf("compare[%d]: %q is not a configuration; use %s", i, c, strings.Join(Configurations, ", "))
		}
		if j, dup := seen[c]; dup {
			return nil, fmt.Errorf("compare[%d]: %q is already compare[%d]", i, c, j)
		}
		seen[c] = i
	}
	return slices.Clone(cs), nil
}

func (rp rawPath) validate(i int) (Path, error) {
	p := Path{Name: rp.Name, Queue: DefaultQueue}
	if p.Name == "" {
		p.Name = string(rune('a' + i))
	}
	if !pathNameRE.MatchString(p.Name) {
		return p, fmt.Errorf("name: %q: use up to 15 letters, digits, '_' or '-', starting with a letter", p.Name)
	}
	var err error
	if rp.Rate == "" && !rp.Trace.set {
		return p, errors.New("rate: missing; write e.g. rate: 5mbit, or give a trace")
	} else if rp.Rate != "" {
		if p.Rate, err = ParseRate(rp.Rate); err != nil {
			return p, fmt.Errorf("rate: %w", err)
		}
	}
	if rp.Delay != "" {
		if p.Delay, err = ParseDuration(rp.Delay); err != nil {
			return p, fmt.Errorf("delay: %w", err)
		}
	}
	if rp.Jitter != "" {
		if p.Jitter, err = ParseDuration(rp.Jitter); err != nil {
			return p, fmt.Errorf("jitter: %w", err)
		}
	}
	if rp.Loss != "" {
		if p.Loss, err = ParsePercent(rp.Loss); err != nil {
			return p, fmt.Errorf("loss: %w", err)
		}
	}
	if rp.Queue != nil {
		if *rp.Queue < 1 {
			return p, fmt.Errorf("queue: %d packets; a drop-tail queue holds at least 1", *rp.Queue)
		}
		p.Queue = *rp.Queue
	}
	return p, rp.validateDynamic(&p)
}

func (rt rawTraffic) validate() (Traffic, error) {
	t := Traffic{Duration: 10 * time.Second, Omit: DefaultOmit, CC: "cubic", Flows: 1}
	if rt.Duration != "" {
		d, err := ParseDuration(rt.Duration)
		if err != nil {
			return t, fmt.Errorf("duration: %w", err)
		}
		if d == 0 {
			return t, errors.New("duration: 0; a run needs some time, e.g. duration: 10s")
		}
		t.Duration = d
	}
	if rt.Omit != "" {
		d, err := ParseDuration(rt.Omit)
		if err != nil {
			return t, fmt.Errorf("omit: %w", err)
		}
		t.Omit = d
	} else if t.Omit*5 > t.Duration {
		t.Omit = t.Duration / 5 // short runs keep most of their time
	}
	if t.Omit >= t.Duration {
		return t, fmt.Errorf("omit: %v leaves nothing of duration %v to measure", t.Omit, t.Duration)
	}
	if rt.CC != "" {
		if !ccRE.MatchString(rt.CC) {
			return t, fmt.Errorf("cc: %q is not a congestion control name such as cubic or bbr", rt.CC)
		}
		t.CC = rt.CC
	}
	if rt.Flows != nil {
		if *rt.Flows < 1 {
			return t, fmt.Errorf("flows: %d; at least one flow", *rt.Flows)
		}
		t.Flows = *rt.Flows
	}
	if len(rt.TCP) > 0 {
		t.TCP = make(map[string]int, len(rt.TCP))
	}
	for _, name := range slices.Sorted(maps.Keys(rt.TCP)) {
		v := rt.TCP[name]
		n, err := strconv.Atoi(v)
		if err == nil {
			err = ParseTCPKnob(name, n)
		} else {
			err = fmt.Errorf("%s: %q is not a whole number", name, v)
		}
		if err != nil {
			return t, fmt.Errorf("tcp.%w", err)
		}
		t.TCP[name] = n
	}
	return t, nil
}

// ParseCompare validates a list of configurations given outside a file (a command-line
// override); errors name it compare[i].
func ParseCompare(cs []string) ([]string, error) {
	if len(cs) == 0 {
		return nil, fmt.Errorf("compare: empty; use %s", strings.Join(Configurations, ", "))
	}
	return validateCompare(cs)
}
