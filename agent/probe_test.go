package agent

import (
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// A train spans trainSpan of its path's capacity, or trainSpread times its delay spread
// up to trainSpanMax, within trainLen..trainMax probes.
func TestTrainLength(t *testing.T) {
	for _, c := range []struct {
		capacity, spreadUs float64
		want               int
	}{
		{0, 0, trainLen},       // not known
		{0, 8000, trainLen},    // nor with a spread
		{200e3, 0, trainLen},   // K1's slow path: five already take 250 ms
		{14.7e6, 0, 9},         // 7.4 frames in 5 ms, and the first
		{14.7e6, 500, 9},       // a spread five times over within 5 ms
		{14.7e6, 2000, 16},     // 10 ms
		{14.7e6, 6300, 31},     // sweep-3-20's path b (±3.9 ms): 20 ms, not 31.5
		{35.9e6, 0, 20},        // S1-4's fastest
		{1e9, 0, trainMax},     // a probe train is not a load test
		{1e9, 10000, trainMax}, // nor with jitter
	} {
		if got := trainLength(&pb.PathEstimate{CapacityBps: c.capacity, SpreadUs: c.spreadUs}); got != c.want {
			t.Errorf("capacity %.0f bit/s, spread %.0f µs: train of %d, want %d", c.capacity, c.spreadUs, got, c.want)
		}
	}
}

// Trains come quick while the controller learns a path, and never take more than
// trainLoad of a path whose capacity is known.
func TestTrainGap(t *testing.T) {
	for _, c := range []struct {
		name         string
		trains       int
		capacity     float64
		waited       bool
		every, quiet time.Duration
	}{
		{"first trains, capacity unknown", 0, 0, false, trainQuick, trainQuick},
		{"later trains", trainsQuick, 0, false, trainEvery, trainEvery},
		{"the controller waits for them", trainsQuick, 0, true, trainQuick, probeIdle},
		{"S1-4's fastest path", 0, 35.9e6, false, trainQuick, trainQuick}, // 5.5 ms a train
		// K1's slow path: five probes of 1242 bytes take 248 ms, ten times that apart.
		{"K1's slow path", 0, 200e3, false, 2484 * time.Millisecond, trainQuick},
		{"K1's slow path, later", trainsQuick, 200e3, false, 2484 * time.Millisecond, trainEvery},
	} {
		pr := &prober{trains: c.trains}
		every, quiet := pr.trainGap(trainLength(&pb.PathEstimate{CapacityBps: c.capacity}), c.capacity, c.waited)
		if every.Round(time.Millisecond) != c.every || quiet != c.quiet {
			t.Errorf("%s: every %v, quiet %v; want %v, %v", c.name, every, quiet, c.every, c.quiet)
		}
	}
}
