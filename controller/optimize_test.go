package controller

import (
	"math"
	"slices"
	"testing"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/model"
)

// known returns estimators that have measured paths of these capacities and base delays,
// with the direction delivering load in total.
// measuredLoss gives e a loss rate measured on enough packets.
func measuredLoss(e *pathEstimator, loss float64) {
	e.est.Loss, e.est.LossKnown, e.lossCounted = loss, true, true
}

func known(caps, delays []float64, load float64) []*pathEstimator {
	ests := make([]*pathEstimator, len(caps))
	var sum float64
	for _, c := range caps {
		sum += c
	}
	for i := range caps {
		e := newPathEstimator()
		e.est.Capacity, e.est.CapacityKnown, e.busyKnown = caps[i], true, true
		e.est.Base, e.est.Owd = delays[i], delays[i]
		e.prev, e.hasPrev = Observation{RxBps: load * caps[i] / sum}, true
		ests[i] = e
	}
	return ests
}

func decideN(o *optimizer, ests []*pathEstimator, n int, tcp model.TCP) target {
	var t target
	for i := 0; i < n; i++ {
		t = o.decide(t0.Add(time.Duration(i)*100*time.Millisecond), ests, "auto", nil, tcp)
	}
	return t
}

func TestOptimizerWeights(t *testing.T) {
	cases := []struct {
		name   string
		caps   []float64
		delays []float64
		want   []float64
	}{
		{"equal paths", []float64{10e6, 10e6, 10e6}, []float64{20e3, 20e3, 20e3}, []float64{1, 1, 1}},
		{"5:2:7 at equal delays", []float64{5e6, 2e6, 7e6}, []float64{50e3, 50e3, 50e3}, []float64{5, 2, 7}},
		{"A2", []float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, []float64{5, 2, 7}},
	}
	for _, c := range cases {
		var total float64
		for _, v := range c.caps {
			total += v
		}
		ests := known(c.caps, c.delays, total)
		o := newOptimizer(len(c.caps), t0)
		got := decideN(o, ests, 10, model.TCP{}).shares()
		var wsum float64
		for _, w := range c.want {
			wsum += w
		}
		for i := range got {
			if want := c.want[i] / wsum; math.Abs(got[i]-want) > 0.05*want {
				t.Errorf("%s: weights %.3f, want %.3f ±5%%", c.name, got, c.want)
				break
			}
		}
	}
}

// A path 90 ms slower than the others is kept at its full weight exactly when the model
// predicts the flow gains more than setGain from it (lean): with a window too small to
// cover its round trip it only adds reordering; with a large window it adds capacity.
func TestOptimizerDropsSlowPathWhenTheModelGains(t *testing.T) {
	caps, delays := []float64{10e6, 10e6, 4e6}, []float64{10e3, 10e3, 100e3}
	for _, window := range []int{64 << 10, 256 << 10, 4 << 20} {
		tcp := model.TCP{Window: window}
		ests := known(caps, delays, 24e6)
		o := newOptimizer(3, t0)
		got := decideN(o, ests, 5, tcp).shares()

		ps := modelPaths(ests, 1)
		all, err := model.Predict(ps, model.Split{Mode: model.WRR}, tcp)
		if err != nil {
			t.Fatal(err)
		}
		without, err := model.Predict(ps, model.Split{Mode: model.WRR, Weights: []float64{10e6, 10e6, 0}}, tcp)
		if err != nil {
			t.Fatal(err)
		}
		best, err := model.BestSubset(ps, model.WRR, tcp)
		if err != nil {
			t.Fatal(err)
		}
		slowShare := caps[2] / (caps[0] + caps[1] + caps[2])
		kept := got[2] >= slowShare*0.95
		gainWithout := without.Goodput > all.Goodput
		t.Logf("window %d KiB: model %.2f Mbit/s with the slow path, %.2f without; best %v %.2f; weights %.3f",
			window>>10, all.Goodput/1e6, without.Goodput/1e6, best.Paths, best.Prediction.Goodput/1e6, got)
		if gainWithout && kept {
			t.Errorf("window %d KiB: the model gains without the slow path but it kept its full weight %.3f", window>>10, got[2])
		}
		if !gainWithout && all.Goodput > without.Goodput*setGain && best.Prediction.Goodput <= all.Goodput*(1+1e-9) && !kept {
			t.Errorf("window %d KiB: the model gains more than setGain with the slow path, yet its weight is %.3f", window>>10, got[2])
		}
		if all.Goodput <= without.Goodput*setGain && kept {
			t.Errorf("window %d KiB: the slow path adds less than setGain, yet it kept its full weight %.3f", window>>10, got[2])
		}
	}
}

