package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/topo/scenario"
)

func TestDrawWithinRangesAndSeeded(t *testing.T) {
	r := Default
	const n = 300
	ds, err := Draw(r, 7, n, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var delays, jitters, losses, spreads []float64
	ccs, flows, npaths := map[string]int{}, map[int]int{}, map[int]int{}
	lossFree := 0
	for _, d := range ds {
		s := d.Scenario
		// The file is the scenario: it parses back to what runs.
		back, err := scenario.Parse(d.YAML)
		if err != nil || back.Name != d.Name || len(back.Paths) != len(s.Paths) {
			t.Fatalf("%s: file does not parse back: %v\n%s", d.Name, err, d.YAML)
		}
		if !slices.Equal(s.Compare, Compare) || s.Traffic.Duration != 20*time.Second {
			t.Errorf("%s: compare %v duration %v", d.Name, s.Compare, s.Traffic.Duration)
		}
		npaths[len(s.Paths)]++
		ccs[s.Traffic.CC]++
		flows[s.Traffic.Flows]++
		lo, hi, anyLoss := math.Inf(1), 0.0, false
		for _, p := range s.Paths {
			if p.Rate < r.Rate[0] || p.Rate > r.Rate[1] {
				t.Errorf("%s: rate %v out of %v", d.Name, p.Rate, r.Rate)
			}
			if p.Delay < r.Delay[0] || p.Delay > r.Delay[1] || p.Jitter < r.Jitter[0] || p.Jitter > r.Jitter[1] {
				t.Errorf("%s: delay %v jitter %v out of range", d.Name, p.Delay, p.Jitter)
			}
			if p.Loss < r.Loss[0] || p.Loss > r.Loss[1] {
				t.Errorf("%s: loss %v out of %v", d.Name, p.Loss, r.Loss)
			}
			if p.Queue < r.MinQueue {
				t.Errorf("%s: queue %d", d.Name, p.Queue)
			}
			lo, hi, anyLoss = min(lo, p.Rate), max(hi, p.Rate), anyLoss || p.Loss > 0
			delays = append(delays, p.Delay.Seconds())
			jitters = append(jitters, p.Jitter.Seconds())
			losses = append(losses, p.Loss)
		}
		if hi/lo > r.Spread {
			t.Errorf("%s: spread %.1f over %g", d.Name, hi/lo, r.Spread)
		}
		spreads = append(spreads, hi/lo)
		if d.LossFree == anyLoss {
			t.Errorf("%s: loss-free %v but loss on a path %v", d.Name, d.LossFree, anyLoss)
		}
		if d.LossFree {
			lossFree++
		}
	}
	// The ranges are used, not a corner of them.
	for k := r.Paths[0]; k <= r.Paths[1]; k++ {
		if npaths[k] < n/10 {
			t.Errorf("%d paths in %d of %d scenarios", k, npaths[k], n)
		}
	}
	for k := r.Flows[0]; k <= r.Flows[1]; k++ {
		if flows[k] < n/10 {
			t.Errorf("%d flows in %d of %d scenarios", k, flows[k], n)
		}
	}
	for _, cc := range r.CC {
		if ccs[cc] < n/4 {
			t.Errorf("cc %s in %d of %d scenarios", cc, ccs[cc], n)
		}
	}
	if lossFree < n/3 || lossFree > 2*n/3 {
		t.Errorf("%d of %d scenarios loss-free, want about %g", lossFree, n, r.LossFree)
	}
	covers := func(what string, xs []float64, lo, hi float64) {
		a, b := slices.Min(xs), slices.Max(xs)
		if a > lo+0.05*(hi-lo) || b < hi-0.05*(hi-lo) {
			t.Errorf("%s drawn over %g..%g, want most of %g..%g", what, a, b, lo, hi)
		}
	}
	covers("delay", delays, r.Delay[0].Seconds(), r.Delay[1].Seconds())
	covers("jitter", jitters, r.Jitter[0].Seconds(), r.Jitter[1].Seconds())
	covers("loss", losses, r.Loss[0], r.Loss[1])
	covers("spread", spreads, 1, r.Spread)

	// Seeded: the same seed draws the same files; a shorter sweep is the start of a longer
	// one; another seed draws others.
	again, _ := Draw(r, 7, 5, 20*time.Second)
	for i, d := range again {
		if !bytes.Equal(d.YAML, ds[i].YAML) {
			t.Errorf("seed 7 scenario %d differs between draws:\n%s\n%s", i+1, d.YAML, ds[i].YAML)
		}
	}
	other, _ := Draw(r, 8, 5, 20*time.Second)
	same := 0
	for i := range other {
		if bytes.Equal(bytes.SplitN(other[i].YAML, []byte("paths:"), 2)[1], bytes.SplitN(ds[i].YAML, []byte("paths:"), 2)[1]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("seeds 7 and 8 drew %d identical scenarios of 5", same)
	}
}

func result(name string, lossFree bool, ideal, single, mptcp, auto float64) Result {
	return Result{Name: name, LossFree: lossFree, Goodput: map[string]float64{
		scenario.ConfigIdeal: ideal, scenario.ConfigSingleBest: single, scenario.ConfigMPTCP: mptcp, scenario.ConfigAuto: auto}}
}

func TestDistribution(t *testing.T) {
	rs := []Result{
		result("a", true, 100, 50, 90, 95),  // 0.95 1.9 1.056
		result("b", true, 100, 80, 90, 91),  // 0.91 (a loss-free one under 0.92)
		result("c", false, 100, 60, 97, 60), // 0.60 1.0 0.619 (lossy: not in auto/ideal's scope)
		result("d", false, 10, 5, 8, 9.9),   // 0.99 1.98 1.2375
		{Name: "e", Error: "lab run failed (exit 1)"},
	}
	rows := Distribution(rs)
	byRatio := map[string]Row{}
	for _, r := range rows {
		byRatio[r.Ratio] = r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	id := byRatio[VsIdeal]
	// Sorted: 0.60 0.91 0.95 0.99; p10 = 0.60 + 0.3×0.31, median = (0.91+0.95)/2.
	if id.N != 4 || !near(id.Min, 0.60) || !near(id.P10, 0.693) || !near(id.Median, 0.93) {
		t.Errorf("auto/ideal %+v", id)
	}
	if id.Scope != 2 || id.Met != 1 || id.OK {
		t.Errorf("auto/ideal target: %d of %d loss-free met, ok %v; want 1 of 2, not ok", id.Met, id.Scope, id.OK)
	}
	sb := byRatio[VsSingleBest]
	if sb.Scope != 4 || sb.Met != 4 || !sb.OK || !near(sb.Min, 1) {
		t.Errorf("auto/single-best %+v", sb)
	}
	mp := byRatio[VsMPTCP]
	// 3 of 4 at or above MPTCP: short of 90 %.
	if mp.Scope != 4 || mp.Met != 3 || mp.OK {
		t.Errorf("auto/mptcp %+v", mp)
	}

	// Every loss-free scenario at 0.92 or more but the median under 0.9: not met.
	low := Distribution([]Result{result("a", true, 100, 10, 10, 92), result("b", false, 100, 10, 10, 50), result("c", false, 100, 10, 10, 60)})
	if low[0].Met != 1 || low[0].Scope != 1 || low[0].OK {
		t.Errorf("median 0.6 passed auto/ideal's target: %+v", low[0])
	}

	// The report: strict JSON (no NaN from the failed run), the table in markdown.
	dir := t.TempDir()
	rep := &Report{Seed: 1, N: 5, Duration: 20, Ranges: Default.String(), Configs: Compare, Results: rs}
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "sweep.md"))
	for _, want := range []string{"| auto/ideal | 4 | 0.600 | 0.693 | 0.930 |", "1 of 2 | no |", "| e |", "failed: lab run failed"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("sweep.md lacks %q:\n%s", want, md)
		}
	}
	empty := Distribution(nil)
	if empty[0].N != 0 || empty[0].OK || !math.IsNaN(empty[0].Median) {
		t.Errorf("no results: %+v", empty[0])
	}
}

