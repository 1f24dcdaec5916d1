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

	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/topo/validate"
	"github.com/plait/plait/topo/validate/validatetest"
)

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
	validatetest.WriteSummary(t, filepath.Join(dir, "run"), validatetest.Summary(scenario.ShapeParallel))
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
	var rep validate.Report
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(rep.Points) != 1 || rep.Points[0].Config != "rr" || rep.Points[0].Group != validate.GroupRuns || rep.Points[0].Paper == nil {
		t.Errorf("re-evaluation: %+v", rep.Points)
	}
}

// TestModelValidatePool checks that --pool merges the lab runs of a scenario with the
// same inputs, and only those, into one point per configuration measured by the median
// of all their runs, and that a pooled validate.json pools the same runs again.
func TestModelValidatePool(t *testing.T) {
	dir := t.TempDir()
	a := validatetest.Summary(scenario.ShapeParallel)
	b := validatetest.Summary(scenario.ShapeParallel)
	b["configs"] = []any{map[string]any{"config": "rr", "goodput_steady_bps": 5e6, "retransmits": 20, "goodput_steady_runs_bps": []float64{4.5e6, 5e6, 5.5e6},
		"emulation": map[string]any{"sent": 3000, "late_1ms": 200, "late_5ms": 60}}}
	for _, c := range a["configs"].([]any) {
		c.(map[string]any)["emulation"] = map[string]any{"sent": 1000, "late_1ms": 10, "late_5ms": 0}
	}
	b["single_best"].(map[string]any)["reason"] = "the model's single-path prediction, 7 Mbit/s"
	c := validatetest.Summary(scenario.ShapeParallel)
	c["paths"].([]any)[1].(map[string]any)["queue"] = 60
	fa := validatetest.WriteSummary(t, filepath.Join(dir, "a"), a)
	fb := validatetest.WriteSummary(t, filepath.Join(dir, "b"), b)
	fc := validatetest.WriteSummary(t, filepath.Join(dir, "c"), c)

	validate := func(args ...string) []validate.Point {
		t.Helper()
		out, err := runModel(t, append([]string{"validate", "--compare", "rr", "--json", "--no-plot", "--out", filepath.Join(dir, "v")}, args...)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var rep validate.Report
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
	var rep validate.Report
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
