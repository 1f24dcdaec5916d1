package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
