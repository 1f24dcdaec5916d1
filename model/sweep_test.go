package model

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

func TestSpreadHasTheAsymmetry(t *testing.T) {
	for n := 2; n <= 8; n++ {
		for _, ada := range []int64{0, 7, 30, 90} {
			vals := Spread(n, 5, float64(ada))
			xs := make([]*big.Rat, n)
			for i, v := range vals {
				xs[i] = new(big.Rat).SetFloat64(v)
			}
			got, _ := AverageAsymmetry(xs).Float64()
			if !near(got, float64(ada), 1e-12) && !(ada == 0 && got == 0) {
				t.Errorf("n=%d: spread %v has asymmetry %v, want %d", n, vals, got, ada)
			}
			if vals[0] != 5 {
				t.Errorf("n=%d: starts at %v, want the minimum 5", n, vals[0])
			}
		}
	}
}

func TestSweep(t *testing.T) {
	spec := SweepSpec{
		Figure:    8,
		Links:     []int{1, 2, 4},
		MinDelays: []time.Duration{5 * time.Millisecond, 50 * time.Millisecond},
		MinRate:   1e5,
		ADAs:      []time.Duration{10 * time.Millisecond, 90 * time.Millisecond},
		ABAs:      []float64{0},
	}
	pts, err := Sweep(spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2*3*2 {
		t.Fatalf("%d points, want 12", len(pts))
	}
	for _, p := range pts {
		delays := Spread(p.Links, p.MinDelay, p.ADA)
		paths := make([]Path, p.Links)
		for i := range paths {
			paths[i] = Path{Rate: 1e5, Delay: time.Duration(delays[i] * 1e9)}
		}
		paper, _ := Paper(paths, PaperOptions{})
		plait, _ := Predict(paths, Split{Mode: RR}, TCP{})
		if p.Paper != paper.Throughput || p.Plait != plait.Goodput || p.Best < p.Plait || p.BestLinks < 1 || p.BestLinks > p.Links {
			t.Errorf("point %+v: paper %v plait %v", p, paper.Throughput, plait.Goodput)
		}
	}
	for _, bad := range []SweepSpec{{}, {Links: []int{0}, MinDelays: spec.MinDelays, MinRate: 1, ADAs: spec.ADAs, ABAs: spec.ABAs},
		{Links: []int{2}, MinDelays: spec.MinDelays, MinRate: 1, ADAs: []time.Duration{-1}, ABAs: spec.ABAs}} {
		if _, err := Sweep(bad); err == nil {
			t.Errorf("sweep %+v accepted", bad)
		}
	}
}

// The embedded script draws both figures when the system python has matplotlib.
func TestPlotScript(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import matplotlib").Run(); err != nil {
		t.Skipf("%s with matplotlib is not available: %v", py, err)
	}
	for _, fig := range []int{7, 8} {
		spec := SweepSpec{Figure: fig, Links: []int{1, 2}, MinDelays: []time.Duration{5 * time.Millisecond},
			MinRate: 1e5, ADAs: []time.Duration{0, 20 * time.Millisecond}, ABAs: []float64{0, 2e5}}
		pts, err := Sweep(spec)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		data, _ := json.Marshal(map[string]any{"figure": fig, "points": pts})
		in, out := filepath.Join(dir, "s.json"), filepath.Join(dir, "s.png")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(py, "-", in, out)
		cmd.Stdin = bytes.NewReader(PlotScript)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("figure %d: %v: %s", fig, err, msg)
		}
		png, err := os.ReadFile(out)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("figure %d: no PNG (%v)", fig, err)
		}
	}
}