// Light load takes the earliest-arriving path; bulk load stripes by capacity, and only a
// light spell that lasts brings light-load scheduling back.
func TestOptimizerModeFollowsLoad(t *testing.T) {
	ests := known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 0.2e6)
	o := newOptimizer(3, t0)
	if m := decideN(o, ests, 5, model.TCP{}).mode; m != pb.Mode_MODE_WRR {
		t.Fatalf("a new direction: mode %v, want wrr (bulk until it stays light)", m)
	}
	if m := decideN(o, ests, 30, model.TCP{}).mode; m != pb.Mode_MODE_EDPF {
		t.Fatalf("light load for 3 s: mode %v, want edpf", m)
	}
	for _, e := range ests {
		e.prev.RxBps *= 60 // 12 Mbit/s in all
	}
	if m := decideN(o, ests, 10, model.TCP{}).mode; m != pb.Mode_MODE_WRR {
		t.Fatalf("bulk load: mode %v, want wrr", m)
	}
	for _, e := range ests {
		e.prev.RxBps /= 60
	}
	now := t0.Add(10 * time.Second)
	if m := o.decide(now, ests, "auto", nil, model.TCP{}).mode; m != pb.Mode_MODE_WRR {
		t.Fatalf("a moment of light load switched to %v", m)
	}
	var m pb.Mode
	for i := 1; i <= 40; i++ {
		m = o.decide(now.Add(time.Duration(i)*100*time.Millisecond), ests, "auto", nil, model.TCP{}).mode
	}
	if m != pb.Mode_MODE_EDPF {
		t.Fatalf("after 4 s of light load: mode %v, want edpf", m)
	}
	// Idle for 5 s: the next flow starts striped, as on a new direction.
	for _, e := range ests {
		e.prev.RxBps = 0
	}
	for i := 41; i <= 90; i++ {
		m = o.decide(now.Add(time.Duration(i)*100*time.Millisecond), ests, "auto", nil, model.TCP{}).mode
	}
	if m != pb.Mode_MODE_WRR {
		t.Fatalf("after 5 s idle: mode %v, want wrr", m)
	}
}

func TestOptimizerOverrides(t *testing.T) {
	ests := known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 14e6)
	o := newOptimizer(3, t0)
	if tg := o.decide(t0, ests, "wrr", []float64{1, 2, 3}, model.TCP{}); tg.mode != pb.Mode_MODE_WRR || tg.weights[2] != 3 {
		t.Fatalf("manual weights: %+v", tg)
	}
	if tg := o.decide(t0, ests, "rr", nil, model.TCP{}); tg.mode != pb.Mode_MODE_RR {
		t.Fatalf("manual rr: %+v", tg)
	}
	ests[1].est.Alive = false
	if tg := o.decide(t0, ests, "wrr", []float64{1, 2, 3}, model.TCP{}); tg.up[1] || tg.shares()[1] != 0 {
		t.Fatalf("a dead path keeps weight under manual control: %+v", tg)
	}
}

// The ACKs of a flow striped over paths 90 ms apart return on a path slow enough for the
// round trip to cover the skew; without skew, or resequenced, on the fastest path; and
// on one with room for the ACKs of the rate the split carries.
func TestACKPath(t *testing.T) {
	fwd := known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 14e6)
	rev := known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 0.5e6)
	shares := []float64{5.0 / 14, 2.0 / 14, 7.0 / 14}
	if j, why := ackPath(fwd, shares, rev, false); j != 2 {
		t.Errorf("A2: ACKs on path %d (%s), want path 2 (50 ms: 62+50 >= 1.2*90)", j, why)
	}
	flat := known([]float64{5e6, 5e6}, []float64{30e3, 30e3}, 10e6)
	revFlat := known([]float64{5e6, 5e6}, []float64{30e3, 10e3}, 0.5e6)
	if j, _ := ackPath(flat, []float64{0.5, 0.5}, revFlat, false); j != 1 {
		t.Errorf("no skew: ACKs on path %d, want the fastest (1)", j)
	}
	huge := known([]float64{5e6, 5e6}, []float64{10e3, 500e3}, 10e6)
	if j, _ := ackPath(huge, []float64{0.5, 0.5}, revFlat, false); j != 0 {
		t.Errorf("skew beyond every return path: ACKs on path %d, want the slowest (0)", j)
	}
	if j, _ := ackPath(huge, []float64{0.5, 0.5}, revFlat, true); j != 1 {
		t.Errorf("resequenced: ACKs on path %d, want the fastest (1): TCP sees no skew", j)
	}
	// sweep-3-04: a 55 Mbit/s split's ACKs, 2.4 Mbit/s of them, do not fit the fastest
	// return paths' 1 and 1.2 Mbit/s; the next fastest, 10.6, has room.
	caps4, delays4 := []float64{42.4e6, 10.6e6, 1e6, 1.2e6}, []float64{67e3, 20e3, 11e3, 29e3}
	fat, revFat := known(caps4, delays4, 50e6), known(caps4, delays4, 2e6)
	shares4 := []float64{42.4 / 55.2, 10.6 / 55.2, 1 / 55.2, 1.2 / 55.2}
	if j, why := ackPath(fat, shares4, revFat, true); j != 1 {
		t.Errorf("sweep-3-04: ACKs on path %d (%s), want path 1, the fastest with room", j, why)
	}
	revFat[1].est.Capacity = 2e6
	if j, why := ackPath(fat, shares4, revFat, true); j != 0 {
		t.Errorf("sweep-3-04, path 1 at 2 Mbit/s: ACKs on path %d (%s), want path 0, the only one with room", j, why)
	}
	revFat[0].est.Capacity = 2e6
	if j, why := ackPath(fat, shares4, revFat, true); j != 2 {
		t.Errorf("no return path with room: ACKs on path %d (%s), want the fastest (2)", j, why)
	}
	rev[2].est.Alive = false
	if j, _ := ackPath(fwd, shares, rev, false); j != 0 {
		t.Errorf("path 2 down: ACKs on path %d, want the next slower that covers the skew (0)", j)
	}
	fwd[1].est.Base = math.NaN()
	if j, _ := ackPath(fwd, shares, rev, false); j != -1 {
		t.Errorf("a used path's delay unknown: ACKs on path %d, want none yet (-1)", j)
	}
}

