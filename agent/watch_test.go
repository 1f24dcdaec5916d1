package agent

import (
	"context"
	"math"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// A stream's reports tile time: each covers the counters from the sample the one before
// it ended at, so a packet pair or a minimum delay is in one report only. Chosen by
// window length they overlapped whenever the sampler's ticks drifted against the
// stream's, and the controller counted a probe train twice.
func TestWatchedReportsTile(t *testing.T) {
	p := newPair(t, 3)
	p.configure(t)
	runSampler(t, p.h2, p.a2)
	time.Sleep(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var got []*pb.TunnelStats
	err := p.h2.Do(func() error {
		return p.a2.WatchStats(ctx, &pb.StatsRequest{IntervalMs: 50}, func(s *pb.Stats) error {
			got = append(got, s.Tunnels[0])
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 20 {
		t.Fatalf("%d reports in 2 s, want about 40", len(got))
	}
	// A report's interval is the time between the samples it spans: from the previous
	// report's last to its own. Both ends are sampler ticks, so they match to the µs.
	overlaps := 0
	for i := 2; i < len(got); i++ {
		gap := float64(got[i].TimeUnixNano-got[i-1].TimeUnixNano) / 1e9
		if math.Abs(got[i].IntervalS-gap) > 1e-3 {
			overlaps++
			t.Logf("report %d spans %.1f ms, %.1f ms after the one before", i, got[i].IntervalS*1e3, gap*1e3)
		}
	}
	if overlaps > 0 {
		t.Errorf("%d of %d reports do not start where the one before ended", overlaps, len(got)-2)
	}
}
