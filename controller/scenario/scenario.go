// Package scenario reads Plait's scenario files: the paths of a lab (rate, one-way
// delay, jitter, loss, queue), the traffic to run over them and the configurations to
// compare. The model, the lab and the CLI share these types so that a prediction and a
// lab run start from the same description.
//
// The file is YAML:
//
//	name: A2
//	paths:
//	  - {name: a, rate: 5mbit, delay: 100ms}
//	  - {name: b, rate: 2mbit, delay: 10ms, loss: 0.5, queue: 50}
//	traffic: {duration: 10s, cc: cubic, flows: 1}
//	compare: [ideal, rr, wrr, auto]
//
// Delays and jitter are one-way (the lab applies them in each direction), loss is in
// percent, queue is a drop-tail limit in packets.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// DefaultQueue is the drop-tail limit, in packets, of a path whose file gives none.
const DefaultQueue = 100

// MaxPaths is the most paths one striped tunnel carries (the datapath's limit).
const MaxPaths = 8

// Scenario is one parsed and validated scenario file.
type Scenario struct {
	Name    string
	Paths   []Path
	Traffic Traffic
	Compare []string
}

// Path is one emulated path.
type Path struct {
	Name   string        `json:"name"`
	Rate   float64       `json:"rate_bps"`
	Delay  time.Duration `json:"delay_ns"` // one-way, each direction
	Jitter time.Duration `json:"jitter_ns"`
	Loss   float64       `json:"loss"`  // fraction of packets, 0 ≤ Loss < 1
	Queue  int           `json:"queue"` // drop-tail limit in packets
}

// Traffic is what runs over the paths.
type Traffic struct {
	Duration time.Duration
	CC       string // Linux congestion control, e.g. cubic or bbr
	Flows    int
}

// The raw types mirror the file; values stay strings until validation so that every
// error can name the field it came from.
type rawScenario struct {
	Name    string     `yaml:"name"`
	Paths   []rawPath  `yaml:"paths"`
	Traffic rawTraffic `yaml:"traffic"`
	Compare []string   `yaml:"compare"`
}

type rawPath struct {
	Name   string `yaml:"name"`
	Rate   string `yaml:"rate"`
	Delay  string `yaml:"delay"`
	Jitter string `yaml:"jitter"`
	Loss   string `yaml:"loss"`
	Queue  *int   `yaml:"queue"`
}

type rawTraffic struct {
	Duration string `yaml:"duration"`
	CC       string `yaml:"cc"`
	Flows    *int   `yaml:"flows"`
}

// Load reads and validates a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return s, nil
}

// Parse validates a scenario given as YAML. Unknown fields are errors, so a misspelt
// key is reported instead of silently taking its default.
func Parse(data []byte) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw rawScenario
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file: a scenario needs at least a paths list")
		}
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	s := &Scenario{Name: raw.Name, Compare: raw.Compare}
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
	return s, nil
}

func (rp rawPath) validate(i int) (Path, error) {
	p := Path{Name: rp.Name, Queue: DefaultQueue}
	if p.Name == "" {
		p.Name = string(rune('a' + i))
	}
	if rp.Rate == "" {
		return p, errors.New("rate: missing; write e.g. rate: 5mbit")
	}
	var err error
	if p.Rate, err = ParseRate(rp.Rate); err != nil {
		return p, fmt.Errorf("rate: %w", err)
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
	return p, nil
}

func (rt rawTraffic) validate() (Traffic, error) {
	t := Traffic{Duration: 10 * time.Second, CC: "cubic", Flows: 1}
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
	if rt.CC != "" {
		t.CC = rt.CC
	}
	if rt.Flows != nil {
		if *rt.Flows < 1 {
			return t, fmt.Errorf("flows: %d; at least one flow", *rt.Flows)
		}
		t.Flows = *rt.Flows
	}
	return t, nil
}