// balance takes share from a path that arrives late over a queue of its own, and leaves
// alone a path that is late only because it is longer.
func TestBalanceDrainsTheLateQueue(t *testing.T) {
	// K1 under capacity weights: the 200 kbit/s path queues 300 ms more.
	ests := known([]float64{0.2e6, 1e6}, []float64{45e3, 45e3}, 1.2e6)
	ests[0].est.Owd, ests[0].est.Queue, ests[0].est.RxPackets = 745e3, 700e3, 0 // no packet this report
	ests[1].est.Owd, ests[1].est.Queue, ests[1].est.RxPackets = 445e3, 400e3, 4
	w := balance(ests, []float64{0.2e6, 1e6})
	if w[1] != 1e6 || w[0] >= 0.2e6*0.9 || w[0] < 0.2e6*(1-balanceMax) {
		t.Fatalf("weights %v, want the late path's cut by 10-30 %% and the other's kept", w)
	}
	// A2's 100 ms path without a queue arrives late but cannot do better.
	ests = known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 14e6)
	for _, e := range ests {
		e.est.Queue, e.est.RxPackets = 0, 50
	}
	caps := []float64{5e6, 2e6, 7e6}
	if w := balance(ests, caps); !slices.Equal(w, caps) {
		t.Fatalf("weights %v for paths without queues, want the capacities %v", w, caps)
	}
}

// Where the queues ahead are predicted, a late path is given the share that drains its
// lateness within drainHorizon, though the arrivals measured still show none.
func TestBalanceDrainsThePredictedQueue(t *testing.T) {
	// A1 after slow start's overshoot: the 2 Mbit/s path's queue is 300 ms longer.
	ests := known([]float64{5e6, 2e6}, []float64{100e3, 100e3}, 7e6)
	ests[0].est.Ahead, ests[1].est.Ahead = 100e3, 400e3
	w := balance(ests, []float64{5e6, 2e6})
	late := 5.0 / 7 * 300e3 / 1e6 // behind the mean by share
	if want := 2e6 * (1 - late/drainHorizon); w[0] != 5e6 || math.Abs(w[1]-want) > 1 {
		t.Fatalf("weights %v, want [5e6 %.0f]", w, want)
	}
	ests[1].est.Ahead = 2e6
	if w := balance(ests, []float64{5e6, 2e6}); w[1] != 2e6*drainFloor {
		t.Fatalf("weights %v for a path 1.9 s late, want its share at the floor %v", w, drainFloor)
	}
}

// Loss below lossFloor does not reach the model; loss above it does.
func TestModelPathsLossFloor(t *testing.T) {
	ests := known([]float64{36e6, 18e6}, []float64{20e3, 35e3}, 50e6)
	measuredLoss(ests[0], 0.0003)
	measuredLoss(ests[1], 0.01)
	ps := modelPaths(ests, 1)
	if ps[0].Loss != 0 || ps[1].Loss != 0.01 {
		t.Fatalf("model losses %v and %v, want 0 (below the floor) and 0.01", ps[0].Loss, ps[1].Loss)
	}
}

