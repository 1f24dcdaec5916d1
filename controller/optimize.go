package controller

// The optimiser's core: decide turns the estimates into the split the sending agent
// holds for the next interval. Its concerns have their own files: pathset.go (which
// paths), loadmode.go (edpf or wrr), arrival.go (evening the paths' arrivals), feed.go
// (a flow's slow start), congestion.go (the early congestion signal), ackpath.go (the
// path of the ACKs), hysteresis.go (when a new target is news).

import (
	"math"
	"slices"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/model"
)

// target is what the optimiser wants the sending agent to hold.
type target struct {
	mode    pb.Mode
	up      []bool
	weights []float64 // wrr
	est     []*pb.PathEstimate
	ackPath string // the path that carries ACK-sized packets; "": they follow the split
	signal  bool   // give the flow one congestion signal now
	trigger *pb.SignalTrigger
	kept    float64 // the share of its window a flow keeps at a loss (0: not set)
}

// shares is the fraction of the packets each path gets under t.
func (t target) shares() []float64 {
	n := len(t.up)
	w := make([]float64, n)
	for i := range w {
		if !t.up[i] {
			continue
		}
		// A split adopted from a sender may lack weights or estimates for its mode.
		switch {
		case t.mode == pb.Mode_MODE_RR:
			w[i] = 1
		case t.mode == pb.Mode_MODE_WRR && i < len(t.weights):
			w[i] = t.weights[i]
		case t.mode == pb.Mode_MODE_EDPF && i < len(t.est):
			w[i] = t.est[i].GetRateBps()
		}
	}
	var sum float64
	for _, v := range w {
		sum += v
	}
	for i := range w {
		if sum > 0 {
			w[i] /= sum
		}
	}
	return w
}

// optimizer holds one direction's decisions between intervals.
type optimizer struct {
	load       float64 // smoothed delivery rate of the direction, bit/s
	bulk       bool
	full       bool // the direction's packets are full-sized (see fullSized)
	lightSince time.Time

	set      []bool // paths the split may use
	setLive  []bool // paths that were alive when set was chosen
	setMode  model.Mode
	setSince time.Time
	corr     []float64 // arrival correction per path, µs
	starved  []int     // consecutive intervals a path in use showed no queue while another did
	// probed: the sender is a host agent, whose probe trains measure the paths a split
	// leaves idle (a split switch sends none); unknownSince is when each live path was
	// first seen without a known capacity (see waitForTrains).
	probed       bool
	unknownSince []time.Time
	reason       string
	predict      float64
	signalAt     time.Time // last congestion signal
	signals      int       // congestion signals given
	signalQ      float64   // the paths' mean queue at the last one, µs
	lastQueue    float64   // the paths' mean queue at the previous decision, µs
	starting     bool      // no flow has filled the split since the direction was idle
	solo         solo      // the single-path guard (see guardSingle)
	startAt      time.Time // the first busy decision of that flow
	startSigs    int       // signals given before it
	trigger      *pb.SignalTrigger
	trigRates    []timed // the split's summed capacity at each decision, over triggerKeep
	triggered    uint32  // signals the sender's trigger gave, as last reported (seenTrig)
	seenTrig     bool
	byTrigger    int // of signals, those the sender's trigger gave
	// ackBase is the base one-way delay of the path the direction's ACKs return on, µs
	// (0 until the controller has routed them): with the forward base it makes the flow's
	// round trip, the clocks' offset cancelling between the two directions.
	ackBase float64
	// seen is the share of the paths' random losses that reaches TCP: 1, or less where the
	// tunnel repairs them before TCP sees the hole (see direction.unrepaired).
	seen float64
	// inOrder: the receiver resequences, so every packet reaches TCP as late as the
	// slowest path in use delivers (see flowRTT).
	inOrder bool
	flows   float64 // the data flows the receiver counts (0: not counted); see signalLevel
}

