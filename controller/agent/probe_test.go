package agent

import "testing"

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
