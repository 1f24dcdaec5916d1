package model

import (
	"fmt"
	"math"
	"math/big"
	"time"
)

// Rounding says how the paper's fractional C_i (eq. 16 adds F(C) and 1/w) becomes the
// whole number of segments a round sends, which eqs. (2)–(13) and (17) need.
type Rounding int

const (
	RoundNearest Rounding = iota // default: halves round up
	RoundDown
	RoundUp
)

// QueueTerm is the queueing term of eq. (3), the serialisation of the segments ahead of
// segment j on its link.
type QueueTerm int

const (
	// QueueFloorPlusOne is eq. (3) as printed: (⌊j/n⌋ + 1)·8s/b. The default, because the
	// baseline must be the paper's model.
	QueueFloorPlusOne QueueTerm = iota
	// QueueCeil is ⌈j/n⌉·8s/b, arguably what was meant: segment j is the ⌈j/n⌉-th of the
	// round on its link when the round starts on link 1.
	QueueCeil
)

// Paper model defaults (Table 2 of the paper, and Plait's choices for what it leaves out).
const (
	DefaultSegment    = 536                    // s, bytes
	DefaultAckEvery   = 2                      // m_ACK
	DefaultInitWindow = 1.0                    // W_l, segments (536 B)
	DefaultSSThresh   = 65535.0 / 536          // W_s, segments (65535 B)
	DefaultBytes      = 1 << 20                // E, bytes to transfer: 1 MiB
	DefaultDelayedAck = 200 * time.Millisecond // ns-3's delayed-ACK timer
	// maxPaperSegments bounds E/s: every segment is at least half a round of iteration.
	maxPaperSegments = 2_000_000
)

// PaperOptions are the inputs of seed 002's model that are not the links. The zero value
// of every field means its default, so PaperOptions{} is the paper's Table 2 setting.
type PaperOptions struct {
	Segment    int     // s in bytes; DefaultSegment
	AckEvery   int     // m_ACK; DefaultAckEvery
	InitWindow float64 // W_l in segments; DefaultInitWindow
	SSThresh   float64 // W_s in segments; DefaultSSThresh
	// Bytes is E, the transfer size that ends the iteration (eq. 19). The paper does not
	// give it; a lab comparison should pass the bytes the lab run moved.
	Bytes      float64
	Rounding   Rounding
	QueueTerm  QueueTerm
	Single     SingleSegment
	DelayedAck time.Duration // timer of SingleDelayedAck; DefaultDelayedAck
	// FoldReverse makes d_l the round trip of a symmetric lab path (twice its one-way
	// delay) instead of the paper's forward delay with a zero reverse path.
	FoldReverse bool
}

func (o PaperOptions) withDefaults() PaperOptions {
	if o.Segment == 0 {
		o.Segment = DefaultSegment
	}
	if o.AckEvery == 0 {
		o.AckEvery = DefaultAckEvery
	}
	if o.InitWindow == 0 {
		o.InitWindow = DefaultInitWindow
	}
	if o.SSThresh == 0 {
		o.SSThresh = DefaultSSThresh
	}
	if o.Bytes == 0 {
		o.Bytes = DefaultBytes
	}
	if o.DelayedAck == 0 {
		o.DelayedAck = DefaultDelayedAck
	}
	return o
}

func (o PaperOptions) validate() error {
	switch {
	case o.Segment < 1:
		return fmt.Errorf("segment size %d bytes: must be at least 1", o.Segment)
	case o.AckEvery < 1:
		return fmt.Errorf("m_ACK %d: the receiver acknowledges every 1 or more segments", o.AckEvery)
	case !(o.InitWindow >= 1) || math.IsInf(o.InitWindow, 0):
		return fmt.Errorf("initial window %v segments: must be at least 1", o.InitWindow)
	case !(o.SSThresh >= o.InitWindow) || math.IsInf(o.SSThresh, 0):
		return fmt.Errorf("slow-start threshold %v segments: must be finite and at least the initial window %v", o.SSThresh, o.InitWindow)
	case !(o.Bytes >= 1) || o.Bytes/float64(o.Segment) > maxPaperSegments:
		return fmt.Errorf("bytes to transfer %v: must be at least 1 and at most %d segments", o.Bytes, maxPaperSegments)
	case o.DelayedAck < 0:
		return fmt.Errorf("delayed-ACK timer %v: must not be negative", o.DelayedAck)
	case o.Rounding < RoundNearest || o.Rounding > RoundUp:
		return fmt.Errorf("unknown rounding %d", o.Rounding)
	case o.QueueTerm < QueueFloorPlusOne || o.QueueTerm > QueueCeil:
		return fmt.Errorf("unknown queue term %d", o.QueueTerm)
	case o.Single < SingleCaseI || o.Single > SingleDelayedAck:
		return fmt.Errorf("unknown single-segment rule %d", o.Single)
	}
	return nil
}

// PaperResult is the outcome of the paper's iteration, eqs. (17)–(19).
type PaperResult struct {
	Throughput float64 `json:"throughput_bps"` // E/T̂
	Duration   float64 `json:"duration_s"`     // T̂, eq. (18)
	Bytes      float64 `json:"bytes"`          // s·ΣC_k, eq. (17), the first sum to reach E
	Rounds     int     `json:"rounds"`
	// SteadyC is the mean number of segments per round over the last quarter of the
	// rounds: where the recursion settles (2–3 for m_ACK = 2).
	SteadyC float64 `json:"steady_c"`
}

