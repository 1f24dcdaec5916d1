package model

import (
	"math/big"
)

// AverageAsymmetry is eqs. (22)–(23): the mean absolute difference over all pairs,
// 2·Σ_{q>r}|x_r − x_q| / (n(n−1)), exactly. Fewer than two values have no asymmetry (0).
func AverageAsymmetry(xs []*big.Rat) *big.Rat {
	n := len(xs)
	sum := new(big.Rat)
	if n < 2 {
		return sum
	}
	for q := 1; q < n; q++ {
		for r := 0; r < q; r++ {
			d := new(big.Rat).Sub(xs[r], xs[q])
			sum.Add(sum, d.Abs(d))
		}
	}
	return sum.Mul(sum, big.NewRat(2, int64(n*(n-1))))
}

// ADA is eq. (22), the average delay asymmetry of the paths' one-way delays, in seconds.
func ADA(paths []Path) float64 {
	xs := make([]*big.Rat, len(paths))
	for i, p := range paths {
		xs[i] = big.NewRat(int64(p.Delay), 1e9)
	}
	f, _ := AverageAsymmetry(xs).Float64()
	return f
}

// ABA is eq. (23), the average bandwidth asymmetry of the paths' rates, in bit/s.
func ABA(paths []Path) float64 {
	xs := make([]*big.Rat, len(paths))
	for i, p := range paths {
		xs[i] = new(big.Rat).SetFloat64(p.Rate)
	}
	f, _ := AverageAsymmetry(xs).Float64()
	return f
}

// AccuracyRat is eq. (24), 1 − |T_S − T_M|/T_S, for a measured (simulated) throughput T_S
// and a modelled one T_M, exactly.
func AccuracyRat(measured, modelled *big.Rat) *big.Rat {
	d := new(big.Rat).Sub(measured, modelled)
	d.Abs(d).Quo(d, measured)
	return d.Sub(big.NewRat(1, 1), d)
}

// Accuracy is eq. (24) on floats (measured > 0). It can be negative: a model off by more
// than the measurement itself.
func Accuracy(measured, modelled float64) float64 {
	f, _ := AccuracyRat(new(big.Rat).SetFloat64(measured), new(big.Rat).SetFloat64(modelled)).Float64()
	return f
}
