package validate

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/plait/plait/topo"
)

// labSummary is what validation reads of a lab run's summary.json (topo/report.py).
type labSummary struct {
	Scenario   string          `json:"scenario"`
	Shape      string          `json:"shape"`
	Encap      string          `json:"encap"` // absent before ip encapsulation: udp
	Paths      []topo.Link     `json:"paths"`
	Ideal      topo.Link       `json:"ideal_link"`
	SingleBest topo.SingleBest `json:"single_best"`
	Traffic    topo.Traffic    `json:"traffic"`
	Configs    []labResult     `json:"configs"`
}

// labResult reads the steady goodput, from traffic.omit on, the span the models predict
// (TCP.Omit), not the whole-run headline.
type labResult struct {
	Config      string        `json:"config"`
	Goodput     float64       `json:"goodput_steady_bps"`
	Runs        []float64     `json:"goodput_steady_runs_bps"`
	Retransmits int           `json:"retransmits"`
	Emulation   *labEmulation `json:"emulation"` // absent from runs before the switches counted it
	Error       string        `json:"error"`
}

// labEmulation counts the packets the embedded switches sent and sent more than 5 ms
// after their time, over every run of a configuration (older summaries kept the median run's only).
type labEmulation struct {
	Sent  float64 `json:"sent"`
	Late5 float64 `json:"late_5ms"`
}

func readLabSummary(file string) (*labSummary, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("lab summary: %w", err)
	}
	var s labSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab summary %s: %w", file, err)
	}
	if len(s.Paths) == 0 || s.Traffic.Duration <= 0 {
		return nil, fmt.Errorf("lab summary %s: no paths or no duration; is it a plait lab run's summary.json?", file)
	}
	return &s, nil
}
