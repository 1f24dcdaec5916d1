// Package validatetest makes lab summaries for the tests of validation and of its
// command.
package validatetest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Summary is a lab run's summary.json as topo/report.py writes it, with the fields
// validation reads (and one it must skip: mptcp).
func Summary(shape string) map[string]any {
	link := func(name string, rate float64, delayMs, queue int) map[string]any {
		return map[string]any{"name": name, "rate_bps": rate, "delay_ns": delayMs * 1e6, "jitter_ns": 0, "loss": 0, "queue": queue}
	}
	cfg := func(c string, bps float64) map[string]any {
		return map[string]any{"config": c, "goodput_steady_bps": bps, "retransmits": 10, "goodput_steady_runs_bps": []float64{bps * 0.9, bps, bps * 1.1}}
	}
	return map[string]any{
		"scenario":    "T2",
		"shape":       shape,
		"paths":       []any{link("a", 8e6, 20, 100), link("b", 4e6, 50, 50)},
		"ideal_link":  link("ideal", 12e6, 20, 150),
		"single_best": map[string]any{"index": 0, "name": "a", "reason": "model"},
		"traffic":     map[string]any{"duration_s": 20, "omit_s": 2, "cc": "cubic", "flows": 1},
		"configs": []any{cfg("ideal", 11.4e6), cfg("single-best", 7.6e6), cfg("mptcp", 11e6),
			cfg("rr", 7e6), cfg("wrr", 10.5e6)},
	}
}

// WriteSummary writes sum as dir/summary.json and returns its path.
func WriteSummary(t *testing.T, dir string, sum map[string]any) string {
	t.Helper()
	b, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "summary.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}
