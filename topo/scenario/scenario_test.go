package scenario

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  string
	}{
		{in: "5mbit", want: 5e6},
		{in: "100kbit", want: 1e5},
		{in: "1.5Gbit", want: 1.5e9},
		{in: "35.9Mbps", want: 35.9e6},
		{in: " 800bit ", want: 800},
		{in: "5", err: "no unit"},
		{in: "fastmbit", err: "not a number"},
		{in: "-5mbit", err: "positive"},
		{in: "0kbit", err: "positive"},
	} {
		got, err := ParseRate(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRate(%q) error = %v, want one mentioning %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseRate(FormatRate(got)); err != nil || back != got {
			t.Errorf("ParseRate(FormatRate(%v)) = %v, %v", got, back, err)
		}
	}
}

func TestParseDurationAndPercent(t *testing.T) {
	if d, err := ParseDuration("45ms"); err != nil || d != 45*time.Millisecond {
		t.Errorf("ParseDuration(45ms) = %v, %v", d, err)
	}
	if d, err := ParseDuration("0"); err != nil || d != 0 {
		t.Errorf("ParseDuration(0) = %v, %v", d, err)
	}
	for _, bad := range []string{"-5ms", "45", "soon"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	if p, err := ParsePercent("1.5%"); err != nil || p != 0.015 {
		t.Errorf("ParsePercent(1.5%%) = %v, %v", p, err)
	}
	for _, bad := range []string{"-1", "100", "lots"} {
		if _, err := ParsePercent(bad); err == nil {
			t.Errorf("ParsePercent(%q) accepted", bad)
		}
	}
}

func TestParse(t *testing.T) {
	good := `
name: A2
paths:
  - {name: a, rate: 5mbit, delay: 100ms}
  - {name: b, rate: 2mbit, delay: 10ms, jitter: 1ms, loss: 0.5, queue: 50}
  - {rate: 7mbit, delay: 50ms}
traffic: {duration: 20s, cc: bbr, flows: 2, tcp: {reordering: 30, dsack: 0}}
compare: [rr, wrr]
shape: split
switch: embedded
encap: udp
repair: auto
`
	s, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []Path{
		{Name: "a", Rate: 5e6, Delay: 100 * time.Millisecond, Queue: DefaultQueue},
		{Name: "b", Rate: 2e6, Delay: 10 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.005, Queue: 50},
		{Name: "c", Rate: 7e6, Delay: 50 * time.Millisecond, Queue: DefaultQueue},
	}
	if len(s.Paths) != len(want) {
		t.Fatalf("got %d paths, want %d", len(s.Paths), len(want))
	}
	for i := range want {
		if s.Paths[i] != want[i] {
			t.Errorf("path %d = %+v, want %+v", i, s.Paths[i], want[i])
		}
	}
	if !reflect.DeepEqual(s.Traffic, Traffic{Duration: 20 * time.Second, Omit: DefaultOmit, CC: "bbr", Flows: 2,
		TCP: map[string]int{"reordering": 30, "dsack": 0}}) || len(s.Compare) != 2 {
		t.Errorf("traffic %+v compare %v", s.Traffic, s.Compare)
	}
	if s.Shape != ShapeSplit || s.Switch != SwitchEmbedded || s.Encap != EncapUDP || s.Repair != ResequenceAuto {
		t.Errorf("shape %q switch %q encap %q repair %q", s.Shape, s.Switch, s.Encap, s.Repair)
	}
	if c := s.Capacity(); c != 14e6 {
		t.Errorf("capacity %v, want 14e6", c)
	}
	if id := s.Ideal(); id != (Path{Name: "ideal", Rate: 14e6, Delay: 10 * time.Millisecond, Queue: 2*DefaultQueue + 50}) {
		t.Errorf("ideal %+v", id)
	}

	for _, tc := range []struct {
		name, yaml, field string
	}{
		{"empty", ``, "empty file"},
		{"no paths", `name: x`, "paths: no paths"},
		{"bad rate", "paths: [{rate: 5}]", "paths[0].rate"},
		{"missing rate", "paths: [{delay: 5ms}]", "paths[0].rate: missing"},
		{"negative delay", "paths: [{rate: 1mbit}, {rate: 1mbit, delay: -4ms}]", "paths[1].delay"},
		{"bad jitter", "paths: [{rate: 1mbit, jitter: x}]", "paths[0].jitter"},
		{"bad loss", "paths: [{rate: 1mbit, loss: 120}]", "paths[0].loss"},
		{"zero queue", "paths: [{rate: 1mbit, queue: 0}]", "paths[0].queue"},
		{"duplicate", "paths: [{name: a, rate: 1mbit}, {name: a, rate: 1mbit}]", "paths[1].name"},
		{"unknown field", "paths: [{rate: 1mbit, delya: 4ms}]", "delya"},
		{"too many", "paths: [" + strings.Repeat("{rate: 1mbit},", 9) + "]", "at most 8"},
		{"zero duration", "paths: [{rate: 1mbit}]\ntraffic: {duration: 0}", "traffic.duration"},
		{"no flows", "paths: [{rate: 1mbit}]\ntraffic: {flows: 0}", "traffic.flows"},
		{"omit too long", "paths: [{rate: 1mbit}]\ntraffic: {duration: 5s, omit: 5s}", "traffic.omit"},
		{"bad omit", "paths: [{rate: 1mbit}]\ntraffic: {omit: soon}", "traffic.omit"},
		{"bad cc", "paths: [{rate: 1mbit}]\ntraffic: {cc: 'Cubic!'}", "traffic.cc"},
		{"unknown config", "paths: [{rate: 1mbit}]\ncompare: [rr, mptpc]", `compare[1]: "mptpc"`},
		{"duplicate config", "paths: [{rate: 1mbit}]\ncompare: [rr, wrr, rr]", "compare[2]"},
		{"bad shape", "paths: [{rate: 1mbit}]\nshape: mesh", "shape:"},
		{"bad switch", "paths: [{rate: 1mbit}]\nswitch: ovs", "switch:"},
		{"bad encap", "paths: [{rate: 1mbit}]\nencap: gre", `encap: "gre" is not one of ip, udp`},
		{"bad repair", "paths: [{rate: 1mbit}]\nrepair: yes", `repair: "yes" is not one of`},
		{"bad name", "name: a/b\npaths: [{rate: 1mbit}]", "name:"},
		{"bad path name", "paths: [{name: 'wi fi', rate: 1mbit}]", "paths[0].name"},
		{"unknown traffic field", "paths: [{rate: 1mbit}]\ntraffic: {flow: 2}", "flow"},
		{"unknown tcp knob", "paths: [{rate: 1mbit}]\ntraffic: {tcp: {sack: 0}}", "traffic.tcp.sack: not a TCP knob the lab sets; use dsack, frto"},
		{"tcp knob out of range", "paths: [{rate: 1mbit}]\ntraffic: {tcp: {reordering: 0}}", "traffic.tcp.reordering: 0 is out of range 1..300"},
		{"tcp knob not a number", "paths: [{rate: 1mbit}]\ntraffic: {tcp: {dsack: on}}", "dsack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error = %v, want one naming %q", err, tc.field)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	s, err := Parse([]byte("paths: [{rate: 1mbit, delay: 20ms}, {rate: 3mbit}]\ntraffic: {duration: 5s}"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Shape != ShapeParallel || s.Switch != SwitchAuto || s.Encap != EncapIP || s.Repair != ResequenceAuto || s.Resequence != ResequenceAuto {
		t.Errorf("shape %q switch %q encap %q repair %q resequence %q, want parallel auto ip auto auto", s.Shape, s.Switch, s.Encap, s.Repair, s.Resequence)
	}
	if len(s.Compare) != len(Configurations) {
		t.Errorf("compare %v, want every configuration", s.Compare)
	}
	// A short run keeps most of its time: omit shrinks to a fifth of the duration.
	if s.Traffic.Omit != time.Second || s.Traffic.CC != "cubic" || s.Traffic.Flows != 1 {
		t.Errorf("traffic %+v", s.Traffic)
	}
	if id := s.Ideal(); id.Rate != 4e6 || id.Delay != 0 {
		t.Errorf("ideal %+v: want 4 Mbit/s at the smallest delay (0)", id)
	}
}

// Load names the file and the field; a missing file says so.
func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("name: g\npaths: [{rate: 5mbit, delay: 45ms}]\ncompare: [ideal, auto]\n"), 0o644)
	os.WriteFile(bad, []byte("name: b\npaths: [{rate: 5mbit}, {rate: 2mbit, queue: -3}]\n"), 0o644)
	s, err := Load(good)
	if err != nil || s.Name != "g" || len(s.Compare) != 2 {
		t.Fatalf("Load(good) = %+v, %v", s, err)
	}
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "paths[1].queue") {
		t.Errorf("Load(bad) error %v, want the file and paths[1].queue", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "read scenario") {
		t.Errorf("Load(missing) error %v", err)
	}
	if _, err := ParseCompare(nil); err == nil || !strings.Contains(err.Error(), "compare: empty") {
		t.Errorf("ParseCompare(nil) error %v", err)
	}
}
