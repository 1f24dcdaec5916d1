package scenario

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testTrace = "../traces/test.trace" // 755 opportunities a second, 9.06 Mbit/s

func TestDynamicParse(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.yaml")
	abs, _ := filepath.Abs(testTrace)
	os.WriteFile(file, []byte(`name: d
paths:
  - {name: lte, trace: `+abs+`, delay: 20ms, trace_offset: 500ms}
  - {name: capped, trace: {down: `+abs+`, up: `+abs+`}, rate: 6mbit}
  - {name: wifi, rate: 10mbit, loss: 2, burst: 4}
  - {name: ge, rate: 10mbit, ge: {good_to_bad: 1, bad_to_good: 25, loss_good: 0, loss_bad: 50}}
traffic: {duration: 10s}
events:
  - {at: 2s, path: wifi, down: 3s}
  - {at: 5s, path: wifi, rate: 2mbit, for: 1s}
  - {at: 7s, path: lte, delay: 60ms}
`), 0o644)
	s, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Paths[0].MeanRate(); math.Abs(r-9.06e6*1514/1500) > 1 {
		t.Errorf("lte mean rate %v, want the trace's 9.06 Mbit/s of IP packets in frames", r)
	}
	if r := s.Paths[1].MeanRate(); r != 6e6 {
		t.Errorf("capped mean rate %v, want its cap 6 Mbit/s", r)
	}
	g := s.Paths[2].LossModel()
	if g == nil || math.Abs(g.MeanLoss()-0.02) > 1e-12 || g.BadToGood != 0.25 || g.LossBad != 1 {
		t.Errorf("wifi loss model %+v, want Gilbert with mean 2 %% and bursts of 4", g)
	}
	if ge := s.Paths[3]; ge.GE == nil || math.Abs(ge.Loss-0.5*1.0/26) > 1e-12 {
		t.Errorf("ge path %+v: loss is the chain's mean, 1/26 of the time at 50 %%", ge)
	}
	if len(s.Events) != 3 || s.Events[0].Line != 9 || !s.Events[0].Down || s.Events[0].End() != 5*time.Second {
		t.Errorf("events %+v", s.Events)
	}
	if p, down := s.AtTime(2, 3*time.Second); !down || p.Rate != 10e6 {
		t.Errorf("wifi at 3s: %+v down %v, want down", p, down)
	}
	if p, down := s.AtTime(2, 5500*time.Millisecond); down || p.Rate != 2e6 {
		t.Errorf("wifi at 5.5s: %+v down %v, want up at 2 Mbit/s", p, down)
	}
	if p, _ := s.AtTime(2, 6*time.Second); p.Rate != 10e6 {
		t.Errorf("wifi at 6s: rate %v, want 10 Mbit/s again", p.Rate)
	}
	// Capacity over time: the trace's opportunities (offset), its cap, the outage.
	if n := len(s.Opportunities(0, true, 2*time.Second)); n != 1510 {
		t.Errorf("lte: %d opportunities in 2 s, want the trace's 1510", n)
	}
	capped := s.Opportunities(1, true, 2*time.Second)
	if want := 2 * 6e6 / (1514 * 8); math.Abs(float64(len(capped))-want) > 0.02*want {
		t.Errorf("capped: %d opportunities in 2 s, want about %.0f (6 Mbit/s)", len(capped), want)
	}
	wifi := s.Opportunities(2, true, 10*time.Second)
	var inOutage, afterRate int
	for _, at := range wifi {
		if at >= 2*time.Second && at < 5*time.Second {
			inOutage++
		}
		if at >= 5*time.Second && at < 6*time.Second {
			afterRate++
		}
	}
	if want := 2e6 / (1514 * 8); inOutage != 0 || math.Abs(float64(afterRate)-want) > 1 {
		t.Errorf("wifi: %d opportunities in its outage (want 0), %d at 2 Mbit/s (want %.0f)", inOutage, afterRate, want)
	}
}

