package validate

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/model"
	"github.com/plait/plait/topo"
	"github.com/plait/plait/topo/scenario"
	"github.com/plait/plait/topo/validate/validatetest"
)

func TestValidatePoints(t *testing.T) {
	for _, shape := range []string{scenario.ShapeParallel, scenario.ShapeSplit} {
		file := validatetest.WriteSummary(t, t.TempDir(), validatetest.Summary(shape))
		sum, err := readLabSummary(file)
		if err != nil {
			t.Fatal(err)
		}
		pts, err := points(sum, file, GroupRuns, "", nil, model.PaperOptions{}, PaperSet{})
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
		set, err := points(sum, file, GroupRuns, "", []string{"rr"}, model.PaperOptions{Segment: 536}, PaperSet{Segment: true})
		if err != nil || len(set) != 1 || set[0].Paper.Predicted == rr.Paper.Predicted {
			t.Errorf("%s: only rr with the paper's own segment: %+v, %v", shape, set, err)
		}
	}

	sum := validatetest.Summary(scenario.ShapeParallel)
	sum["configs"] = []any{map[string]any{"config": "rr", "goodput_steady_bps": 0, "error": "iperf3 printed nothing"}}
	file := validatetest.WriteSummary(t, t.TempDir(), sum)
	s, err := readLabSummary(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := points(s, file, GroupRuns, "", nil, model.PaperOptions{}, PaperSet{}); err == nil || !strings.Contains(err.Error(), "iperf3 printed nothing") {
		t.Errorf("a failed run: %v", err)
	}
	if _, err := readLabSummary(validatetest.WriteSummary(t, t.TempDir(), map[string]any{"scenario": "x"})); err == nil {
		t.Error("a summary without paths was read")
	}
}

func TestADAScenario(t *testing.T) {
	base, err := topo.LoadScenario("s1-4")
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

// The S1 scenarios are summed up by link count and an ADA sweep by ADA, each with its own
// medians: the sweep's points, all at four links, do not join S1-4's.
func TestValidateByGroupKeepsTheSweepApart(t *testing.T) {
	pt := func(group, label string, links int, ada, acc float64) Point {
		return Point{Group: group, Label: label, Links: links, ADA: ada, Plait: Check{Accuracy: acc}}
	}
	rep := &Report{Points: []Point{
		pt(GroupScenarios, "s1-4", 4, 0.014, 0.98), pt(GroupScenarios, "s1-4", 4, 0.014, 0.96),
		pt(GroupScenarios, "s1-2", 2, 0.015, 0.90),
		pt(GroupADA+"S1-4", "20ms", 4, 0.020, 0.40), pt(GroupADA+"S1-4", "20ms", 4, 0.020, 0.60),
		pt(GroupADA+"S1-4", "0ms", 4, 0, 0.99),
	}}
	got := byGroup(rep)
	want := []string{
		"median by link count, Plait's predictor (seed 002's model): 2 links 90.0 %, 4 links 97.0 %",
		"median by ADA (S1-4, 4 links), Plait's predictor (seed 002's model): 0ms 99.0 %, 20ms 50.0 %",
	}
	if !slices.Equal(got, want) {
		t.Errorf("byGroup:\n%q\nwant\n%q", got, want)
	}
}
