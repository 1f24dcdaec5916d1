package model

import (
	"math/big"
)

// This file holds the paper's analysis of one transmission round, eqs. (4)–(13) and
// (20)–(21), in exact rational arithmetic: the probabilities are ratios of factorials and
// the checks in MODEL.md are exact fractions.

// factorial returns n! (n ≥ 0).
func factorial(n int) *big.Int {
	return new(big.Int).MulRange(1, int64(max(n, 1)))
}

// fallingRatio returns a!/b! for a ≥ b ≥ 0.
func fallingRatio(a, b int) *big.Int {
	if a == b {
		return big.NewInt(1)
	}
	return new(big.Int).MulRange(int64(b+1), int64(a))
}

func ratInt(num, den *big.Int) *big.Rat { return new(big.Rat).SetFrac(num, den) }

// FirstArrivalProb is eq. (4) with the paper's uniformity assumption: the probability
// 1/C that the round's first segment is also the first to arrive.
func FirstArrivalProb(c int) *big.Rat { return big.NewRat(1, int64(c)) }

// MDist is the distribution of m, the number of in-order segments that arrive before the
// first out-of-order one, given that the round's first segment arrives first (case I).
// Element k−1 is P(m = k | F) for k = 1…C. For k ≤ C−2 it is the summand of eqs. (5)–(6),
// (C−k−1)·(C−k−1)!/(C−1)!; k = C−1 is impossible (the last segment is then in order too);
// k = C is the 1/(C−1)! term of eq. (6).
func MDist(c int) []*big.Rat {
	d := make([]*big.Rat, c)
	den := factorial(c - 1)
	for k := 1; k <= c-2; k++ {
		num := new(big.Int).Mul(big.NewInt(int64(c-k-1)), factorial(c-k-1))
		d[k-1] = ratInt(num, den)
	}
	if c >= 2 {
		d[c-2] = new(big.Rat)
	}
	d[c-1] = ratInt(big.NewInt(1), den)
	return d
}

// QDist is the corrected eq. (9): the distribution of q, the number of segments the first
// non-duplicate ACK acknowledges when the round's first segment is not the first to
// arrive (case II). Element k−1 is P(q = k | not F) for k = 1…C; C must be at least 2.
// The printed eq. (9) has the factor (C−k−1) where the factorial (C−k−1)! belongs.
func QDist(c int) []*big.Rat {
	d := make([]*big.Rat, c)
	fc1 := factorial(c - 1)
	notF := new(big.Int).Sub(factorial(c), fc1) // C! − (C−1)!
	d[0] = ratInt(new(big.Int).Mul(big.NewInt(int64(c-2)), fc1), new(big.Int).Lsh(notF, 1))
	for k := 2; k < c; k++ {
		sum := new(big.Int)
		for l := k + 1; l <= c; l++ {
			term := fallingRatio(l-2, l-k-1)
			sum.Add(sum, term.Mul(term, big.NewInt(int64(c-l+1))))
		}
		d[k-1] = ratInt(sum.Mul(sum, factorial(c-k-1)), notF)
	}
	d[c-1] = ratInt(fc1, notF)
	return d
}

// SingleSegment says what a round of one segment does when the receiver acknowledges
// every m_ACK ≥ 2 segments. The paper's formulas need C ≥ 2 there (they contain
// (C−k−1)! with C−k−1 < 0), and the first round has C = W_l = 1.
type SingleSegment int

const (
	// SingleCaseI extends the paper's own case-I rule (m < m_ACK gives T = D_m and
	// A = m) to m = C = 1: T = D_1, A = 1. This is the default: it adds no parameter.
	SingleCaseI SingleSegment = iota
	// SingleDelayedAck waits for the receiver's delayed-ACK timer as a real stack does:
	// T = D_1 + PaperOptions.DelayedAck, A = 1.
	SingleDelayedAck
)

// RoundWeights returns the exact weights of E(T_i) over the arrival times D_1…D_K,
// K = min(C, m_ACK), and F(C) = E(A_{i+1}), by eqs. (7), (8), (10), (11), (12), (13):
//
//	E(T) = E''(T) + (E'(T) − E''(T))/C,   E''(T) = D_1,   E'(T) = Σ_k P(m = k | F)·D_min(k, m_ACK)
//
// For m_ACK ≤ C−1 the case-I sums are exactly eqs. (7)–(8); for larger m_ACK they extend
// the paper's rule that fewer than m_ACK in-order segments are acknowledged as they are.
// For C = 1 the timer of SingleDelayedAck is not included here (see Paper).
func RoundWeights(c, mack int) (weights []*big.Rat, f *big.Rat) {
	k := min(c, mack)
	weights = make([]*big.Rat, k)
	for i := range weights {
		weights[i] = new(big.Rat)
	}
	ePrimeA := new(big.Rat)
	for m, p := range MDist(c) {
		a := min(m+1, mack)
		weights[a-1].Add(weights[a-1], p)
		ePrimeA.Add(ePrimeA, new(big.Rat).Mul(p, big.NewRat(int64(a), 1)))
	}
	invC := FirstArrivalProb(c)
	if c == 1 {
		return weights, ePrimeA
	}
	// E(T) = D_1·(1 − 1/C) + (1/C)·Σ w'_k D_k.
	for i := range weights {
		weights[i].Mul(weights[i], invC)
	}
	weights[0].Add(weights[0], new(big.Rat).Sub(big.NewRat(1, 1), invC))
	eSecondA := new(big.Rat)
	for q, p := range QDist(c) {
		eSecondA.Add(eSecondA, new(big.Rat).Mul(p, big.NewRat(int64(q+1), 1)))
	}
	// Eq. (13).
	f = new(big.Rat).Sub(ePrimeA, eSecondA)
	f.Mul(f, invC)
	f.Add(f, eSecondA)
	return weights, f
}

// ExpectedRoundTime is eq. (12): E(T_i) for arrival times d[0] = D_{i,1}, d[1] = D_{i,2}, …
// (at least min(C, m_ACK) of them).
func ExpectedRoundTime(c, mack int, d []*big.Rat) *big.Rat {
	w, _ := RoundWeights(c, mack)
	t := new(big.Rat)
	for k, wk := range w {
		t.Add(t, new(big.Rat).Mul(wk, d[k]))
	}
	return t
}

// RoundTimeEq20 is eq. (20), the paper's expansion of E(T_i) used to discuss asymmetry.
// It needs 1 ≤ m_ACK ≤ C (its factorials (C−k−1)! run up to k = m_ACK−1); d as in
// ExpectedRoundTime. It equals eq. (12) wherever both are defined (check U5).
func RoundTimeEq20(c, mack int, d []*big.Rat) *big.Rat {
	fc := new(big.Rat).SetInt(factorial(c))
	term := func(k int) *big.Rat { // (C−k−1)·(C−k−1)!/C!
		num := new(big.Int).Mul(big.NewInt(int64(c-k-1)), factorial(c-k-1))
		r := new(big.Rat).SetInt(num)
		return r.Quo(r, fc)
	}
	diffMack := new(big.Rat).Sub(d[mack-1], d[0])
	t := new(big.Rat).Set(d[0])
	for k := mack; k <= c-2; k++ {
		t.Add(t, new(big.Rat).Mul(diffMack, term(k)))
	}
	t.Add(t, new(big.Rat).Quo(diffMack, fc))
	for k := 1; k <= mack-1; k++ {
		t.Add(t, new(big.Rat).Mul(new(big.Rat).Sub(d[k-1], d[0]), term(k)))
	}
	return t
}
