package topo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/plait/plait/topo/scenario"
)

// Every shipped scenario is valid, compares all six configurations and is found by name.
func TestShippedScenarios(t *testing.T) {
	want := []string{"a1", "a2", "bbr-4flows", "default", "fat-thin", "k1", "k2", "lte-2", "lte-4", "outage", "s1-2", "s1-3", "s1-4", "s1-5", "s1-6", "s1-7", "s1-8", "wifi-lte", "wifi-lte-jitter"}
	got := Scenarios()
	if len(got) != len(want) {
		t.Fatalf("scenarios %v, want %v", got, want)
	}
	for i, n := range want {
		if got[i] != n {
			t.Fatalf("scenarios %v, want %v", got, want)
		}
		b, ok := Scenario(n)
		if !ok {
			t.Fatalf("Scenario(%q) not found", n)
		}
		s, err := scenario.Parse(b)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if len(s.Compare) != len(scenario.Configurations) {
			t.Errorf("%s compares %v", n, s.Compare)
		}
		// The recorded traces the shipped scenarios follow, from ../shared when it is
		// there (CI keeps it beside the clone).
		if _, err := os.Stat("../../shared/reference/traces"); err == nil {
			if err := s.LoadTraces("../../shared/reference/traces"); err != nil {
				t.Errorf("%s: %v", n, err)
			}
		}
	}
	if _, ok := Scenario("A2.yaml"); !ok {
		t.Error("A2.yaml not found case-insensitively")
	}
	for _, bad := range []string{"nope", "../topo", "scenarios/a2"} {
		if _, ok := Scenario(bad); ok {
			t.Errorf("Scenario(%q) found", bad)
		}
	}
	a2, _ := Scenario("a2")
	s, _ := scenario.Parse(a2)
	if s.Capacity() != 14e6 || s.Paths[1].Delay.Milliseconds() != 10 {
		t.Errorf("a2: capacity %v, path b delay %v", s.Capacity(), s.Paths[1].Delay)
	}
	def, _ := Scenario("default")
	d, _ := scenario.Parse(def)
	for i := range s.Paths {
		if d.Paths[i] != s.Paths[i] {
			t.Errorf("default path %d = %+v, A2 has %+v", i, d.Paths[i], s.Paths[i])
		}
	}
}

func TestExtract(t *testing.T) {
	dir := t.TempDir()
	entry, err := Extract(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"lab.py", "nodes.py", "topos.py", "runner.py", "measure.py", "report.py"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if filepath.Base(entry) != "lab.py" {
		t.Errorf("entry %s", entry)
	}
}
