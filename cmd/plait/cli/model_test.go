package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runModel(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newModelCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestModelPredict(t *testing.T) {
	out, err := runModel(t, "predict", "--path", "5mbit,100ms", "--path", "2mbit,10ms,name=lte", "--path", "rate=7mbit,delay=50ms,loss=0.1,queue=40")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lte", "paper", "plait  rr", "plait  wrr", "plait  edpf", "best   rr", "capacity 14 Mbit/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "a2.yaml")
	yaml := "paths:\n  - {rate: 5mbit, delay: 100ms}\n  - {rate: 2mbit, delay: 10ms}\ntraffic: {duration: 20s, cc: bbr}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runModel(t, "predict", "--scenario", file, "--mode", "wrr", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got modelPredictOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if got.TCP.CC.String() != "bbr" || got.TCP.Duration.Seconds() != 20 {
		t.Errorf("the scenario's traffic was not used: %+v", got.TCP)
	}
	if len(got.Plait) != 1 || got.Plait[0].Prediction.Goodput <= 0 || got.Plait[0].Prediction.Goodput > got.Capacity || got.Paper.Throughput <= 0 {
		t.Errorf("predictions %+v, paper %+v", got.Plait, got.Paper)
	}
}

func TestModelBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"predict"}, "no paths"},
		{[]string{"predict", "--path", "5mbit"}, "needs a rate and a one-way delay"},
		{[]string{"predict", "--path", "5,10ms"}, "no unit"},
		{[]string{"predict", "--path", "5mbit,-1ms"}, "negative"},
		{[]string{"predict", "--path", "5mbit,1ms,1%"}, "only rate and delay"},
		{[]string{"predict", "--path", "5mbit,1ms,queue=0"}, "at least 1 packet"},
		{[]string{"predict", "--path", "5mbit,1ms", "--scenario", "x.yaml"}, "not both"},
		{[]string{"predict", "--path", "5mbit,1ms", "--mode", "fastest"}, "unknown mode"},
		{[]string{"predict", "--path", "5mbit,1ms", "--weights", "1,2"}, "2 weights"},
		{[]string{"predict", "--path", "5mbit,1ms", "--window", "lots"}, "--window"},
		{[]string{"predict", "--path", "5mbit,1ms", "--paper-rounding", "bankers"}, "--paper-rounding"},
		{[]string{"sweep", "--figure", "9"}, "--figure 9"},
		{[]string{"sweep", "--links", "0"}, "--links 0"},
		{[]string{"sweep", "--ada", "9ms:1ms:1ms"}, "FROM ≤ TO"},
		{[]string{"sweep", "--min-rate", "fast"}, "--min-rate"},
		{[]string{"validate"}, "nothing to validate"},
		{[]string{"validate", "s1-2", "--compare", "mptcp"}, `--compare "mptcp"`},
		{[]string{"validate", "--ada-sweep", "soon"}, "--ada-sweep"},
		{[]string{"validate", "--ada-sweep", "10ms", "--sweep-base", "no-such"}, "--sweep-base"},
		{[]string{"validate", "s1-2", "--repeat", "0"}, "--repeat 0"},
		{[]string{"validate", "s1-2", "--duration", "soon"}, "--duration"},
		{[]string{"validate", "s1-2", "--paper-rounding", "up-ish"}, "--paper-rounding"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runModel(t, tc.args...)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want a usage error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestModelSweep(t *testing.T) {
	dir := t.TempDir()
	plot := exec.Command("/usr/bin/python3", "-c", "import matplotlib").Run() == nil
	args := []string{"sweep", "--links", "1,2", "--min-delay", "5ms,50ms", "--ada", "10ms:30ms:10ms", "--out", dir}
	if !plot {
		args = append(args, "--no-plot")
	}
	out, err := runModel(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Count(out, "\n"); rows != 1+2*2*3 {
		t.Errorf("%d lines, want a header and 12 points:\n%s", rows, out)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "fig8.csv"))
	if err != nil || strings.Count(string(csv), "\n") != 13 {
		t.Errorf("fig8.csv: %v\n%s", err, csv)
	}
	if plot {
		png, err := os.ReadFile(filepath.Join(dir, "fig8.png"))
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Errorf("fig8.png: %v", err)
		}
	}
}
