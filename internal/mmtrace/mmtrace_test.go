package mmtrace

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no opportunities"},
		{"1\n2\n\n3\n", "x:3: empty line"},
		{"1\n2\nfast\n", "x:3: \"fast\" is not a whole number"},
		{"1\n-2\n", "x:2: \"-2\""},
		{"5\n7\n6\n", "x:3: 6 ms comes after 7 ms"},
		{"0\n0\n", "x:2: the last timestamp is 0"},
	} {
		_, err := Parse(strings.NewReader(tc.in), "x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) error = %v, want one with %q", tc.in, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none.down")); err == nil || !strings.Contains(err.Error(), "none.down") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

// The cursor repeats the trace with its period, keeps repeated timestamps, honours the
// offset and skips forward across many periods.
func TestCursor(t *testing.T) {
	tr, err := Parse(strings.NewReader("0\n2\n2\n5\n"), "x")
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(time.Millisecond)
	c := tr.Start(100*ms, 0)
	var got []int64
	for range 9 {
		got = append(got, (c.Time()-100*ms)/ms)
		c.Next()
	}
	// The period is 5 ms: the last opportunity of one repetition and the first of the
	// next share 5 ms, as in Mahimahi.
	want := []int64{0, 2, 2, 5, 5, 7, 7, 10, 10}
	if !equal(got, want) {
		t.Errorf("opportunities %v, want %v", got, want)
	}
	c = tr.Start(0, 3*time.Millisecond) // starts at the trace's 3 ms: next is its 5 ms
	if c.Time() != 2*ms {
		t.Errorf("offset 3 ms: first opportunity at %v, want 2ms", time.Duration(c.Time()))
	}
	c.SkipTo(1_000_001 * ms) // 200,000 periods on, just past a repetition's 0 ms
	if c.Time() != 1_000_002*ms {
		t.Errorf("SkipTo: %v, want 1000002ms", time.Duration(c.Time()))
	}
	c.SkipTo(5 * ms) // never backwards
	if c.Time() != 1_000_002*ms {
		t.Errorf("SkipTo went back to %v", time.Duration(c.Time()))
	}
}

func TestCountAndMeanRate(t *testing.T) {
	tr, err := Load("../../topo/traces/test.trace")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Period() != time.Second || len(tr.Ms) != 755 {
		t.Fatalf("test.trace: period %v, %d opportunities; want 1s and 755", tr.Period(), len(tr.Ms))
	}
	if r := tr.MeanRate(); math.Abs(r-9.06e6) > 1 {
		t.Errorf("mean rate %v, want 9.06 Mbit/s", r)
	}
	for _, tc := range []struct {
		offset, from, to time.Duration
		want             int
	}{
		{0, 0, 10 * time.Second, 7549},                           // not the last repetition's 1000 ms, at 10 s
		{0, 0, 500 * time.Millisecond, 503},                      // 1..499 ms and two at 100, 200, 300, 400
		{500 * time.Millisecond, 0, time.Second, 755},            // half of one repetition, half of the next
		{0, 1000 * time.Millisecond, 1001 * time.Millisecond, 1}, // the first repetition's last
	} {
		if n := tr.Count(tc.offset, tc.from, tc.to); n != tc.want {
			t.Errorf("Count(%v, %v, %v) = %d, want %d", tc.offset, tc.from, tc.to, n, tc.want)
		}
	}
	// Every recorded trace parses (CI keeps ../shared beside the clone).
	recorded, _ := filepath.Glob("../../../shared/reference/traces/*.*[np]")
	for _, f := range recorded {
		tr, err := Load(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if r := tr.MeanRate(); !(r > 1e5 && r < 1e8) {
			t.Errorf("%s: mean rate %v bit/s", f, r)
		}
	}
	if _, err := os.Stat("../../../shared/reference/traces"); err == nil && len(recorded) == 0 {
		t.Error("../shared/reference/traces holds no .down or .up trace")
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
