package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo/scenario"
)

// testSummary is a lab run's summary.json as topo/report.py writes it, with the fields
// validation reads (and one it must skip: mptcp).
func testSummary(shape string) map[string]any {
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

func writeTestSummary(t *testing.T, dir string, sum map[string]any) string {
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

func TestValidatePoints(t *testing.T) {
	for _, shape := range []string{scenario.ShapeParallel, scenario.ShapeSplit} {
		file := writeTestSummary(t, t.TempDir(), testSummary(shape))
		sum, err := readLabSummary(file)
		if err != nil {
			t.Fatal(err)
		}
		pts, err := validatePoints(sum, file, groupRuns, "", nil, model.PaperOptions{}, validatePaperSet{})
		if err != nil {
			t.Fatal(err)
		}
		var configs []string
		for _, p := range pts {
			configs = append(configs, p.Config)
		}
		if !slices.Equal(configs, []string{"ideal", "single-best", "rr", "wrr"}) {
			t.Fatalf("%s: configs %v, want the four the models predict (no mptcp)", shape, configs)
		}
		paths := []model.Path{{Name: "a", Rate: 8e6, Delay: 20 * time.Millisecond, Queue: 100}, {Name: "b", Rate: 4e6, Delay: 50 * time.Millisecond, Queue: 50}}
		tunnel := model.TCP{MSS: 1424, Overhead: 90, Duration: 20 * time.Second, Omit: 2 * time.Second}
		if shape == scenario.ShapeSplit {
			tunnel.MSS, tunnel.Overhead = 1448, 118
		}
		plain := model.TCP{MSS: 1448, Overhead: 66, Duration: 20 * time.Second, Omit: 2 * time.Second}
		want := map[string]func() (model.Prediction, error){
			"ideal": func() (model.Prediction, error) {
				return model.Predict([]model.Path{{Name: "ideal", Rate: 12e6, Delay: 20 * time.Millisecond, Queue: 150}}, model.Split{}, plain)
			},
			"single-best": func() (model.Prediction, error) { return model.Predict(paths[:1], model.Split{}, plain) },
			"rr":          func() (model.Prediction, error) { return model.Predict(paths, model.Split{Mode: model.RR}, tunnel) },
			"wrr": func() (model.Prediction, error) {
				return model.Predict(paths, model.Split{Mode: model.WRR, Weights: []float64{8, 4}}, tunnel)
			},
		}
		for _, p := range pts {
			pred, err := want[p.Config]()
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(p.Plait.Predicted-pred.Goodput) > 1e-6*pred.Goodput || p.Plait.Accuracy != model.Accuracy(p.Measured, pred.Goodput) {
				t.Errorf("%s %s: Plait %+v, want %v bit/s", shape, p.Config, p.Plait, pred.Goodput)
			}
			if p.Links != 2 || math.Abs(p.ADA-0.030) > 1e-12 || p.ABA != 4e6 || p.Label != "T2" || p.Summary != file || len(p.Runs) != 3 {
				t.Errorf("%s %s: point %+v", shape, p.Config, p)
			}
			if (p.Paper != nil) != (p.Config == "rr") {
				t.Errorf("%s %s: paper %+v; the paper's model predicts rr only", shape, p.Config, p.Paper)
			}
			// Runs at 0.9, 1 and 1.1 of the median: the median misses the 0.9 run by 1/9.
			if p.Repeat == nil || math.Abs(*p.Repeat-8.0/9) > 1e-12 {
				t.Errorf("%s %s: lab repeat %v, want 8/9", shape, p.Config, p.Repeat)
			}
		}
		rr := pts[2]
		paper, err := model.Paper(paths, model.PaperOptions{Bytes: 7e6 * 20 / 8, Segment: tunnel.MSS})
		if err != nil {
			t.Fatal(err)
		}
		if rr.Paper.Predicted != paper.Throughput || rr.Paper.Accuracy != model.Accuracy(7e6, paper.Throughput) {
			t.Errorf("%s: paper %+v, want %v bit/s with E = the run's bytes, s = the MSS", shape, rr.Paper, paper.Throughput)
		}
		set, err := validatePoints(sum, file, groupRuns, "", []string{"rr"}, model.PaperOptions{Segment: 536}, validatePaperSet{segment: true})
		if err != nil || len(set) != 1 || set[0].Paper.Predicted == rr.Paper.Predicted {
			t.Errorf("%s: only rr with the paper's own segment: %+v, %v", shape, set, err)
		}
	}

	sum := testSummary(scenario.ShapeParallel)
	sum["configs"] = []any{map[string]any{"config": "rr", "goodput_steady_bps": 0, "error": "iperf3 printed nothing"}}
	file := writeTestSummary(t, t.TempDir(), sum)
	s, err := readLabSummary(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := validatePoints(s, file, groupRuns, "", nil, model.PaperOptions{}, validatePaperSet{}); err == nil || !strings.Contains(err.Error(), "iperf3 printed nothing") {
		t.Errorf("a failed run: %v", err)
	}
	if _, err := readLabSummary(writeTestSummary(t, t.TempDir(), map[string]any{"scenario": "x"})); err == nil {
		t.Error("a summary without paths was read")
	}
}

func TestADAScenario(t *testing.T) {
	base, err := loadScenario("s1-4")
	if err != nil {
		t.Fatal(err)
	}
	orig := slices.Clone(base.Paths)
	for _, ada := range []time.Duration{0, 10 * time.Millisecond, 80 * time.Millisecond} {
		s := adaScenario(base, ada)
		paths := model.PathsFromScenario(s.Paths)
		if got := model.ADA(paths); math.Abs(got-ada.Seconds()) > 1e-6 {
			t.Errorf("ADA %v: got %v", ada, got)
		}
		for i, p := range s.Paths {
			if p.Rate != orig[i].Rate || p.Queue != orig[i].Queue || p.Name != orig[i].Name {
				t.Errorf("ADA %v: path %d %+v changed more than its delay (was %+v)", ada, i, p, orig[i])
			}
			for j := range s.Paths {
				if orig[i].Delay < orig[j].Delay && p.Delay > s.Paths[j].Delay {
					t.Errorf("ADA %v: paths %d and %d swapped their order of delay", ada, i, j)
				}
			}
		}
		if slices.MinFunc(s.Paths, func(a, b scenario.Path) int { return int(a.Delay - b.Delay) }).Delay != 20*time.Millisecond {
			t.Errorf("ADA %v: smallest delay moved: %+v", ada, s.Paths)
		}
		if want := "S1-4-ada" + fmtADA(ada); s.Name != want {
			t.Errorf("name %q, want %q", s.Name, want)
		}
	}
	if !slices.Equal(base.Paths, orig) {
		t.Error("adaScenario changed its base")
	}
}

func TestParseDurationListCarriesTheUnit(t *testing.T) {
	ms := time.Millisecond
	for in, want := range map[string][]time.Duration{
		"0,10,20,40,80ms": {0, 10 * ms, 20 * ms, 40 * ms, 80 * ms},
		"5ms,1.5s":        {5 * ms, 1500 * ms},
		"1,2s":            {time.Second, 2 * time.Second},
		"10ms:30ms:10ms":  {10 * ms, 20 * ms, 30 * ms},
	} {
		got, err := parseDurationList(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parseDurationList("10,20"); err == nil {
		t.Error("bare numbers without any unit were read")
	}
}

func TestModelValidateFrom(t *testing.T) {
	dir := t.TempDir()
	writeTestSummary(t, filepath.Join(dir, "run"), testSummary(scenario.ShapeParallel))
	plot := exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run() == nil
	args := []string{"validate", "--from", filepath.Join(dir, "run"), "--out", filepath.Join(dir, "v")}
	if !plot {
		args = append(args, "--no-plot")
	}
	out, err := runModel(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"SCENARIO", "T2", "single-best", "Plait's predictor:", "seed 002's model (rr):"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "v", "*", "validate.json"))
	if len(runs) != 1 {
		t.Fatalf("validate.json: %v", runs)
	}
	md, err := os.ReadFile(filepath.Join(filepath.Dir(runs[0]), "validate.md"))
	if err != nil || !bytes.Contains(md, []byte("| T2 | 2 | 30ms | 4 Mbit/s | ideal | 11.4 Mbit/s | 10.3–12.5 (3) |")) {
		t.Errorf("validate.md: %v\n%s", err, md)
	}
	if plot {
		png, err := os.ReadFile(filepath.Join(filepath.Dir(runs[0]), "validate.png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("validate.png: %v", err)
		}
	}

	// A validate.json re-evaluates the same runs, in their groups.
	out, err = runModel(t, "validate", "--from", runs[0], "--compare", "rr", "--json", "--no-plot", "--out", filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	var rep validateReport
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(rep.Points) != 1 || rep.Points[0].Config != "rr" || rep.Points[0].Group != groupRuns || rep.Points[0].Paper == nil {
		t.Errorf("re-evaluation: %+v", rep.Points)
	}
}

// TestModelValidatePool checks that --pool merges the lab runs of a scenario with the
// same inputs, and only those, into one point per configuration measured by the median
// of all their runs, and that a pooled validate.json pools the same runs again.
func TestModelValidatePool(t *testing.T) {
	dir := t.TempDir()
	a := testSummary(scenario.ShapeParallel)
	b := testSummary(scenario.ShapeParallel)
	b["configs"] = []any{map[string]any{"config": "rr", "goodput_steady_bps": 5e6, "retransmits": 20, "goodput_steady_runs_bps": []float64{4.5e6, 5e6, 5.5e6},
		"emulation": map[string]any{"sent": 3000, "late_1ms": 200, "late_5ms": 60}}}
	for _, c := range a["configs"].([]any) {
		c.(map[string]any)["emulation"] = map[string]any{"sent": 1000, "late_1ms": 10, "late_5ms": 0}
	}
	b["single_best"].(map[string]any)["reason"] = "the model's single-path prediction, 7 Mbit/s"
	c := testSummary(scenario.ShapeParallel)
	c["paths"].([]any)[1].(map[string]any)["queue"] = 60
	fa := writeTestSummary(t, filepath.Join(dir, "a"), a)
	fb := writeTestSummary(t, filepath.Join(dir, "b"), b)
	fc := writeTestSummary(t, filepath.Join(dir, "c"), c)

	validate := func(args ...string) []validatePoint {
		t.Helper()
		out, err := runModel(t, append([]string{"validate", "--compare", "rr", "--json", "--no-plot", "--out", filepath.Join(dir, "v")}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var rep validateReport
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		return rep.Points
	}
	if pts := validate("--from", fa, "--from", fb, "--from", fc); len(pts) != 3 {
		t.Fatalf("without --pool: %d points, want one per lab run", len(pts))
	}
	pts := validate("--pool", "--from", fa, "--from", fb, "--from", fc)
	if len(pts) != 2 {
		t.Fatalf("--pool: %d points, want 2 (c's queue differs): %+v", len(pts), pts)
	}
	p := pts[0]
	if len(p.Runs) != 6 || math.Abs(p.Measured-5.9e6) > 1 || p.Retransmits != 20 || !slices.Equal(p.Pooled, []string{fa, fb}) {
		t.Errorf("pooled: measured %v, runs %v, retransmits %d, pooled %v; want 5.9e6 (between the middle two of six), b's 20, a and b",
			p.Measured, p.Runs, p.Retransmits, p.Pooled)
	}
	if pts[1].Summary != fc || pts[1].Pooled != nil || pts[1].Measured != 7e6 {
		t.Errorf("c: %+v", pts[1])
	}
	// The switches' lateness adds up over the pooled runs (60 of 4000), and a summary
	// without the counts has none.
	if p.Late == nil || *p.Late != 0.015 || pts[1].Late != nil {
		t.Errorf("late share: pooled %v, c %v; want 0.015 and none", p.Late, pts[1].Late)
	}
	out, err := runModel(t, "validate", "--compare", "rr", "--no-plot", "--out", filepath.Join(dir, "text"), "--pool", "--from", fa, "--from", fb)
	if err != nil || !strings.Contains(out, "1 points where the switches sent more than 1 % of packets over 5 ms late") || !strings.Contains(out, "T2 rr (1.5 %, Plait") {
		t.Errorf("verdict on the lab's lateness: %v\n%s", err, out)
	}

	saved, _ := filepath.Glob(filepath.Join(dir, "v", "*", "validate.json"))
	slices.Sort(saved)
	again := validate("--pool", "--from", saved[len(saved)-1])
	if len(again) != 2 || again[0].Measured != p.Measured || len(again[0].Runs) != 6 {
		t.Errorf("re-read pooled validate.json: %+v", again)
	}
}

// TestModelValidateLab runs one short lab through bin/plait (the lab starts agents and
// switches from the plait binary, which a test binary is not).
func TestModelValidateLab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab")
	}
	bin, _ := filepath.Abs("../../../bin/plait")
	switch {
	case os.Geteuid() != 0:
		t.Skip("the lab needs root")
	case exec.Command(bin, "model", "validate", "--help").Run() != nil:
		t.Skip("no bin/plait with model validate: make build")
	}
	for _, tool := range []string{"mnexec", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make deps)", tool)
		}
	}
	dir := t.TempDir()
	sc := filepath.Join(dir, "v2.yaml")
	os.WriteFile(sc, []byte("name: v2\npaths:\n  - {name: fast, rate: 4mbit, delay: 10ms, queue: 40}\n  - {name: slow, rate: 2mbit, delay: 30ms, queue: 40}\ntraffic: {duration: 5s, omit: 1s, cc: cubic}\n"), 0o644)
	cmd := exec.Command(bin, "model", "validate", sc, "--compare", "rr", "--results", dir, "--out", filepath.Join(dir, "v"), "--no-plot", "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if strings.Contains(stderr.String(), "another lab is running") {
		t.Skip("another lab is running")
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var rep validateReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout.String())
	}
	if len(rep.Points) != 1 || rep.Points[0].Measured < 0.5e6 || rep.Points[0].Paper == nil || rep.Points[0].Plait.Predicted <= 0 {
		t.Fatalf("points %+v", rep.Points)
	}
	if _, err := os.Stat(rep.Points[0].Summary); err != nil {
		t.Errorf("the run's summary: %v", err)
	}
}

// The S1 scenarios are summed up by link count and an ADA sweep by ADA, each with its own
// medians: the sweep's points, all at four links, do not join S1-4's.
func TestValidateByGroupKeepsTheSweepApart(t *testing.T) {
	pt := func(group, label string, links int, ada, acc float64) validatePoint {
		return validatePoint{Group: group, Label: label, Links: links, ADA: ada, Plait: modelCheck{Accuracy: acc}}
	}
	rep := &validateReport{Points: []validatePoint{
		pt(groupScenarios, "s1-4", 4, 0.014, 0.98), pt(groupScenarios, "s1-4", 4, 0.014, 0.96),
		pt(groupScenarios, "s1-2", 2, 0.015, 0.90),
		pt(groupADA+"S1-4", "20ms", 4, 0.020, 0.40), pt(groupADA+"S1-4", "20ms", 4, 0.020, 0.60),
		pt(groupADA+"S1-4", "0ms", 4, 0, 0.99),
	}}
	got := validateByGroup(rep)
	want := []string{
		"median by link count, Plait's predictor (seed 002's model): 2 links 90.0 %, 4 links 97.0 %",
		"median by ADA (S1-4, 4 links), Plait's predictor (seed 002's model): 0ms 99.0 %, 20ms 50.0 %",
	}
	if !slices.Equal(got, want) {
		t.Errorf("validateByGroup:\n%q\nwant\n%q", got, want)
	}
}
