// Package split turns path weights into the slot tables Plait's datapaths stripe by: the
// host sender's wrr table (HostSlots, in the eBPF config) and a switch's split table. The
// predictor (model) takes its wrr shares from Apportion too, because a share rounded to a
// slot is what the packets get: 0.4 % too much on one lane is a queue that grows by 0.4 %
// of a second every second. Docs: docs/datapath.md (sender) and docs/model.md (P2).
package split

import (
	"errors"
	"fmt"
	"math"
)

// HostSlots is the length of the host sender's wrr table; WRR_SLOTS in
// ebpf/include/consts.h, which tests/wireformat checks it against.
const HostSlots = 1024

// Check rejects weights a split cannot use, naming the problem.
func Check(weights []float64, paths int) error {
	if len(weights) != paths {
		return fmt.Errorf("%d weights for %d paths: give one weight per path", len(weights), paths)
	}
	var total float64
	for i, w := range weights {
		switch {
		case math.IsNaN(w) || math.IsInf(w, 0):
			return fmt.Errorf("weight %d is %v: weights must be finite numbers", i+1, w)
		case w < 0:
			return fmt.Errorf("weight %d is %v: weights must not be negative", i+1, w)
		}
		total += w
	}
	if total == 0 {
		return errors.New("all weights are 0: at least one path needs a positive weight")
	}
	if math.IsInf(total, 0) {
		return fmt.Errorf("weights %v sum past the largest number: give them on a smaller scale (only their ratios count)", weights)
	}
	return nil
}

// Apportion gives each path its whole number of n slots in proportion to weights:
// ⌊n·w/Σw⌋, and the slots left over to the largest remainders (Hamilton's method), so
// every share is within one slot of exact.
func Apportion(weights []float64, n int) ([]int, error) {
	if err := Check(weights, len(weights)); err != nil {
		return nil, err
	}
	var total float64
	for _, w := range weights {
		total += w
	}
	shares := make([]int, len(weights))
	type rem struct {
		i int
		r float64
	}
	rems := make([]rem, 0, len(weights))
	left := n
	for i, w := range weights {
		exact := float64(n) * (w / total) // w/total first: n·w may overflow
		shares[i] = int(exact)
		left -= shares[i]
		if w > 0 {
			rems = append(rems, rem{i, exact - float64(shares[i])})
		}
	}
	for ; left > 0; left-- {
		best := 0
		for j := range rems {
			if rems[j].r > rems[best].r {
				best = j
			}
		}
		shares[rems[best].i]++
		rems[best].r = -1
	}
	return shares, nil
}

// Smooth spreads n slots over paths by Apportion's shares, interleaved as evenly as
// possible (smooth weighted round robin): never two slots of a path in a row unless its
// share demands it.
func Smooth(weights []float64, n int) ([]uint8, error) {
	shares, err := Apportion(weights, n)
	if err != nil {
		return nil, err
	}
	slots := make([]uint8, n)
	current := make([]int, len(shares))
	for s := range slots {
		best := -1
		for i, sh := range shares {
			if sh == 0 {
				continue
			}
			current[i] += sh
			if best < 0 || current[i] > current[best] {
				best = i
			}
		}
		current[best] -= n
		slots[s] = uint8(best)
	}
	return slots, nil
}
