package controller

import (
	"math"
	"strings"
	"testing"

	pb "github.com/plait/plait/api/plait/v1"
)

// A report of the receiver writes one row per path, under the header, with what was not
// measured as "nan", and ends on a whole line.
func TestTraceHasARowPerPathAndReport(t *testing.T) {
	d := newDirection(&Tunnel{ID: 7, Hosts: [2]string{"h1", "h2"}}, "h1", "h2", t0)
	d.setPaths([]string{"a", "b"}, t0)
	d.rx = &pb.TunnelStats{IntervalS: 0.05, Paths: []*pb.PathStats{
		{RxPackets: 10, RxBytes: 15000, RxBps: 2.4e6, OwdMinUs: 20e3, OwdMeanUs: 21e3, QueueUs: math.NaN(), LastRxAgeMs: 1},
		{OwdMinUs: math.NaN(), OwdMeanUs: math.NaN(), QueueUs: math.NaN(), LastRxAgeMs: 1},
	}}
	var out strings.Builder
	tr := newTracer(&out, t0)
	d.observe(t0, tr)
	d.observe(t0.Add(step), tr)
	if err := tr.flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want a header and 2 reports × 2 paths:\n%s", len(lines), out.String())
	}
	if lines[0] != strings.Join(traceColumns, "\t") {
		t.Fatalf("header %q", lines[0])
	}
	col := func(row []string, name string) string {
		for i, c := range traceColumns {
			if c == name {
				return row[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	for i, want := range []string{"a", "b", "a", "b"} {
		row := strings.Split(lines[i+1], "\t")
		if len(row) != len(traceColumns) {
			t.Fatalf("row %d has %d columns, want %d: %q", i, len(row), len(traceColumns), lines[i+1])
		}
		if col(row, "path") != want || col(row, "tunnel") != "7" || col(row, "from") != "h1" {
			t.Fatalf("row %d: %q", i, lines[i+1])
		}
	}
	last := strings.Split(lines[3], "\t")
	if col(last, "t_s") != "0.050" || col(last, "owd_min_us") != "20000" || col(last, "base_us") != "20000" || col(last, "switch_queue_us") != "nan" {
		t.Fatalf("second report of path a: %q", lines[3])
	}
	if got := col(strings.Split(lines[4], "\t"), "owd_min_us"); got != "nan" {
		t.Fatalf("path b measured nothing, owd_min_us %q, want nan", got)
	}
}
