package model

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
)

func r(a, b int64) *big.Rat { return big.NewRat(a, b) }

func sumRats(xs []*big.Rat) *big.Rat {
	s := new(big.Rat)
	for _, x := range xs {
		s.Add(s, x)
	}
	return s
}

func wantRats(t *testing.T, name string, got, want []*big.Rat) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range want {
		if got[i].Cmp(want[i]) != 0 {
			t.Errorf("%s[k=%d] = %s, want %s", name, i+1, got[i].RatString(), want[i].RatString())
		}
	}
}

// U1: P(m = k | F) for C = 5.
func TestU1MDist(t *testing.T) {
	d := MDist(5)
	wantRats(t, "P(m=k|F), C=5", d, []*big.Rat{r(3, 4), r(1, 6), r(1, 24), r(0, 1), r(1, 24)})
	if s := sumRats(d); s.Cmp(r(1, 1)) != 0 {
		t.Errorf("sum = %s, want 1", s.RatString())
	}
}

// U2, U3: the corrected eq. (9).
func TestU2U3QDist(t *testing.T) {
	for _, tc := range []struct {
		c    int
		want []*big.Rat
	}{
		{5, []*big.Rat{r(3, 8), r(5, 24), r(5, 48), r(1, 16), r(1, 4)}},
		{7, []*big.Rat{r(5, 12), r(7, 36), r(7, 72), r(7, 120), r(7, 180), r(1, 36), r(1, 6)}},
	} {
		d := QDist(tc.c)
		wantRats(t, fmt.Sprintf("P(q=k|not F), C=%d", tc.c), d, tc.want)
		if s := sumRats(d); s.Cmp(r(1, 1)) != 0 {
			t.Errorf("C=%d: sum = %s, want 1", tc.c, s.RatString())
		}
	}
}

// printedEq9 is eq. (9) exactly as printed: (C−k−1) where (C−k−1)! belongs.
func printedEq9(c int) []*big.Rat {
	d := QDist(c)
	notF := new(big.Int).Sub(factorial(c), factorial(c-1))
	for k := 2; k < c; k++ {
		sum := new(big.Int)
		for l := k + 1; l <= c; l++ {
			term := fallingRatio(l-2, l-k-1)
			sum.Add(sum, term.Mul(term, big.NewInt(int64(c-l+1))))
		}
		d[k-1] = ratInt(sum.Mul(sum, big.NewInt(int64(c-k-1))), notF)
	}
	return d
}

// The correction: the printed eq. (9) does not sum to 1, the corrected one does, and for
// 1 < k < C it simplifies to C/((C−1)·k·(k+1)).
func TestEq9Correction(t *testing.T) {
	if s := sumRats(printedEq9(5)); s.Cmp(r(15, 16)) != 0 {
		t.Errorf("printed eq. (9) for C=5 sums to %s, MODEL.md says 15/16", s.RatString())
	}
	for c := 4; c <= 12; c++ {
		if s := sumRats(printedEq9(c)); s.Cmp(r(1, 1)) == 0 {
			t.Errorf("printed eq. (9) for C=%d sums to 1; the correction would be moot", c)
		}
		d := QDist(c)
		if s := sumRats(d); s.Cmp(r(1, 1)) != 0 {
			t.Errorf("corrected eq. (9) for C=%d sums to %s", c, s.RatString())
		}
		for k := 2; k < c; k++ {
			want := r(int64(c), int64((c-1)*k*(k+1)))
			if d[k-1].Cmp(want) != 0 {
				t.Errorf("C=%d k=%d: %s, simplified form gives %s", c, k, d[k-1].RatString(), want.RatString())
			}
		}
	}
}

// permute calls f with every permutation of 1..c.
func permute(c int, f func([]int)) {
	p := make([]int, c)
	for i := range p {
		p[i] = i + 1
	}
	var rec func(int)
	rec = func(i int) {
		if i == c {
			f(p)
			return
		}
		for j := i; j < c; j++ {
			p[i], p[j] = p[j], p[i]
			rec(i + 1)
			p[i], p[j] = p[j], p[i]
		}
	}
	rec(0)
}

