package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/internal/mmtrace"
	"github.com/plait/plait/topo/scenario"
)

func TestLabSingleBestAndPlan(t *testing.T) {
	for _, tc := range []struct {
		yaml, want, reason string
	}{
		// A2: path c (7 Mbit/s, 50 ms) beats a (5 Mbit/s, 100 ms) and b (2 Mbit/s).
		{"paths: [{name: a, rate: 5mbit, delay: 100ms}, {name: b, rate: 2mbit, delay: 10ms}, {name: c, rate: 7mbit, delay: 50ms}]", "c", "model"},
		// A fast path with heavy loss loses to a slower clean one: the model sees loss.
		{"paths: [{name: lossy, rate: 10mbit, delay: 40ms, loss: 5}, {name: clean, rate: 6mbit, delay: 40ms}]", "clean", "model"},
		// A congestion control the model does not know: the highest rate.
		{"paths: [{name: a, rate: 1mbit}, {name: b, rate: 3mbit}]\ntraffic: {cc: reno}", "b", "highest rate"},
	} {
		s, err := scenario.Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		sb := ChooseSingleBest(s)
		if sb.Name != tc.want || !strings.Contains(sb.Reason, tc.reason) {
			t.Errorf("%s: single best %+v, want %s by %s", tc.yaml, sb, tc.want, tc.reason)
		}
	}

	s, _ := scenario.Parse([]byte("name: T\npaths: [{name: a, rate: 5mbit, delay: 100ms, queue: 10}, {name: b, rate: 2mbit, delay: 10ms, queue: 20}]"))
	p, err := BuildPlan(s, "T", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p.Scenario.Capacity != 7e6 || p.Ideal.Rate != 7e6 || p.Ideal.Delay != 10e6 || p.Ideal.Queue != 30 {
		t.Errorf("plan capacity %v ideal %+v", p.Scenario.Capacity, p.Ideal)
	}
	if p.Scenario.Paths[0].Delay != 100e6 || p.Scenario.Traffic.Omit != 2 || len(p.Scenario.Compare) != 6 {
		t.Errorf("plan scenario %+v", p.Scenario)
	}
	if !filepath.IsAbs(p.Out) || !strings.Contains(p.Out, filepath.Join("T", "")) || p.Plait == "" {
		t.Errorf("plan out %q plait %q", p.Out, p.Plait)
	}
}

func TestLabLoadScenario(t *testing.T) {
	if s, err := LoadScenario("A2"); err != nil || s.Name != "A2" {
		t.Errorf("shipped A2: %v, %v", s, err)
	}
	if _, err := LoadScenario("no-such"); err == nil || !strings.Contains(err.Error(), "shipped: ") {
		t.Errorf("unknown scenario: %v", err)
	}
	f := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(f, []byte("paths: [{rate: 5mbit, delay: soon}]"), 0o644)
	if _, err := LoadScenario(f); err == nil || !strings.Contains(err.Error(), "paths[0].delay") {
		t.Errorf("bad file: %v", err)
	}
}

// A changing scenario's plan: the ideal link follows the paths' opportunities merged
// (an outage included), the steps set both an event's change and its end.
func TestPlanDynamic(t *testing.T) {
	trace, _ := filepath.Abs("traces/test.trace")
	s, err := scenario.Parse([]byte("name: D\npaths:\n  - {name: a, trace: " + trace + ", delay: 10ms}\n  - {name: b, rate: 2mbit, delay: 20ms}\n" +
		"traffic: {duration: 10s}\nevents:\n  - {at: 2s, path: b, down: 3s}\n  - {at: 6s, path: a, delay: 40ms, for: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoadTraces(); err != nil {
		t.Fatal(err)
	}
	p, err := BuildPlan(s, "D", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.writeIdeal(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	d := p.Scenario.Dynamic
	if d == nil || len(d.Steps) != 4 || d.Steps[0].What != "b down for 3s" || !d.Steps[0].Down || d.Steps[1].At != 5 || d.Steps[1].Down ||
		d.Steps[2].Link.Delay != 40e6 || d.Steps[3].Link.Delay != 10e6 || d.Steps[2].Link.TraceDown != "" {
		t.Fatalf("steps %+v", d)
	}
	if p.Scenario.Paths[0].TraceDown != trace || p.Scenario.Paths[0].Rate != 0 || p.Ideal.Rate != 0 {
		t.Errorf("path a %+v, ideal %+v: want the trace alone", p.Scenario.Paths[0], p.Ideal)
	}
	ideal, err := mmtrace.Load(p.Ideal.TraceDown)
	if err != nil {
		t.Fatal(err)
	}
	// 10 s: the trace's 7549 opportunities and b's 2 Mbit/s for 7 of them (1514-byte frames).
	bRate := 2e6
	want := 7549 + int(7*bRate/(1514*8)+0.5)
	if got := ideal.Count(0, 0, 10*time.Second); got < want-2 || got > want+2 {
		t.Errorf("the ideal link has %d opportunities in the run, want %d", got, want)
	}
	if b := d.Capacity["b"]; len(b) != 100 || b[25] != 0 || b[60] < 1.9e6 {
		t.Errorf("b's capacity series %v", b)
	}
}