// LinkIndex is eq. (2): the 1-based link of the j-th segment of a round when the rounds
// before it sent `before` = Σ_{k<i} C_k segments in all, over n links.
func LinkIndex(j, before, n int) int { return (j-1+before)%n + 1 }

// ArrivalTime is eq. (3), D_{i,j}: the time from the round's start until its j-th
// segment, on link l = LinkIndex(j, before, n), reaches the receiver. Delays are in
// seconds, rates in bit/s, the segment in bytes; exact.
func ArrivalTime(j, n int, segment int, rate, delay *big.Rat, q QueueTerm) *big.Rat {
	ahead := j/n + 1
	if q == QueueCeil {
		ahead = (j + n - 1) / n
	}
	t := new(big.Rat).SetInt64(int64(8 * segment * ahead))
	t.Quo(t, rate)
	return t.Add(t, delay)
}

// DelayDifference is eq. (21), D_{i,k} − D_{i,1} written through the two links' delay and
// bandwidth differences. It is only valid for n ≥ 2 (it assumes ⌊1/n⌋ = 0), and only for
// QueueFloorPlusOne.
func DelayDifference(k, n, segment int, d1, dk, b1, bk *big.Rat) *big.Rat {
	s := big.NewRat(int64(8*segment), 1)
	t := new(big.Rat).Sub(dk, d1)
	bw := new(big.Rat).Sub(b1, bk)
	bw.Mul(bw, s)
	bw.Quo(bw, new(big.Rat).Mul(bk, b1))
	t.Add(t, bw)
	q := new(big.Rat).Mul(big.NewRat(int64(k/n), 1), s)
	return t.Add(t, q.Quo(q, bk))
}

// roundCache keeps the float weights and F(C) of each C met in one iteration: the
// recursion revisits the same two or three values thousands of times.
type roundCache struct {
	mack int
	w    map[int][]float64
	f    map[int]float64
}

func (rc *roundCache) get(c int) ([]float64, float64) {
	if w, ok := rc.w[c]; ok {
		return w, rc.f[c]
	}
	wr, fr := RoundWeights(c, rc.mack)
	w := make([]float64, len(wr))
	for i, x := range wr {
		w[i], _ = x.Float64()
	}
	f, _ := fr.Float64()
	rc.w[c], rc.f[c] = w, f
	return w, f
}

// Paper runs seed 002's model (eqs. 1–19, eq. 9 corrected) for one TCP flow striped round
// robin over the given paths; only each path's Rate and Delay are used.
func Paper(paths []Path, o PaperOptions) (PaperResult, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return PaperResult{}, fmt.Errorf("paper model: %w", err)
	}
	if err := validatePaths(paths); err != nil {
		return PaperResult{}, fmt.Errorf("paper model: %w", err)
	}
	n := len(paths)
	d := make([]float64, n)
	b := make([]float64, n)
	for i, p := range paths {
		d[i] = p.Delay.Seconds()
		if o.FoldReverse {
			d[i] *= 2
		}
		b[i] = p.Rate
	}
	seg := float64(o.Segment)
	rc := &roundCache{mack: o.AckEvery, w: map[int][]float64{}, f: map[int]float64{}}
	is := o.SSThresh - o.InitWindow // eq. (14)

	var res PaperResult
	c, w := o.InitWindow, o.InitWindow
	before := 0
	var lastCs []int
	for i := 1; ; i++ {
		ci := roundC(c, o.Rounding)
		weights, f := rc.get(ci)
		// Eq. (12) with eq. (3) for the arrival times it weighs.
		var t float64
		for j := 1; j <= len(weights); j++ {
			l := LinkIndex(j, before, n) - 1
			ahead := float64(j/n + 1)
			if o.QueueTerm == QueueCeil {
				ahead = float64((j + n - 1) / n)
			}
			t += weights[j-1] * (ahead*8*seg/b[l] + d[l])
		}
		if ci == 1 && o.AckEvery >= 2 && o.Single == SingleDelayedAck {
			t += o.DelayedAck.Seconds()
		}
		res.Bytes += seg * float64(ci) // eq. (17)
		res.Duration += t              // eq. (18)
		res.Rounds = i
		lastCs = append(lastCs, ci)
		if res.Bytes >= o.Bytes {
			break
		}
		// Eqs. (15)–(16): slow start adds one segment per round, congestion avoidance 1/w.
		if float64(i) < is {
			c, w = f+1, w+1
		} else {
			c, w = f+1/w, w+1/w
		}
		before += ci
	}
	res.Throughput = 8 * o.Bytes / res.Duration // eq. (19)
	tail := lastCs[len(lastCs)*3/4:]
	for _, x := range tail {
		res.SteadyC += float64(x)
	}
	res.SteadyC /= float64(len(tail))
	return res, nil
}

func roundC(c float64, r Rounding) int {
	var v float64
	switch r {
	case RoundDown:
		v = math.Floor(c)
	case RoundUp:
		v = math.Ceil(c)
	default:
		v = math.Floor(c + 0.5)
	}
	return max(int(v), 1)
}
