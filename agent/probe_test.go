package agent

import (
	"testing"
	"time"
)

// A train spans trainSpan of its path's capacity, within trainLen..trainMax probes.
func TestTrainLength(t *testing.T) {
	for _, c := range []struct {
		capacity float64
		want     int
	}{
		{0, trainLen},     // not known
		{200e3, trainLen}, // K1's slow path: five already take 250 ms
		{14.7e6, 9},       // 7.4 frames in 5 ms, and the first
		{35.9e6, 20},      // S1-4's fastest
		{1e9, trainMax},   // a probe train is not a load test
	} {
		if got := trainLength(c.capacity); got != c.want {
			t.Errorf("capacity %.0f bit/s: train of %d, want %d", c.capacity, got, c.want)
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
		every, quiet := pr.trainGap(trainLength(c.capacity), c.capacity, c.waited)
		if every.Round(time.Millisecond) != c.every || quiet != c.quiet {
			t.Errorf("%s: every %v, quiet %v; want %v, %v", c.name, every, quiet, c.every, c.quiet)
		}
	}
}