// A bulk flow gets one early congestion signal once the paths it uses hold a growing
// standing queue of half its base round trip on average (by share), then none until the
// hold is over; none while the queues shrink (the flow is backing off already), and never
// under an operator's fixed split.
func TestOptimizerCongestionSignal(t *testing.T) {
	caps := []float64{35.9e6, 18.4e6, 33.3e6, 14.7e6} // S1-4: shares .351 .180 .326 .144
	delays := []float64{20e3, 35e3, 25e3, 45e3}
	// signals runs the optimiser every 100 ms from..to with the paths' queues q, each
	// growing by grow µs a step, and returns when it asked for a signal. Each step's
	// quickest packet met floor of the queue.
	floor, tcp := 1.0, model.TCP{}
	signals := func(o *optimizer, ests []*pathEstimator, override string, from, to time.Duration, grow float64, q ...float64) []time.Duration {
		var at []time.Duration
		for d := from; d < to; d += 100 * time.Millisecond {
			step := float64((d - from) / (100 * time.Millisecond))
			for i, e := range ests {
				e.est.Owd = e.est.Base + q[i] + step*grow
				e.floors = append(e.floors, timed{t0.Add(d), floor * (q[i] + step*grow)})
			}
			if o.decide(t0.Add(d), ests, override, nil, tcp).signal {
				at = append(at, d)
			}
		}
		return at
	}
	ests := known(caps, delays, 102e6)
	o := newOptimizer(len(caps), t0)
	// Base round trip: 28.1 ms one way by share, 20 ms back; half of it is 24.1 ms.
	if at := signals(o, ests, "auto", 0, 3*time.Second, 10, 20e3, 20e3, 20e3, 20e3); at != nil {
		t.Fatalf("queues growing to 23 ms, below half the round trip, were signalled at %v", at)
	}
	// Two small paths queue, the big ones do not: 19.4 ms by share.
	if at := signals(o, ests, "auto", 3*time.Second, 6*time.Second, 10, 0, 60e3, 0, 60e3); at != nil {
		t.Fatalf("a mean queue of 19 ms was signalled at %v", at)
	}
	// 26 ms by share and growing, one path lagging its share.
	at := signals(o, ests, "auto", 6*time.Second, 8500*time.Millisecond, 10, 30e3, 30e3, 30e3, 2e3)
	if want := []time.Duration{6 * time.Second, 7 * time.Second, 8 * time.Second}; !slices.Equal(at, want) {
		t.Fatalf("a growing mean queue of 26 ms: signals at %v, want %v (one per second)", at, want)
	}
	if o.signals != 3 {
		t.Fatalf("%d signals counted, want 3", o.signals)
	}
	// The queues peak at 90 ms within the hold, then shrink.
	signals(o, ests, "auto", 8600*time.Millisecond, 8700*time.Millisecond, 0, 90e3, 90e3, 90e3, 90e3)
	if at := signals(o, ests, "auto", 9*time.Second, 12*time.Second, -100, 80e3, 80e3, 80e3, 80e3); at != nil {
		t.Fatalf("queues of 80 ms shrinking were signalled at %v", at)
	}
	// Slow start's bursts: as deep, but each drains before the next (its first packets
	// meet no queue).
	floor = 0
	if at := signals(newOptimizer(len(caps), t0), ests, "auto", 13*time.Second, 16*time.Second, 10, 30e3, 30e3, 30e3, 30e3); at != nil {
		t.Fatalf("queues that drain every round trip were signalled at %v", at)
	}
	floor = 1
	// ACKs returning over a 100 ms path make the round trip 128 ms: 30 ms is no signal.
	slowACKs := newOptimizer(len(caps), t0)
	slowACKs.ackBase = 100e3
	if at := signals(slowACKs, ests, "auto", 0, 3*time.Second, 10, 30e3, 30e3, 30e3, 30e3); at != nil {
		t.Fatalf("queues of 30 ms against a 128 ms round trip were signalled at %v", at)
	}
	// K1's pipe holds 9 packets: half its round trip (45 ms) and four packets (40 ms).
	k1 := known([]float64{0.2e6, 1e6}, []float64{45e3, 45e3}, 1.2e6)
	if at := signals(newOptimizer(2, t0), k1, "auto", 0, 3*time.Second, 10, 60e3, 60e3); at != nil {
		t.Fatalf("K1's queues growing from 60 ms were signalled at %v", at)
	}
	if at := signals(newOptimizer(2, t0), k1, "auto", 0, 900*time.Millisecond, 10, 90e3, 90e3); len(at) != 1 {
		t.Fatalf("K1's queues growing from 90 ms: signals at %v, want one", at)
	}
	// Resequenced, every packet reaches TCP at the slowest path's delay: the round trip
	// is 45 + 20 ms, and 30 ms of queue is below half of it.
	tcp.Resequenced = true
	if at := signals(newOptimizer(len(caps), t0), known(caps, delays, 102e6), "auto", 0, 3*time.Second, 10, 30e3, 30e3, 30e3, 30e3); at != nil {
		t.Fatalf("resequenced, queues of 30 ms against a 65 ms round trip were signalled at %v", at)
	}
	if at := signals(newOptimizer(len(caps), t0), known(caps, delays, 102e6), "auto", 0, 900*time.Millisecond, 10, 40e3, 40e3, 40e3, 40e3); len(at) != 1 {
		t.Fatalf("resequenced, queues growing from 40 ms: signals at %v, want one", at)
	}
	tcp.Resequenced = false
	// A signal cuts one of four flows: 10 ms of queue (of 5 ms needed through the cut of
	// a quarter of the window) is a signal for four flows, not for one.
	if at := signals(newOptimizer(len(caps), t0), known(caps, delays, 102e6), "auto", 0, 900*time.Millisecond, 10, 10e3, 10e3, 10e3, 10e3); at != nil {
		t.Fatalf("one flow, queues of 10 ms were signalled at %v", at)
	}
	tcp.Flows = 4
	if at := signals(newOptimizer(len(caps), t0), known(caps, delays, 102e6), "auto", 0, 900*time.Millisecond, 10, 10e3, 10e3, 10e3, 10e3); len(at) != 1 {
		t.Fatalf("four flows, queues growing from 10 ms: signals at %v, want one", at)
	}
	tcp.Flows = 0
	// A queue that stands within the paths' jitter is noise: 30 ms ahead over a floor
	// of 15 ms is no signal on paths of 10 ms of jitter, and is one without it.
	floor = 0.5
	jittery := known(caps, delays, 102e6)
	for _, e := range jittery {
		e.est.Jitter = 10e3
	}
	if at := signals(newOptimizer(len(caps), t0), jittery, "auto", 0, 3*time.Second, 10, 30e3, 30e3, 30e3, 30e3); at != nil {
		t.Fatalf("a standing queue of 15 ms under 10 ms of jitter was signalled at %v", at)
	}
	if at := signals(newOptimizer(len(caps), t0), known(caps, delays, 102e6), "auto", 0, 900*time.Millisecond, 10, 30e3, 30e3, 30e3, 30e3); len(at) != 1 {
		t.Fatalf("a standing queue of 15 ms without jitter: signals at %v, want one", at)
	}
	floor = 1
	fixed := newOptimizer(len(caps), t0)
	if at := signals(fixed, ests, "wrr", 0, 3*time.Second, 10, 30e3, 30e3, 30e3, 30e3); at != nil {
		t.Fatalf("operator's wrr was signalled at %v", at)
	}
}

