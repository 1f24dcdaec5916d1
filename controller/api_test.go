package controller

import (
	"context"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// Until every path is measured, a direction holds the split its sender had; Paths says
// so, and a client that waits for the controller's own split (the lab, before a flow)
// can tell. Once the paths are measured, the next interval's split is the controller's.
func TestPathsSaysWhileTheFoundSplitIsHeld(t *testing.T) {
	d := newDirection(&Tunnel{ID: 1, Mode: "auto"}, "h1", "h2", t0)
	d.paths = []string{"a", "b"}
	d.ests = known([]float64{10e6, 10e6}, []float64{20e3, 20e3}, 0)
	d.opt = newOptimizer(2, t0)
	d.ests[1].busyKnown = false // one report of pairs: not measured yet
	c := &Controller{dirs: []*direction{d}, adopted: map[*direction]time.Time{}}
	c.adoptSplit(d, []float64{0.5, 0.5}, t0)
	measuring := func(now time.Time) bool {
		c.holding(d, now)
		r, err := c.Paths(context.Background(), &pb.PathsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Directions[0].Measuring
	}
	if !measuring(t0.Add(100 * time.Millisecond)) {
		t.Error("holding the split found, with a path not measured: Paths does not say so")
	}
	d.ests[1].busyKnown = true
	if measuring(t0.Add(200 * time.Millisecond)) {
		t.Error("every path measured: Paths still says the split found is held")
	}
}
