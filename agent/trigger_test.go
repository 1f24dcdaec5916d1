package agent

import (
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

// feed steps g through a sending pattern, 5 ms at a time: rate(t) is the tunnel's send
// rate in bit/s at t since start. It returns when g fired (since start), or -1.
func feed(g *trigger, start time.Duration, d time.Duration, rate func(t time.Duration) float64, bytes *uint64) time.Duration {
	for t := time.Duration(0); t < d; t += triggerEvery {
		*bytes += uint64(rate(t) * triggerEvery.Seconds() / 8)
		if g.step(uint64(start+t+triggerEvery), *bytes) {
			return t + triggerEvery
		}
	}
	return -1
}

func TestTriggerFiresOnAStandingQueueOnlyOnceAFlowStarts(t *testing.T) {
	const c = 10e6 // the paths' rate, bit/s
	cfg := &pb.SignalTrigger{RateBps: c, QueueUs: 60e3, StandingUs: 200e3, WindowMs: 3000}
	idle := func(time.Duration) float64 { return 0 }
	double := func(time.Duration) float64 { return 2 * c } // slow start past the pipe
	// Slow start below the pipe: each round trip (200 ms) a burst at twice the rate for
	// 100 ms, a queue of 50 ms that drains before the next.
	bursts := func(t time.Duration) float64 {
		if t%(200*time.Millisecond) < 100*time.Millisecond {
			return 2 * c
		}
		return 0
	}
	var bytes uint64
	g := &trigger{cfg: cfg}
	now := time.Second
	if at := feed(g, now, 2*time.Second, double, &bytes); at >= 0 {
		t.Fatalf("fired at %v on a flow under way when the agent started; want it armed only by a quiet spell", at)
	}
	now += 2 * time.Second
	feed(g, now, 600*time.Millisecond, idle, &bytes)
	now += 600 * time.Millisecond
	if at := feed(g, now, time.Second, bursts, &bytes); at >= 0 {
		t.Fatalf("fired at %v on bursts that drain within the round trip (queue %.0f ms)", at, g.queue*1e3)
	}
	now += time.Second
	at := feed(g, now, time.Second, double, &bytes)
	// The queue grows by 5 ms each 5 ms from 0: 60 ms of it after 60 ms, standing after 200.
	if at != 200*time.Millisecond {
		t.Fatalf("fired at %v into the overshoot (queue %.0f ms); want 200 ms, when the queue had stood that long", at, g.queue*1e3)
	}
	now += time.Second
	if at := feed(g, now, time.Second, double, &bytes); at >= 0 {
		t.Fatalf("fired again at %v; want once a flow start", at)
	}
	// A quiet spell with a trickle (a ping, a control connection) arms it too.
	now += time.Second
	trickle := func(time.Duration) float64 { return 0.01 * c }
	feed(g, now, 600*time.Millisecond, trickle, &bytes)
	now += 600 * time.Millisecond
	if at := feed(g, now, time.Second, double, &bytes); at < 0 {
		t.Fatal("did not fire for the next flow after a quiet spell")
	}
	now += time.Second

	// Once window_ms has passed since the flow's first packet, a queue is the rate
	// estimate's error, not slow start: no signal.
	feed(g, now, 600*time.Millisecond, idle, &bytes)
	now += 600 * time.Millisecond
	steady := func(time.Duration) float64 { return c }
	feed(g, now, 3100*time.Millisecond, steady, &bytes)
	now += 3100 * time.Millisecond
	if at := feed(g, now, time.Second, double, &bytes); at >= 0 {
		t.Fatalf("fired at %v, %v after the flow started; want nothing after window_ms", at, 3100*time.Millisecond+at)
	}

	// A trigger set just before a flow, on a tunnel that was quiet without one.
	g.cfg = nil
	feed(g, now, 600*time.Millisecond, idle, &bytes)
	now += 600 * time.Millisecond
	g.cfg = cfg
	if at := feed(g, now, time.Second, double, &bytes); at < 0 {
		t.Fatal("a trigger set after the quiet spell did not fire")
	}
	now += time.Second

	// Counters reset with a reconfigured tunnel: no queue of 2^64 bytes.
	now += time.Second
	if at := feed(g, now, 100*time.Millisecond, idle, new(uint64)); at >= 0 || g.queue != 0 {
		t.Fatalf("after a counter reset: fired %v, queue %v s", at, g.queue)
	}
}