// The sending agent's trigger gets the split's measured rate and the signal's level of
// queue, standing through the flow's round trip, for the start of a flow; none where a
// rate in use is a guess or under an operator's split. A signal it gave holds off the
// controller's own.
func TestOptimizerSignalTrigger(t *testing.T) {
	caps := []float64{35.9e6, 18.4e6, 33.3e6, 14.7e6}
	ests := known(caps, []float64{20e3, 35e3, 25e3, 45e3}, 102e6)
	o := newOptimizer(len(caps), t0)
	o.ackBase = 20e3
	g := o.decide(t0, ests, "auto", nil, model.TCP{}).trigger
	rtt := 28.1e3 + 20e3 // by share one way, ACKs back
	if g == nil || g.RateBps != 102.3e6 || math.Abs(g.StandingUs-rtt) > 200 ||
		math.Abs(g.QueueUs-signalLevel(g.StandingUs, 102.3e6, 1)) > 1 || g.WindowMs != 2000 {
		t.Fatalf("trigger %v, want rate 102.3 Mbit/s, standing %.0f µs, queue %.0f µs, window 2 s", g, rtt, signalLevel(rtt, 102.3e6, 1))
	}
	// A rate read lower (slow start's bursts) does not lower the trigger's for a while.
	ests[0].est.Capacity = 21e6
	if g := o.decide(t0.Add(time.Second), ests, "auto", nil, model.TCP{}).trigger; g.RateBps != 102.3e6 {
		t.Fatalf("trigger rate %.0f after one path read low, want 102.3 Mbit/s kept", g.RateBps)
	}
	if g := o.decide(t0.Add(12*time.Second), ests, "auto", nil, model.TCP{}).trigger; math.Abs(g.RateBps-87.4e6) > 1 {
		t.Fatalf("trigger rate %.0f 12 s later, want 87.4 Mbit/s", g.RateBps)
	}
	ests[0].est.Capacity = 35.9e6
	if g := o.decide(t0, ests, "wrr", nil, model.TCP{}).trigger; g != nil {
		t.Fatalf("operator's wrr got trigger %v", g)
	}
	guessed := known(caps, []float64{20e3, 35e3, 25e3, 45e3}, 102e6)
	guessed[2].est.CapacityKnown = false
	if g := newOptimizer(len(caps), t0).decide(t0, guessed, "auto", nil, model.TCP{}).trigger; g != nil {
		t.Fatalf("a guessed rate in use got trigger %v", g)
	}

	// A growing standing queue of 30 ms on every path (above the level of 28 ms) gets the
	// controller's signal, but not within the hold of one the trigger gave.
	o = newOptimizer(len(caps), t0)
	o.ackBase = 20e3
	var at []time.Duration
	o.sawTriggered(t0.Add(-100*time.Millisecond), 3) // the sender's count when first heard
	for d := time.Duration(0); d < 1500*time.Millisecond; d += 100 * time.Millisecond {
		o.sawTriggered(t0.Add(d), 4)
		for _, e := range ests {
			e.est.Owd = e.est.Base + 30e3 + float64(d/time.Millisecond)
			e.floors = append(e.floors, timed{t0.Add(d), 30e3})
		}
		if o.decide(t0.Add(d), ests, "auto", nil, model.TCP{}).signal {
			at = append(at, d)
		}
	}
	if want := []time.Duration{time.Second}; !slices.Equal(at, want) || o.signals != 2 {
		t.Fatalf("signals at %v (%d counted), want the controller's at %v, a second after the trigger's, and 2 counted", at, o.signals, want)
	}
}

// While a flow starts, A2's fast, small-share path b is fed more, within what it carries
// at the flow's rate, so that HyStart sees its round trip in every round; at the split's
// rate, or on paths of equal delay, the weights are the capacities.
func TestOptimizerFeedsFastPathAtFlowStart(t *testing.T) {
	caps, a2 := []float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}
	for _, c := range []struct {
		name   string
		delays []float64
		load   float64
		want   float64 // path b's share
	}{
		{"A2 at 2 Mbit/s", a2, 2e6, feedShare},
		{"A2 at 6 Mbit/s", a2, 6e6, feedRate * 2 / 6},
		{"A2 at the split's rate", a2, 14e6, 2.0 / 14},
		{"equal delays at 2 Mbit/s", []float64{50e3, 50e3, 50e3}, 2e6, 2.0 / 14},
	} {
		o := newOptimizer(3, t0)
		got := o.decide(t0, known(caps, c.delays, c.load), "auto", nil, model.TCP{}).shares()
		if math.Abs(got[1]-c.want) > 0.01 {
			t.Errorf("%s: shares %.3f, want b at %.3f", c.name, got, c.want)
		}
	}
	// Once the flow has filled the split, the start is over for good.
	o := newOptimizer(3, t0)
	o.decide(t0, known(caps, a2, 14e6), "auto", nil, model.TCP{})
	if got := o.decide(t0.Add(100*time.Millisecond), known(caps, a2, 2e6), "auto", nil, model.TCP{}).shares(); math.Abs(got[1]-2.0/14) > 0.01 {
		t.Errorf("after the split was filled: shares %.3f, want b at %.3f", got, 2.0/14)
	}
}

