package model

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// MaxSubsetPaths bounds BestSubset's enumeration of 2^n − 1 path sets.
const MaxSubsetPaths = 12

// Choice is a path set and split with its prediction.
type Choice struct {
	Paths      []int      `json:"paths"` // indices of the chosen paths, ascending
	Split      Split      `json:"split"` // weights over all input paths, 0 for unused ones
	Prediction Prediction `json:"prediction"`
}

// BestSubset returns the set of paths, and for wrr the weights, that maximise the
// predicted goodput of the flow under mode. It tries every non-empty subset (255 for 8
// paths); wrr gets rate-proportional weights and, on sets of two or more, the same with
// the highest-delay path's weight halved and quartered. Ties go to the smaller set, then
// to the earlier candidate, so an unchanged input gives an unchanged answer.
func BestSubset(paths []Path, mode Mode, tcp TCP) (Choice, error) {
	tcp = tcp.WithDefaults()
	if err := validatePaths(paths); err != nil {
		return Choice{}, fmt.Errorf("best subset: %w", err)
	}
	if err := tcp.validate(); err != nil {
		return Choice{}, fmt.Errorf("best subset: %w", err)
	}
	if mode < RR || mode > EDPF {
		return Choice{}, fmt.Errorf("best subset: unknown mode %d", mode)
	}
	n := len(paths)
	if n > MaxSubsetPaths {
		return Choice{}, fmt.Errorf("best subset: %d paths; at most %d can be enumerated", n, MaxSubsetPaths)
	}
	masks := make([]uint, 0, 1<<n-1)
	for m := uint(1); m < 1<<n; m++ {
		masks = append(masks, m)
	}
	slices.SortStableFunc(masks, func(a, b uint) int { return bits.OnesCount(a) - bits.OnesCount(b) })

	var best Choice
	bestGood := math.Inf(-1)
	try := func(w []float64) {
		sp := Split{Mode: mode, Weights: w}
		ws, _ := splitWeights(paths, sp)
		var p Prediction
		if mode == EDPF {
			p = predictEDPF(paths, ws, tcp)
		} else {
			p = solve(paths, fixedSplit(paths, ws, mode, tcp), tcp)
		}
		if p.Goodput > bestGood*(1+1e-9) {
			bestGood = p.Goodput
			best = Choice{Split: sp, Prediction: p}
		}
	}
	for _, m := range masks {
		w := make([]float64, n)
		slowest := -1
		for i := range n {
			if m&(1<<i) == 0 {
				continue
			}
			w[i] = 1
			if mode == WRR {
				w[i] = paths[i].Rate
			}
			if slowest < 0 || paths[i].Delay > paths[slowest].Delay {
				slowest = i
			}
		}
		try(w)
		if mode == WRR && bits.OnesCount(m) > 1 {
			for _, scale := range []float64{0.5, 0.25} {
				v := slices.Clone(w)
				v[slowest] *= scale
				try(v)
			}
		}
	}
	for i, x := range best.Split.Weights {
		if x > 0 {
			best.Paths = append(best.Paths, i)
		}
	}
	return best, nil
}

// Best returns the best choice over the given modes (all three when none are given):
// the path set, weights and scheduler with the highest predicted goodput. Ties go to
// the earlier mode.
func Best(paths []Path, tcp TCP, modes ...Mode) (Choice, error) {
	if len(modes) == 0 {
		modes = []Mode{RR, WRR, EDPF}
	}
	var best Choice
	for i, m := range modes {
		c, err := BestSubset(paths, m, tcp)
		if err != nil {
			return Choice{}, err
		}
		if i == 0 || c.Prediction.Goodput > best.Prediction.Goodput*(1+1e-9) {
			best = c
		}
	}
	return best, nil
}
