package controller

import (
	"fmt"
	"math"

	"github.com/plait/plait/wire"
)

// The path of a striped direction's ACKs. The reasons: docs/controller.md#ack-path.
const (
	ackMargin = 1.2 // the round trip exceeds the delay skew by this: Linux's reorder window
	// ackWire is an ACK on the wire, bytes: Ethernet, the encapsulation and tag, and IPv4
	// and TCP with timestamps and a SACK block.
	ackWire = 14 + wire.EncapLen + wire.TagLen + 64
	ackRoom = 0.5 // the ACKs take at most this share of their path: more, and they queue
)

// ackReturn is the base one-way delay of the direction's ACKs, µs: their path's once the
// controller has routed them, until then the fastest path's (minBase).
func (o *optimizer) ackReturn(minBase float64) float64 {
	if o.ackBase > 0 {
		return o.ackBase
	}
	return minBase
}

// ackPath picks the path that carries the ACKs of a direction whose opposite direction
// stripes by wrr: the fastest live path that makes the round trip, as the data spreads
// over the forward paths, exceed their delay skew by ackMargin; when none does, the
// slowest. One path for all ACKs: spread over paths of different delays, the ACKs that
// take fast paths carry SACK blocks for data that came on fast paths, and the sender
// learns of it early. Linux then sees the whole skew as reordering, with a reordering
// window of a quarter of the shortest round trip it sampled, and retransmits spuriously.
// It returns -1 while the delays are not known. A forward direction whose receiver
// resequences (inOrder) shows TCP no skew at all, so its ACKs take the fastest path: on
// fat+thin they went to the 1 Mbit/s, 101 ms path by the skew rule, and a 50 Mbit/s
// flow's ACK stream collapsed the flow.
//
// The path must also have room for the ACKs of the rate the forward split can carry,
// one ACK every two full-sized segments (Linux's delayed ACK), within ackRoom of its
// capacity, if any path does: on sweep-3-04 the fastest return path was 1 Mbit/s with a
// 10-packet queue, and the ACKs of a 50 Mbit/s split (2.3 Mbit/s of them) were lost and
// queued there; auto got 13 % of the ideal link.
func ackPath(fwd []*pathEstimator, shares []float64, rev []*pathEstimator, inOrder bool) (int, string) {
	var mean, split float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, e := range fwd {
		if i >= len(shares) || shares[i] == 0 {
			continue
		}
		if math.IsNaN(e.est.Base) {
			return -1, ""
		}
		mean += shares[i] * e.est.Base
		split += capacity(fwd, i)
		lo, hi = math.Min(lo, e.est.Base), math.Max(hi, e.est.Base)
	}
	if math.IsInf(lo, 0) {
		return -1, ""
	}
	skew := hi - lo
	if inOrder {
		skew = 0
	}
	acks := split / (2 * frameBits) * ackWire * 8 // bit/s
	pick := func(room bool) (best int) {
		best, slowest := -1, -1
		for j, e := range rev {
			if !e.est.Alive || math.IsNaN(e.est.Base) || room && e.est.CapacityKnown && ackRoom*e.est.Capacity < acks {
				continue
			}
			if slowest < 0 || e.est.Base > rev[slowest].est.Base {
				slowest = j
			}
			if mean+e.est.Base >= ackMargin*skew && (best < 0 || e.est.Base < rev[best].est.Base) {
				best = j
			}
		}
		if best < 0 {
			best = slowest
		}
		return best
	}
	best := pick(true)
	if best < 0 {
		best = pick(false) // no path has the room: the ACKs go as if all had
	}
	if best < 0 {
		return -1, ""
	}
	return best, fmt.Sprintf("ACKs on path %d: round trip %.0f ms over a delay skew of %.0f ms, %.2f Mbit/s of them", best, (mean+rev[best].est.Base)/1e3, skew/1e3, acks/1e6)
}