// A bulk split over a host agent's paths leaves a path of unknown capacity out for up to
// unknownWait, while the agent's probe trains measure it; a split switch, which sends no
// trains, gives it a guessed share at once, and so does an agent's split after the wait.
func TestBulkSplitWaitsForTrains(t *testing.T) {
	caps, delays := []float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}
	for _, probed := range []bool{true, false} {
		ests := known(caps, delays, 14e6)
		ests[0].est.Capacity, ests[0].est.CapacityKnown, ests[0].busyKnown = 0, false, false
		o := newOptimizer(len(caps), t0)
		o.probed = probed
		at := func(d time.Duration) []float64 {
			return o.decide(t0.Add(d), ests, "auto", nil, model.TCP{}).shares()
		}
		if w := at(0); (w[0] == 0) != probed {
			t.Errorf("probed=%v: shares %.3f at once; want path 0 left out only while trains can measure it", probed, w)
		}
		if w := at(unknownWait - 100*time.Millisecond); (w[0] == 0) != probed {
			t.Errorf("probed=%v: shares %.3f just before the wait ends", probed, w)
		}
		if w := at(unknownWait); w[0] == 0 {
			t.Errorf("probed=%v: shares %.3f after the wait, want path 0 in on a guess", probed, w)
		}
	}
	// A path read from one report of pairs waits too; from two it is in.
	ests := known(caps, delays, 14e6)
	e := ests[0]
	e.est.Capacity, e.busyKnown = 5e6, false
	e.pairs = []pairReport{{t0, 5e6, 4}}
	o := newOptimizer(len(caps), t0)
	o.probed = true
	if w := o.decide(t0, ests, "auto", nil, model.TCP{}).shares(); w[0] != 0 {
		t.Errorf("shares %.3f with path 0 read from one train, want it left out", w)
	}
	e.pairs = append(e.pairs, pairReport{t0.Add(250 * time.Millisecond), 5e6, 4})
	if w := o.decide(t0.Add(300*time.Millisecond), ests, "auto", nil, model.TCP{}).shares(); w[0] == 0 {
		t.Errorf("shares %.3f with path 0 read from two trains, want it in", w)
	}
}

// Under wrr a path whose capacity is read short (pairs, before any busy stretch) gets less
// than it carries, so it never queues and no busy stretch measures it; while the others
// queue, its estimate is raised until it is fed enough to queue too: within a second from
// half its capacity. Not while the queued path is not measured yet, or its busy stretch
// measures less than its estimate (its capacity may be the one that changed, downwards),
// nor when the paths queue alike. (A measured path gets pulses: probe_test.go.)
func TestUnderFedPathIsRaisedUnderWRR(t *testing.T) {
	caps, delays := []float64{7e6, 7e6}, []float64{20e3, 20e3}
	for _, c := range []struct {
		name               string
		underFed, measured bool
		queuedEst          float64 // the queued path's estimate; its busy stretch measures 7 Mbit/s
		want               float64 // path 1's share after 1 s, at least
	}{
		{"under-fed", true, true, 7e6, 0.45},
		{"both queued", false, true, 7e6, 1.0 / 3},
		{"the queued path not measured yet", true, false, 7e6, 1.0 / 3},
		{"the queued path estimated above its busy stretch", true, true, 8.4e6, 3.5 / 11.9},
	} {
		ests := known(caps, delays, 14e6)
		ests[0].est.Capacity = c.queuedEst
		ests[1].est.Capacity = 3.5e6 // the path carries 7 Mbit/s; the estimate is short
		ests[1].busyKnown = false    // read by pairs
		o := newOptimizer(2, t0)
		var w []float64
		for i := 0; i <= 10; i++ {
			now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			for j, e := range ests {
				q := 10e3 // µs: the fed paths' standing queue, over two frames' serialisation
				if j == 1 && c.underFed {
					q = 0
				}
				e.floors = append(e.floors, timed{now, q})
				e.deliv = append(e.deliv, delivery{now, uint64(i) * 87500, q > 0 && c.measured}) // 7 Mbit/s
				e.est.RxPackets = 20
			}
			w = o.decide(now, ests, "auto", nil, model.TCP{}).shares()
		}
		if mode := o.setMode; mode != model.WRR {
			t.Fatalf("mode %v, want wrr", mode)
		}
		if w[1] < c.want-0.02 || c.want < 0.4 && w[1] > c.want+0.02 {
			t.Errorf("%s: shares %.3f after 1 s, want path 1 at %.3f", c.name, w, c.want)
		}
	}
}

// A bulk flow whose window collapsed delivers little but still in full-sized packets: it
// stays striped by wrr, where small packets at the same rate go to edpf.
func TestCollapsedBulkFlowIsNotLight(t *testing.T) {
	for _, frame := range []float64{frameBits, 800} {
		ests := known([]float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}, 14e6)
		o := newOptimizer(3, t0)
		decideN(o, ests, 10, model.TCP{})
		deliver(ests, frame, 0.25e6, 0.05e6, 0.25e6) // under 30 % of path b's 2 Mbit/s
		var m pb.Mode
		for i := 10; i < 50; i++ {
			m = o.decide(t0.Add(time.Duration(i)*100*time.Millisecond), ests, "auto", nil, model.TCP{}).mode
		}
		if want := map[bool]pb.Mode{true: pb.Mode_MODE_WRR, false: pb.Mode_MODE_EDPF}[frame == frameBits]; m != want {
			t.Errorf("%.0f-bit packets at 0.55 Mbit/s for 4 s: mode %v, want %v", frame, m, want)
		}
	}
}

// BBR does not cut its window on a loss: its flows get no early signal and no trigger,
// on queues that give a cubic flow both.
func TestNoCongestionSignalForBBR(t *testing.T) {
	caps, delays := []float64{35.9e6, 18.4e6, 33.3e6, 14.7e6}, []float64{20e3, 35e3, 25e3, 45e3}
	for _, cc := range []model.CC{model.Cubic, model.BBR} {
		ests := known(caps, delays, 102e6)
		o := newOptimizer(len(caps), t0)
		signals, triggers := 0, 0
		for d := time.Duration(0); d < 2*time.Second; d += 100 * time.Millisecond {
			for _, e := range ests {
				q := 30e3 + float64(d/(100*time.Millisecond))*10
				e.est.Owd = e.est.Base + q
				e.floors = append(e.floors, timed{t0.Add(d), q})
			}
			tg := o.decide(t0.Add(d), ests, "auto", nil, model.TCP{CC: cc})
			if tg.signal {
				signals++
			}
			if tg.trigger != nil {
				triggers++
			}
		}
		if bbr := cc == model.BBR; bbr != (signals == 0) || bbr != (triggers == 0) {
			t.Errorf("cc %v: %d signals, %d decisions with a trigger", cc, signals, triggers)
		}
	}
}

