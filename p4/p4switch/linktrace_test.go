package p4switch

import (
	"strings"
	"testing"
	"time"

	"github.com/plait/plait/internal/mmtrace"
)

func mustTrace(t *testing.T, lines string) *LinkTrace {
	t.Helper()
	tr, err := mmtrace.Parse(strings.NewReader(lines), "t")
	if err != nil {
		t.Fatal(err)
	}
	return &LinkTrace{Trace: tr}
}

// deliveries runs a link until every queued packet left and returns their times in ms.
func deliveries(l *link, n int) []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.advance(int64(time.Minute))
	out := l.popDue(int64(time.Minute), nil, n)
	var ms []float64
	for _, pk := range out {
		ms = append(ms, float64(pk.deliver)/1e6)
	}
	return ms
}

// A saturated trace link sends one full-sized packet (1500 bytes of IP) per opportunity,
// at the opportunities, repeating the trace; repeated timestamps send together.
func TestTraceOpportunities(t *testing.T) {
	l, _ := testLink(LinkParams{Trace: mustTrace(t, "1\n3\n3\n4\n")}, 1514)
	for range 8 {
		l.enqueue(&packet{}, 0)
	}
	got := deliveries(l, 8)
	want := []float64{1, 3, 3, 4, 5, 7, 7, 8}
	if !equalMs(got, want) {
		t.Errorf("deliveries %v ms, want %v", got, want)
	}
}

// Mahimahi's byte semantics: small packets share an opportunity, a large one spans two,
// and what is left of an opportunity is lost unless a packet was queued for it.
func TestTraceBytes(t *testing.T) {
	l, _ := testLink(LinkParams{Trace: mustTrace(t, "1\n2\n3\n4\n5\n6\n7\n8\n")}, 514) // 500 bytes of IP
	for range 4 {
		l.enqueue(&packet{}, 0)
	}
	// The fourth leaves 1000 bytes of the 2 ms opportunity; a packet that comes at 2.5 ms
	// cannot use them and leaves at 3 ms.
	l.enqueue(&packet{}, int64(2500*time.Microsecond))
	if got := deliveries(l, 5); !equalMs(got, []float64{1, 1, 1, 2, 3}) {
		t.Errorf("500-byte packets %v ms, want three in the first opportunity, then 2 and 3", got)
	}
	big, _ := testLink(LinkParams{Trace: mustTrace(t, "1\n2\n3\n4\n5\n6\n7\n8\n")}, 2014) // 2000 bytes
	for range 3 {
		big.enqueue(&packet{}, 0)
	}
	if got := deliveries(big, 3); !equalMs(got, []float64{2, 3, 4}) {
		t.Errorf("2000-byte packets %v ms, want 2, 3 (1000 + 1000 left) and 4", got)
	}
}

// The offset starts the trace that far in; a rate caps it.
func TestTraceOffsetAndCap(t *testing.T) {
	tr := mustTrace(t, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n")
	tr.Offset = 4 * time.Millisecond
	l, _ := testLink(LinkParams{Trace: tr}, 1514)
	for range 3 {
		l.enqueue(&packet{}, 0)
	}
	if got := deliveries(l, 3); !equalMs(got, []float64{0, 1, 2}) { // the trace's 4, 5, 6 ms
		t.Errorf("offset 4 ms: %v ms, want 0, 1, 2", got)
	}
	capped, _ := testLink(LinkParams{Trace: mustTrace(t, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), RateBps: 6056000}, 1514) // 2 ms a frame
	for range 3 {
		capped.enqueue(&packet{}, 0)
	}
	if got := deliveries(capped, 3); !equalMs(got, []float64{2, 4, 6}) {
		t.Errorf("capped at half the trace: %v ms, want 2, 4, 6", got)
	}
}

// A scheduled change applies exactly at its time in the link's time, whenever the link
// is looked at; an immediate set cancels the changes still scheduled.
func TestScheduledChange(t *testing.T) {
	l, freed := testLink(LinkParams{RateBps: 8e6}, 1000) // 1 ms a frame
	down := func(p LinkParams) (LinkParams, error) { p.Down = true; return p, nil }
	up := func(p LinkParams) (LinkParams, error) { p.Down = false; return p, nil }
	l.schedule(linkChange{at: int64(3500 * time.Microsecond), apply: down})
	l.schedule(linkChange{at: int64(6 * time.Millisecond), apply: up})
	for range 10 {
		l.enqueue(&packet{}, 0)
	}
	// Frames start at 0..9 ms: those starting before 3.5 ms (0-3) leave, those at 4 and
	// 5 ms are dropped, those from 6 ms on leave again.
	got := deliveries(l, 10)
	if want := []float64{1, 2, 3, 4, 7, 8, 9, 10}; !equalMs(got, want) || len(*freed) != 2 {
		t.Errorf("deliveries %v ms with %d dropped, want %v and 2", got, len(*freed), want)
	}
	l.schedule(linkChange{at: int64(time.Hour), apply: down})
	l.setAt(LinkParams{RateBps: 8e6}, int64(time.Minute))
	l.changes = nil // what SetLinkParams does
	l.mu.Lock()
	l.advance(int64(2 * time.Hour))
	l.mu.Unlock()
	if l.params.Down {
		t.Error("a change scheduled before an immediate set still applied")
	}
}

func equalMs(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}