// The paper's distributions against all C! equally likely arrival orders, C = 3…7; and
// E(T) weights and F(C) against the receiver's rules played on each order.
func TestDistributionsEnumerated(t *testing.T) {
	for c := 3; c <= 7; c++ {
		mCount := make([]int64, c)
		qCount := make([]int64, c)
		var nF, nNotF int64
		for _, mack := range []int{1, 2, 3} {
			wCount := make([]*big.Rat, min(c, mack))
			for i := range wCount {
				wCount[i] = new(big.Rat)
			}
			aSum := new(big.Rat)
			var total int64
			permute(c, func(order []int) {
				total++
				if order[0] == 1 {
					// Case I: m in-order segments from the first, then a gap.
					m := 1
					for m < c && order[m] == m+1 {
						m++
					}
					if mack == 1 {
						nF++
						mCount[m-1]++
					}
					a := min(m, mack)
					wCount[a-1].Add(wCount[a-1], r(1, 1))
					aSum.Add(aSum, r(int64(a), 1))
					return
				}
				// Case II: the ACK for segment 1 covers 2…q if they all came before it.
				pos := make([]int, c+1)
				for i, s := range order {
					pos[s] = i
				}
				q := 1
				for q < c && pos[q+1] < pos[1] {
					q++
				}
				if mack == 1 {
					nNotF++
					qCount[q-1]++
				}
				wCount[0].Add(wCount[0], r(1, 1))
				aSum.Add(aSum, r(int64(q), 1))
			})
			if mack == 1 {
				md, qd := MDist(c), QDist(c)
				for k := range c {
					if got, want := md[k], r(mCount[k], nF); got.Cmp(want) != 0 {
						t.Errorf("C=%d P(m=%d|F) = %s, enumeration %s", c, k+1, got.RatString(), want.RatString())
					}
					if got, want := qd[k], r(qCount[k], nNotF); got.Cmp(want) != 0 {
						t.Errorf("C=%d P(q=%d|not F) = %s, enumeration %s", c, k+1, got.RatString(), want.RatString())
					}
				}
			}
			w, f := RoundWeights(c, mack)
			for k := range w {
				want := new(big.Rat).Quo(wCount[k], r(total, 1))
				if w[k].Cmp(want) != 0 {
					t.Errorf("C=%d m_ACK=%d weight of D_%d = %s, enumeration %s", c, mack, k+1, w[k].RatString(), want.RatString())
				}
			}
			if want := new(big.Rat).Quo(aSum, r(total, 1)); f.Cmp(want) != 0 {
				t.Errorf("C=%d m_ACK=%d F(C) = %s, enumeration %s", c, mack, f.RatString(), want.RatString())
			}
		}
	}
}

// U4: F(C) = H_{C−1} + 1/(C−1) for m_ACK = 2, and the decimals MODEL.md lists.
func TestU4AckGain(t *testing.T) {
	listed := []float64{2, 2, 2.1667, 2.3333, 2.4833}
	for c := 2; c <= 6; c++ {
		_, f := RoundWeights(c, 2)
		h := new(big.Rat)
		for k := 1; k <= c-1; k++ {
			h.Add(h, r(1, int64(k)))
		}
		want := h.Add(h, r(1, int64(c-1)))
		if f.Cmp(want) != 0 {
			t.Errorf("F(%d) = %s, want H_%d + 1/%d = %s", c, f.RatString(), c-1, c-1, want.RatString())
		}
		if got := f.FloatString(4); got != fmt.Sprintf("%.4f", listed[c-2]) {
			t.Errorf("F(%d) = %s, MODEL.md lists %.4f", c, got, listed[c-2])
		}
	}
}

// U5: eq. (12) through (7) and (10) equals eq. (20) for random D; for m_ACK = 2 both are
// D_1 + (D_2 − D_1)/(C(C − 1)).
func TestU5Eq12Eq20(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2))
	for range 200 {
		c := 2 + rng.IntN(9)
		mack := 1 + rng.IntN(c)
		d := make([]*big.Rat, c)
		for i := range d {
			d[i] = r(rng.Int64N(1_000_000), 1+rng.Int64N(1000))
		}
		e12, e20 := ExpectedRoundTime(c, mack, d), RoundTimeEq20(c, mack, d)
		if e12.Cmp(e20) != 0 {
			t.Fatalf("C=%d m_ACK=%d: eq. (12) %s != eq. (20) %s", c, mack, e12.RatString(), e20.RatString())
		}
		if mack == 2 {
			want := new(big.Rat).Sub(d[1], d[0])
			want.Quo(want, r(int64(c*(c-1)), 1)).Add(want, d[0])
			if e12.Cmp(want) != 0 {
				t.Fatalf("C=%d: E(T) = %s, want D1 + (D2−D1)/(C(C−1)) = %s", c, e12.RatString(), want.RatString())
			}
		}
	}
}

// Eq. (21) is eq. (3)'s difference for n ≥ 2, and not for n = 1.
func TestEq21(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for range 100 {
		n := 1 + rng.IntN(6)
		k := 2 + rng.IntN(12)
		seg := 536
		b1, bk := r(1+rng.Int64N(1e8), 1), r(1+rng.Int64N(1e8), 1)
		d1, dk := r(rng.Int64N(1e6), 1e6), r(rng.Int64N(1e6), 1e6)
		diff := new(big.Rat).Sub(ArrivalTime(k, n, seg, bk, dk, QueueFloorPlusOne), ArrivalTime(1, n, seg, b1, d1, QueueFloorPlusOne))
		eq21 := DelayDifference(k, n, seg, d1, dk, b1, bk)
		if (diff.Cmp(eq21) == 0) != (n >= 2) {
			t.Fatalf("n=%d k=%d: eq. (3) difference %s, eq. (21) %s", n, k, diff.RatString(), eq21.RatString())
		}
	}
}