// TestLockLabWaits holds the lock from another process (flock(1), as engineers run
// their labs) and checks that a sweep's run waits for it, and takes it once it is free.
func TestLockLabWaits(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) not installed")
	}
	path := filepath.Join(t.TempDir(), "lab.lock")
	// -o: flock(1) itself holds the lock, not sleep, so killing it frees the lock.
	holder := exec.Command("flock", "-o", path, "sleep", "30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	for i := 0; exec.Command("flock", "-n", path, "true").Run() == nil; i++ { // until flock(1) holds it
		if i > 100 {
			t.Fatal("flock(1) never took the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if _, err := lockLab(ctx, path, &progress); err == nil || !strings.Contains(progress.String(), "waiting for") {
		t.Fatalf("took a held lock: err %v, said %q", err, progress.String())
	}
	holder.Process.Kill()
	holder.Wait()
	unlock, err := lockLab(context.Background(), path, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command("flock", "-n", path, "true").Run() == nil {
		t.Error("another process took the lock while the sweep held it")
	}
	unlock()
	if err := exec.Command("flock", "-n", path, "true").Run(); err != nil {
		t.Errorf("lock not released: %v", err)
	}
}

// A sweep's --resequence and --repair go into every scenario file it writes, so that a
// scenario rerun from its file runs as it ran in the sweep; a bad value is refused
// before anything is written.
func TestSweepSetsMechanisms(t *testing.T) {
	res := t.TempDir()
	dir, err := Run(context.Background(), Options{Seed: 3, N: 2, Duration: 5 * time.Second, Ranges: Default,
		Results: res, DrawOnly: true, Resequence: scenario.ResequenceAuto, Repair: scenario.ResequenceOff, Progress: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "scenarios", fmt.Sprintf("sweep-3-%02d.yaml", i)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := scenario.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if s.Resequence != scenario.ResequenceAuto || s.Repair != scenario.ResequenceOff {
			t.Errorf("scenario %d: resequence %q repair %q, want auto and off", i, s.Resequence, s.Repair)
		}
	}
	if _, err := Run(context.Background(), Options{Seed: 3, N: 1, Duration: 5 * time.Second, Ranges: Default,
		Results: t.TempDir(), DrawOnly: true, Resequence: "sometimes", Progress: io.Discard}); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("resequence sometimes: %v, want an error naming it", err)
	}
}
