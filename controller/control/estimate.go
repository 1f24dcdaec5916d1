package control

import (
	"math"
	"slices"
	"time"
)

// Observation is what one stats message says about one path in one direction: the
// sender's side from the sending agent, the rest from the receiving agent. Delays are in
// µs; NaN means "not measured in this interval".
type Observation struct {
	At        time.Time
	Interval  time.Duration
	TxBps     float64
	RxBps     float64 // delivery rate, wire bytes
	RxPackets uint64  // cumulative
	Lost      uint64  // cumulative
	Late      uint64  // cumulative
	OwdMin    float64
	OwdMean   float64
	Queue     float64 // switch-stamped queueing delay; NaN without telemetry
	DispBps   float64 // packet-pair capacity estimate
	DispN     uint64
	RxAge     time.Duration // since the last packet (data or probe) arrived; <0: never
}

// Estimate is the controller's belief about one path in one direction.
type Estimate struct {
	Alive         bool
	Capacity      float64 // bit/s on the wire; 0 until known
	CapacityKnown bool
	Base          float64 // propagation one-way delay, µs
	Queue         float64 // queueing delay now, µs
	Owd           float64 // mean one-way delay of the last interval, µs (NaN if no packets)
	Loss          float64 // fraction, smoothed
	Late          float64 // fraction of the path's packets late behind its own, smoothed
	Busy          bool    // a standing queue: the path delivers at its capacity
	RxPackets     uint64  // packets in the last interval
}

// Tuning of the estimator. Liveness must react within the 300 ms a dead path may keep
// its weight; the agent probes idle paths every 25 ms, so silence of DownAfter means the
// path, not the traffic, stopped.
const (
	DownAfter      = 120 * time.Millisecond
	UpAfter        = 60 * time.Millisecond
	telemetryWin   = time.Second      // base from OWD − switch queue: tracks changes fast
	minOnlyWin     = 10 * time.Second // base from minimum OWD: must outlast queues
	stepConfirm    = time.Second      // a shift of the minimum held this long is a new base
	minBusyQueueUs = 1500
	dispKeep       = 12 // recent dispersion estimates kept for a median
)

type timed struct {
	at time.Time
	v  float64
}

type pathEstimator struct {
	est       Estimate
	prev      Observation
	hasPrev   bool
	baseWin   []timed // per-interval base samples
	dispRates []float64
}

func newPathEstimator() *pathEstimator {
	return &pathEstimator{est: Estimate{Alive: true, Base: math.NaN(), Queue: math.NaN(), Owd: math.NaN()}}
}

// update folds one observation in and returns the new estimate.
func (e *pathEstimator) update(o Observation) Estimate {
	est := &e.est
	switch {
	case o.RxAge < 0 || o.RxAge > DownAfter:
		est.Alive = false
	case o.RxAge < UpAfter:
		est.Alive = true
	}

	telemetry := !math.IsNaN(o.Queue)
	sample := o.OwdMin
	if telemetry && !math.IsNaN(o.OwdMean) {
		sample = o.OwdMean - o.Queue
	}
	if !math.IsNaN(sample) {
		e.baseWin = append(e.baseWin, timed{o.At, sample})
	}
	win := minOnlyWin
	if telemetry {
		win = telemetryWin
	}
	e.baseWin = slices.DeleteFunc(e.baseWin, func(s timed) bool { return o.At.Sub(s.at) > win })
	est.Base = windowMin(e.baseWin, o.At, win)
	if !telemetry {
		// A minimum that stayed above the base for a whole second, and barely moved, is a
		// longer path, not a queue (queues breathe with the flow).
		recent := windowMin(e.baseWin, o.At, stepConfirm)
		if spread := windowMax(e.baseWin, o.At, stepConfirm) - recent; recent > est.Base+5000 && spread < 1000 &&
			e.span(o.At) >= stepConfirm {
			e.baseWin = slices.DeleteFunc(e.baseWin, func(s timed) bool { return o.At.Sub(s.at) > stepConfirm })
			est.Base = recent
		}
	}
	est.Owd = o.OwdMean
	switch {
	case telemetry:
		est.Queue = o.Queue
	case !math.IsNaN(o.OwdMean) && !math.IsNaN(est.Base):
		est.Queue = max(0, o.OwdMean-est.Base)
	default:
		est.Queue = 0
	}

	var dRx, dLost, dLate uint64
	if e.hasPrev {
		dRx = o.RxPackets - e.prev.RxPackets
		dLost = o.Lost - e.prev.Lost
		dLate = o.Late - e.prev.Late
	}
	est.RxPackets = dRx
	if n := dRx + dLost; n > 0 {
		est.Loss = 0.8*est.Loss + 0.2*float64(dLost)/float64(n)
	}
	if dRx > 0 {
		est.Late = 0.8*est.Late + 0.2*float64(dLate)/float64(dRx)
	}

	// Capacity. With a standing queue the path delivers exactly its capacity; otherwise
	// packet pairs bound it, and whatever it delivered is a floor.
	serial := 0.0
	if est.Capacity > 0 {
		serial = 1514 * 8 / est.Capacity * 1e6
	}
	est.Busy = dRx >= 4 && est.Queue > max(minBusyQueueUs, 2*serial)
	if o.DispN >= 2 && o.DispBps > 0 {
		e.dispRates = append(e.dispRates, o.DispBps)
		if len(e.dispRates) > dispKeep {
			e.dispRates = e.dispRates[1:]
		}
	}
	switch {
	case est.Busy && o.RxBps > 0:
		if est.CapacityKnown {
			est.Capacity = 0.6*est.Capacity + 0.4*o.RxBps
		} else {
			est.Capacity = o.RxBps
		}
		est.CapacityKnown = true
	case len(e.dispRates) > 0:
		d := median(e.dispRates)
		if !est.CapacityKnown {
			est.Capacity = d
		} else if d > est.Capacity {
			// Pairs say more than the last busy period showed: lean towards them slowly,
			// since receive batching can squeeze pair gaps.
			est.Capacity = 0.9*est.Capacity + 0.1*d
		}
		est.CapacityKnown = true
	}
	if o.RxBps > est.Capacity && dRx >= 4 {
		est.Capacity = o.RxBps
		est.CapacityKnown = true
	}
	e.prev, e.hasPrev = o, true
	return *est
}

func (e *pathEstimator) span(now time.Time) time.Duration {
	if len(e.baseWin) == 0 {
		return 0
	}
	return now.Sub(e.baseWin[0].at)
}

func windowMin(s []timed, now time.Time, win time.Duration) float64 {
	m := math.NaN()
	for _, x := range s {
		if now.Sub(x.at) <= win && (math.IsNaN(m) || x.v < m) {
			m = x.v
		}
	}
	return m
}

func windowMax(s []timed, now time.Time, win time.Duration) float64 {
	m := math.NaN()
	for _, x := range s {
		if now.Sub(x.at) <= win && (math.IsNaN(m) || x.v > m) {
			m = x.v
		}
	}
	return m
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
