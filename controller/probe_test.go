package controller

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/plait/plait/model"
)

// striped is a bulk flow over synthetic paths under the optimiser. The flow is
// window-limited and self-clocked: it sends what its queued paths deliver (or, with no
// queue, what its tightest path carries), grow times that as its window grows, split by
// the shares the optimiser decides every other report.
type striped struct {
	o      *optimizer
	ests   []*pathEstimator
	paths  []*synth
	shares []float64
	at     time.Duration
	peak   []float64 // the most queue each path held, µs
}

// a2Flow is a flow over A2's paths of capacities caps, estimated (and measured by busy
// stretches) at est, with the flow's standing queue of q (s) on each.
func a2Flow(caps, est []float64, q float64) *striped {
	delays := []float64{100e3, 10e3, 50e3}
	f := &striped{o: newOptimizer(len(caps), t0), ests: known(est, delays, 0), peak: make([]float64, len(caps))}
	f.o.starting = false // the flow has run a while
	var sum float64
	for i := range caps {
		f.paths = append(f.paths, &synth{rate: caps[i], base: delays[i], rng: rand.New(rand.NewPCG(1, uint64(i))), queue: q * caps[i] / 8})
		f.ests[i].hasPrev = false
		sum += est[i]
	}
	for i := range est {
		f.shares = append(f.shares, est[i]/sum)
	}
	return f
}

func (f *striped) run(d time.Duration, grow float64) {
	for end := f.at + d; f.at < end; f.at += step {
		if f.at%(2*step) == 0 && f.at > 0 {
			f.shares = f.o.decide(t0.Add(f.at), f.ests, "auto", nil, model.TCP{}).shares()
		}
		var c, s float64
		r := math.Inf(1)
		for i, p := range f.paths {
			if f.shares[i] > 0 {
				r = min(r, p.rate/f.shares[i])
				if p.queue > 0 {
					c, s = c+p.rate, s+f.shares[i]
				}
			}
		}
		if s > 0 {
			r = c / s
		}
		for i, p := range f.paths {
			rate := grow * f.shares[i] * r
			p.offered = func(time.Duration) float64 { return rate }
			f.ests[i].update(p.next(f.at, true))
			f.peak[i] = max(f.peak[i], p.queue*8/p.rate*1e6)
		}
	}
}

// A measured path whose capacity grew is fed its old estimate's share under wrr, so it
// never queues and no busy stretch measures it; while its partners queue, pulses raise
// its estimate by what it carries without a queue: A2's path c, measured at 3.5 Mbit/s
// and grown to 7, has its share within 10 % of 7/14 within a second (the reaction
// benchmark's target).
func TestPulseFindsACapacityIncrease(t *testing.T) {
	f := a2Flow([]float64{5e6, 2e6, 3.5e6}, []float64{5e6, 2e6, 3.5e6}, 0.03)
	f.run(2*time.Second, 1.01)
	if c := f.ests[2].est.Capacity; math.Abs(c-3.5e6) > 0.2e6 {
		t.Fatalf("path c estimated at %.2f Mbit/s at 3.5", c/1e6)
	}
	f.paths[2].rate = 7e6
	f.run(time.Second, 1.01)
	if math.Abs(f.shares[2]-0.5) > 0.05 {
		t.Errorf("shares %.3f a second later (c estimated at %.2f Mbit/s), want c at 0.5", f.shares, f.ests[2].est.Capacity/1e6)
	}
}

// A measured path fed its exact capacity holds no standing queue either while its
// partners are fed a little more: a pulse finds the queue and takes the raise back, so
// no path keeps an estimate above its capacity, and none takes more of the flow's queue
// than the flow holds on a path (raised until it queued, S1-4's 14.7 Mbit/s path
// overflowed).
func TestPulseStopsAtTheCapacity(t *testing.T) {
	caps := []float64{5e6, 2e6, 7e6}
	f := a2Flow(caps, caps, 0.03)
	f.paths[2].queue = 0
	pulses := 0
	for f.at < 6*time.Second {
		f.run(2*step, 1)
		for i, e := range f.ests {
			if e.pulse.at.Equal(t0.Add(f.at - 2*step)) {
				pulses++
			}
			if e.pulse.at.IsZero() && e.est.Capacity > 1.03*caps[i] {
				t.Fatalf("%v: path %d estimated at %.2f Mbit/s between pulses, carrying %.2f", f.at, i, e.est.Capacity/1e6, caps[i]/1e6)
			}
			if f.peak[i] > 2*0.03e6 {
				t.Fatalf("%v: path %d held %.0f ms of queue, the flow 30 ms a path", f.at, i, f.peak[i]/1e3)
			}
		}
	}
	if pulses == 0 {
		t.Fatal("no path was pulsed")
	}
}

// A pulse adds to a path's queue no more than another path in use holds standing, nor
// more than the path has held itself: its buffer takes that. After a path's capacity
// fell, the others go empty behind its queue; pulsed to that queue, A2's 5 and 2 Mbit/s
// paths were raised 2 and 3 times over, and the flow's window collapsed.
func TestPulseHeadroom(t *testing.T) {
	caps, delays := []float64{5e6, 2e6, 7e6}, []float64{100e3, 10e3, 50e3}
	for _, c := range []struct {
		name       string
		held, want float64 // µs at path 0's capacity
	}{
		{"held less than the fallen path's queue", 20e3, 20e3},
		{"held more", 400e3, 200e3},
	} {
		ests := known(caps, delays, 14e6)
		ests[0].held = c.held / 1e6 * caps[0] / 8
		ests[2].floors = []timed{{t0, 200e3}} // the fallen path's queue; path 1 holds none
		o := newOptimizer(3, t0)
		o.set = []bool{true, true, true}
		if h := o.headroom(t0, ests, 0, standMin); math.Abs(h-c.want) > 1 {
			t.Errorf("%s: headroom %.1f ms, want %.1f", c.name, h/1e3, c.want/1e3)
		}
	}
}

// A path the flow leaves short of its estimate (the window stuck behind another path's
// queue after that path's capacity fell, or cut) gets no pulse: raised, it would only get
// more of a flow that has no more to give. One that carries its estimate does.
func TestPulseOnlyForAPathThatCarriesItsEstimate(t *testing.T) {
	for _, c := range []struct {
		rate float64 // delivered, of an estimate of 5 Mbit/s
		want bool
	}{{4.4e6, false}, {5e6, true}} {
		e := known([]float64{5e6}, []float64{100e3}, 0)[0]
		for k := range 5 {
			e.deliv = append(e.deliv, delivery{t0.Add(time.Duration(k) * step), uint64(c.rate / 8 * step.Seconds() * float64(k)), false})
		}
		if got := e.carries(t0.Add(4*step), 4*step); got != c.want {
			t.Errorf("delivering %.1f Mbit/s of 5: carries %v, want %v", c.rate/1e6, got, c.want)
		}
	}
}