// A path whose capacity only packet pairs have read (short, as a link that sends per TTI
// reads a fast path: sweep-1-06's 78.9 Mbit/s path read as 23, and the model dropped it)
// stays in the set at its estimate's weight, where probing can correct it; once a busy
// stretch has measured it, the model may drop it. BBR over 80 Mbit/s at 40 ms and 20 at
// 10 ms: the model keeps the 80 alone.
func TestPairReadPathIsNotDroppedOnItsReading(t *testing.T) {
	caps, delays := []float64{80e6, 20e6}, []float64{40e3, 10e3}
	for _, busy := range []bool{false, true} {
		ests := known(caps, delays, 100e6)
		ests[1].busyKnown = busy
		ests[1].pairs = []pairReport{{t0, 20e6, 10}, {t0, 20e6, 10}}
		o := newOptimizer(2, t0)
		w := decideN(o, ests, 5, model.TCP{CC: model.BBR}).shares()
		if in := w[1] > 0; in == busy {
			t.Errorf("path 1 read at 20 Mbit/s by %s: shares %.3f (%s)", map[bool]string{false: "pairs only", true: "a busy stretch"}[busy], w, o.reason)
		}
	}
}

// The set's dwell holds only while the direction delivers: before a flow, a set chosen on
// the first estimates gives way at once to the model's better one.
func TestSetDwellOnlyUnderAFlow(t *testing.T) {
	caps, delays := []float64{80e6, 70e6}, []float64{6e3, 79e3}
	for _, load := range []float64{0, 50e6} {
		ests := known(caps, delays, load)
		o := newOptimizer(2, t0)
		o.decide(t0, ests, "auto", nil, model.TCP{})
		o.set, o.setSince = []bool{true, false}, t0 // chosen on a rough estimate
		w := o.decide(t0.Add(500*time.Millisecond), ests, "auto", nil, model.TCP{}).shares()
		if both := w[1] > 0; both != (load == 0) {
			t.Errorf("load %.0f Mbit/s, 0.5 s after the set was chosen: shares %.3f (%s)", load/1e6, w, o.reason)
		}
	}
}

// Optimism adds an unmeasured path to a set; it does not give it the flow alone. A
// lossy 13 Mbit/s path measured busy and a 1 Mbit/s path pairs read right (sweep-5-06's):
// taken at the 13, the 1 Mbit/s path alone looks best, and would carry the flow; at the
// estimates, the lossy path alone is far better, and it stays.
func TestGuessAloneIsNoSet(t *testing.T) {
	ests := known([]float64{13e6, 1e6}, []float64{25e3, 85e3}, 10e6)
	measuredLoss(ests[0], 0.004)
	ests[1].lossCounted = true // measured, without loss
	ests[1].busyKnown = false
	o := newOptimizer(2, t0)
	w := decideN(o, ests, 5, model.TCP{CC: model.Cubic, Resequenced: true}).shares()
	if !(w[0] > 0.5) {
		t.Errorf("shares %.3f (%s), want the measured path to carry the flow", w, o.reason)
	}
}

// With the receiver resequencing, the losses the tunnel repairs never reach TCP, so the
// model judges the paths by what it does not repair: a fat path with random loss stays
// in the set when its losses are repaired, and the model predicts far less when they
// reach TCP as they are. Without the resequencer every loss counts, repaired or not.
func TestRepairedLossIsNotTCPs(t *testing.T) {
	caps, delays := []float64{42e6, 10e6}, []float64{30e3, 20e3}
	run := func(reseq bool, received uint64) (target, *direction) {
		d := &direction{opt: newOptimizer(2, t0), ests: known(caps, delays, 40e6)}
		for i, loss := range []float64{0.003, 0.007} {
			measuredLoss(d.ests[i], loss)
		}
		var tgt target
		for i := range 20 {
			now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			u := uint64(i)
			d.rx = &pb.TunnelStats{Repair: &pb.RepairStats{Asked: 10 * u, Congested: 2 * u, Received: received * u}}
			if reseq {
				d.rx.Resequencer = &pb.ResequencerStats{}
			}
			if d.prevRx != nil {
				d.countRepairs(now)
			}
			d.prevRx = d.rx
			tgt = d.decide(now, model.TCP{CC: model.Cubic})
		}
		return tgt, d
	}
	repaired, dr := run(true, 10)
	if got := dr.unrepaired(); math.Abs(got-2.0/12) > 1e-9 {
		t.Errorf("resequenced, 10 of 12 lost repaired: %v of the losses reach TCP, want 1/6", got)
	}
	if w := repaired.shares(); !(w[0] > 0.5) {
		t.Errorf("repaired: shares %.3f, want the fat path kept at its capacity share", w)
	}
	_, d := run(true, 0)
	if got := d.unrepaired(); got != 1 {
		t.Errorf("nothing repaired: %v of the losses reach TCP, want all", got)
	}
	pr, pu := dr.opt.predict, d.opt.predict
	t.Logf("predicted: %.1f Mbit/s repaired, %.1f unrepaired", pr/1e6, pu/1e6)
	if !(pu < 0.5*pr) {
		t.Errorf("predicted %.1f Mbit/s with the losses unrepaired, %.1f repaired: want the losses to cost", pu/1e6, pr/1e6)
	}
	if _, d := run(false, 10); d.unrepaired() != 1 {
		t.Errorf("without the resequencer %v of the losses reach TCP, want all", d.unrepaired())
	}
}