// Bad input names the line and the problem.
func TestDynamicErrors(t *testing.T) {
	abs, _ := filepath.Abs(testTrace)
	head := "paths:\n  - {name: a, rate: 5mbit}\n  - {name: b, rate: 2mbit}\ntraffic: {duration: 10s}\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"event for no path", head + "events:\n  - {at: 2s, path: c, down: 1s}\n", `line 6: events[0].path: "c" is not a path of this scenario (paths: a, b)`},
		{"event after the end", head + "events:\n  - {at: 2s, path: a, down: 1s}\n  - {at: 9s, path: b, down: 2s}\n", "line 7: events[1]: 9s to 11s is after the run ends at 10s"},
		{"event at the end", head + "events:\n  - {at: 10s, path: a, rate: 1mbit}\n", "line 6: events[0]: at 10s is after the run ends"},
		{"overlap", head + "events:\n  - {at: 2s, path: a, down: 3s}\n  - {at: 1s, path: b, down: 3s}\n  - {at: 4s, path: a, rate: 1mbit}\n",
			"line 8: events[2]: overlaps events[0] (line 6) on path a at 4s"},
		{"same time", head + "events:\n  - {at: 2s, path: a, rate: 1mbit}\n  - {at: 2s, path: a, delay: 5ms}\n", "line 7: events[1]: overlaps events[0]"},
		{"nothing changes", head + "events:\n  - {at: 2s, path: a}\n", "line 6: events[0]: nothing changes"},
		{"down and more", head + "events:\n  - {at: 2s, path: a, down: 1s, rate: 1mbit}\n", "line 6: events[0].down: an outage changes nothing else"},
		{"bad at", head + "events:\n  - {at: soon, path: a, down: 1s}\n", "line 6: events[0].at"},
		{"unknown event field", head + "events:\n  - {at: 1s, path: a, dwn: 1s}\n", "line 6: field dwn not found"},
		{"burst without loss", "paths:\n  - {rate: 5mbit, burst: 3}\n", "line 2: paths[0].burst: give loss too"},
		{"impossible burst", "paths:\n  - {rate: 5mbit, loss: 60, burst: 1}\n", "line 2: paths[0].burst: 1 packets at 60% loss"},
		{"ge and loss", "paths:\n  - {rate: 5mbit, loss: 1, ge: {good_to_bad: 1, bad_to_good: 1, loss_good: 0, loss_bad: 1}}\n", "paths[0].ge: give either"},
		{"ge missing one", "paths:\n  - {rate: 5mbit, ge: {good_to_bad: 1, bad_to_good: 1, loss_good: 0}}\n", "line 2: paths[0].ge.loss_bad: missing"},
		{"offset without trace", "paths:\n  - {rate: 5mbit, trace_offset: 2s}\n", "line 2: paths[0].trace_offset"},
		{"trace half", "paths:\n  - rate: 5mbit\n    trace: {down: x}\n", "line 3: paths[0].trace: give both down and up"},
		{"missing rate", "paths:\n  - {delay: 5ms}\n", "line 2: paths[0].rate: missing; write e.g. rate: 5mbit, or give a trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one with %q", err, tc.want)
			}
		})
	}
	// Trace files: missing and malformed, named with the scenario's line and the file's.
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.trace")
	os.WriteFile(bad, []byte("1\n2\nx\n"), 0o644)
	for _, tc := range []struct{ trace, want string }{
		{"nowhere.down", "line 3: paths[1].trace: nowhere.down: no such trace in " + dir},
		{bad, "line 3: paths[1].trace: trace " + bad + ":3: \"x\" is not a whole number"},
		{abs, ""},
	} {
		file := filepath.Join(dir, "s.yaml")
		os.WriteFile(file, []byte("paths:\n  - {rate: 5mbit}\n  - {trace: "+tc.trace+"}\n"), 0o644)
		_, err := Load(file)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("trace %s: error = %v, want %q", tc.trace, err, tc.want)
		}
	}
	// A shorter run from the command line is checked against the events too.
	s, err := Parse([]byte(head + "events:\n  - {at: 6s, path: a, down: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetDuration(5 * time.Second); err == nil || !strings.Contains(err.Error(), "line 6: events[0]: 6s to 7s is after the run ends at 5s") {
		t.Errorf("SetDuration(5s): %v", err)
	}
}