// A direction starts as bulk: a flow starting on the fastest path alone and then spread
// by weight meets reordering when TCP's tolerance is smallest (min_rtt/4), which costs a
// burst of spurious retransmissions and seconds of slow cubic growth; a light flow merely
// spends its first seconds striped.
func newOptimizer(n int, now time.Time) *optimizer {
	return &optimizer{corr: make([]float64, n), starved: make([]int, n), unknownSince: make([]time.Time, n), bulk: true, starting: true, solo: newSolo(), seen: 1}
}

// decide chooses the split for the next interval. override is "auto" or a fixed mode;
// weights, when set, are the operator's.
func (o *optimizer) decide(now time.Time, ests []*pathEstimator, override string, weights []float64, tcp model.TCP) target {
	n := len(ests)
	t := target{up: make([]bool, n)}
	for i, e := range ests {
		t.up[i] = e.est.Alive
	}
	switch override {
	case "rr":
		t.mode, t.est = pb.Mode_MODE_RR, o.estimates(ests, make([]bool, n))
		o.reason = "operator: rr"
		return t
	case "wrr":
		t.mode, t.weights, t.est = pb.Mode_MODE_WRR, o.wrrWeights(ests, weights), o.estimates(ests, make([]bool, n))
		o.reason = "operator: wrr"
		return t
	case "edpf":
		t.mode, t.est = pb.Mode_MODE_EDPF, o.estimates(ests, allTrue(n))
		o.reason = "operator: edpf"
		return t
	}
	if countTrue(t.up) == 0 {
		t.mode, t.weights = pb.Mode_MODE_WRR, equal(n)
		o.reason = "every path is down, or none has carried a packet yet"
		return t
	}
	o.inOrder, o.flows = tcp.Resequenced, tcp.Flows
	mode := model.EDPF
	if o.bulkLoad(now, ests) {
		mode = model.WRR
	}
	// Not while a flow starts: slow start's bursts queue the paths unevenly, and the start's
	// feed (feedFast) makes one path the one that queues on purpose.
	if o.set != nil && !o.starting {
		o.probe(now, ests, mode) // before the weights are read from the capacities
	}
	choice := o.chooseSet(now, ests, mode, tcp)
	if mode == model.WRR {
		t.mode, t.weights = pb.Mode_MODE_WRR, o.feedFast(now, ests, balance(ests, choice), tcp)
		// BBR paces at the rate it measured and does not cut its window on a loss: a
		// signal would cost it a retransmission and shorten no queue.
		if tcp.CC != model.BBR {
			t.signal = o.congested(now, ests, t.weights)
			o.trigger = o.triggerFor(now, ests, t.weights)
			t.trigger = o.trigger
		}
		t.est = o.estimates(ests, o.set) // the probe trains' capacities
		return t
	}
	o.correct(ests)
	t.mode, t.est = pb.Mode_MODE_EDPF, o.estimates(ests, o.set)
	t.trigger = o.trigger // for the bulk flow that may follow
	return t
}

// estimates are edpf's inputs for the paths of set, and every path's capacity where it is
// measured and its delay spread, which size the sending agent's probe trains; a capacity
// of 0 asks for more trains.
func (o *optimizer) estimates(ests []*pathEstimator, set []bool) []*pb.PathEstimate {
	out := make([]*pb.PathEstimate, len(ests))
	for i, e := range ests {
		pe := &pb.PathEstimate{}
		if e.measured() {
			pe.CapacityBps = e.est.Capacity
		}
		pe.SpreadUs = e.est.Spread
		base := e.est.Base
		if math.IsNaN(base) {
			base = 0
		}
		pe.DelayUs = math.Max(0, base+o.corr[i])
		if set[i] {
			pe.RateBps = capacity(ests, i)
		}
		out[i] = pe
	}
	return out
}

func (o *optimizer) wrrWeights(ests []*pathEstimator, manual []float64) []float64 {
	if manual != nil {
		return slices.Clone(manual)
	}
	w := make([]float64, len(ests))
	for i, e := range ests {
		w[i] = 1
		if e.est.CapacityKnown && e.est.Capacity > 0 {
			w[i] = e.est.Capacity
		}
	}
	return w
}

func equal(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	return w
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