// Lean drops a path whose part of the predicted goodput is within setGain: fat+thin's
// thin path whether it is measured or only read by pairs (its delay is every packet's,
// so it is judged at its estimate), but not a short path that pairs read short.
func TestLeanDropsMarginalPath(t *testing.T) {
	tcp := model.TCP{CC: model.Cubic, Resequenced: true}
	ms := time.Millisecond
	fat, thin := model.Path{Rate: 46e6, Delay: 10 * ms, Queue: 400}, model.Path{Rate: 1e6, Delay: 101 * ms, Queue: 30}
	thinAtBest := thin
	thinAtBest.Rate = fat.Rate
	for _, c := range []struct {
		name     string
		opt, est []model.Path
		want     []int
	}{
		{"fat+thin", []model.Path{fat, thin}, nil, []int{0}},
		{"fat+thin, thin read by pairs", []model.Path{fat, thinAtBest}, []model.Path{fat, thin}, []int{0}},
		{"two to one", []model.Path{{Rate: 20e6, Delay: 10 * ms, Queue: 400}, {Rate: 10e6, Delay: 30 * ms, Queue: 400}}, nil, []int{0, 1}},
		{"a short path read short by pairs", []model.Path{{Rate: 80e6, Delay: 40 * ms, Queue: 400}, {Rate: 80e6, Delay: 10 * ms, Queue: 400}}, []model.Path{{Rate: 80e6, Delay: 40 * ms, Queue: 400}, {Rate: 2e6, Delay: 10 * ms, Queue: 400}}, []int{0, 1}},
	} {
		if c.est == nil {
			c.est = c.opt
		}
		best, err := model.BestSubset(c.opt, model.WRR, tcp)
		if err != nil {
			t.Fatal(err)
		}
		got := lean(c.opt, c.est, best, model.WRR, tcp)
		t.Logf("%s: model's best %v at %.1f Mbit/s, lean %v at %.1f", c.name, best.Paths, best.Prediction.Goodput/1e6, got.Paths, got.Prediction.Goodput/1e6)
		if !slices.Equal(got.Paths, c.want) {
			t.Errorf("%s: lean kept %v, want %v", c.name, got.Paths, c.want)
		}
		if slices.Equal(c.opt, c.est) && got.Prediction.Goodput*setGain < best.Prediction.Goodput {
			t.Errorf("%s: lean predicts %.1f Mbit/s against the best's %.1f: more than setGain lost", c.name, got.Prediction.Goodput/1e6, best.Prediction.Goodput/1e6)
		}
	}
}

// A split adopted from a sender may name a mode without the weights or estimates it reads
// (an agent set to edpf that was never given estimates): its shares are none, not a panic
// in the loop that writes splits and logs the paths in use.
func TestSharesOfAnIncompleteSplit(t *testing.T) {
	for _, tg := range []target{
		{mode: pb.Mode_MODE_EDPF, up: []bool{true, true}},
		{mode: pb.Mode_MODE_WRR, up: []bool{true, true}},
	} {
		if w := tg.shares(); len(w) != 2 || w[0] != 0 || w[1] != 0 {
			t.Errorf("%v without its inputs: shares %v, want none", tg.mode, w)
		}
	}
}

// A path's loss is weighed once every live path's packets have measured theirs: the
// busiest path's loss is measured first, and against the others' read as none the model
// left it out (sweep-7-03). A dead path's does not wait to be measured.
func TestLossWeighedOnceEveryPathIsMeasured(t *testing.T) {
	ests := known([]float64{9.7e6, 2.7e6, 4.4e6}, []float64{19e3, 45e3, 58e3}, 12e6)
	measuredLoss(ests[0], 0.005)
	measuredLoss(ests[2], 0)
	// Path b's reports, 50 packets each: its loss is measured at the fourth, and stays
	// so when it carries less (a path the set leaves out has only its probes).
	report := func(i int, n uint64) {
		ests[1].randomLoss(Observation{At: t0.Add(time.Duration(i) * 50 * time.Millisecond)}, n, 0, t0.Add(-time.Hour))
	}
	for i := range 3 {
		report(i, 50)
	}
	if ps := modelPaths(ests, 1); ps[0].Loss != 0 {
		t.Fatalf("path a's loss %.4f weighed while path b's is not measured", ps[0].Loss)
	}
	report(3, 50)
	if ps := modelPaths(ests, 1); ps[0].Loss != 0.005 {
		t.Fatalf("every path measured: path a's loss %.4f, want 0.005", ps[0].Loss)
	}
	report(200, 1) // 10 s on, its count fell out of the loss window
	if ps := modelPaths(ests, 1); ps[0].Loss != 0.005 {
		t.Fatalf("path b measured once, now with few packets: path a's loss %.4f, want 0.005", ps[0].Loss)
	}
	ests[1].est.Alive = false
	report(201, 0)
	ests[1].est.Alive = true
	if ps := modelPaths(ests, 1); ps[0].Loss != 0 {
		t.Fatalf("path b back from an outage, not measured again: path a's loss %.4f weighed", ps[0].Loss)
	}
	ests[1].est.Alive = false
	if ps := modelPaths(ests, 1); ps[0].Loss != 0.005 {
		t.Fatalf("path b dead and unmeasured: path a's loss %.4f, want 0.005", ps[0].Loss)
	}
}
