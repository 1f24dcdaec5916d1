package model

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

func ms(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }

// U6: ADA of {5, 15, 35} ms is 20 ms, exactly.
func TestU6ADA(t *testing.T) {
	if got := AverageAsymmetry([]*big.Rat{r(5, 1), r(15, 1), r(35, 1)}); got.Cmp(r(20, 1)) != 0 {
		t.Errorf("ADA{5,15,35} = %s, want 20", got.RatString())
	}
	paths := []Path{{Rate: 1e5, Delay: ms(5)}, {Rate: 3e5, Delay: ms(15)}, {Rate: 8e5, Delay: ms(35)}}
	if got := ADA(paths); got != 0.020 {
		t.Errorf("ADA(paths) = %v s, want 0.020", got)
	}
	// ABA likewise: |1−3| + |1−8| + |3−8| = 14 hundred kbit/s, over 3 pairs.
	if got, want := ABA(paths), 14e5/3; math.Abs(got-want) > 1e-9 {
		t.Errorf("ABA = %v, want %v", got, want)
	}
	if got := AverageAsymmetry([]*big.Rat{r(7, 1)}); got.Sign() != 0 {
		t.Errorf("one link has asymmetry %s", got.RatString())
	}
}

// U7: accuracy of T_M = 90 against T_S = 100 is 0.90.
func TestU7Accuracy(t *testing.T) {
	if got := AccuracyRat(r(100, 1), r(90, 1)); got.Cmp(r(9, 10)) != 0 {
		t.Errorf("accuracy = %s, want 9/10", got.RatString())
	}
	if got := AccuracyRat(r(100, 1), r(110, 1)); got.Cmp(r(9, 10)) != 0 {
		t.Errorf("accuracy of an overestimate = %s, want 9/10", got.RatString())
	}
	if got := Accuracy(100, 90); got != 0.9 {
		t.Errorf("Accuracy(100, 90) = %v", got)
	}
}

// U8: link of the first segment of rounds 1…4, n = 3, C = (1, 2, 3).
//
// MODEL.md lists links 1, 2, 1, 2. Eq. (2) and plain round robin agree on 1, 2, 1 and
// then give link 1 for round 4: the rounds before it sent 1 + 2 + 3 = 6 segments, a
// multiple of 3, so the pointer is back at link 1. (1, 2, 1, 2 would need C_3 ≡ 1 mod 3.)
// The test holds eq. (2) to a literal round-robin pointer and to MODEL.md's first three.
func TestU8LinkIndex(t *testing.T) {
	const n = 3
	cs := []int{1, 2, 3, 4}
	modelMD := []int{1, 2, 1, 2}
	pointer, before := 0, 0
	for i, c := range cs {
		got := LinkIndex(1, before, n)
		if got != pointer+1 {
			t.Errorf("round %d: eq. (2) gives link %d, a round-robin pointer gives %d", i+1, got, pointer+1)
		}
		if i < 3 && got != modelMD[i] {
			t.Errorf("round %d: link %d, MODEL.md U8 says %d", i+1, got, modelMD[i])
		}
		for j := 1; j <= c; j++ {
			if l := LinkIndex(j, before, n); l != (pointer+j-1)%n+1 {
				t.Errorf("round %d segment %d: link %d", i+1, j, l)
			}
		}
		pointer = (pointer + c) % n
		before += c
	}
}

// The iteration by hand for E = s and E = 3s on two links.
func TestPaperIterationByHand(t *testing.T) {
	paths := []Path{{Rate: 1e6, Delay: ms(10)}, {Rate: 2e6, Delay: ms(30)}}
	s := 536.0
	// Round 1: C = 1 (case-I rule), segment 1 on link 1, eq. (3): (⌊1/2⌋+1)·8s/b1 + d1.
	t1 := 8*s/1e6 + 0.010
	got, err := Paper(paths, PaperOptions{Bytes: s})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * s / t1; math.Abs(got.Throughput-want) > 1e-9*want || got.Rounds != 1 {
		t.Errorf("E = s: %v bit/s in %d rounds, want %v in 1", got.Throughput, got.Rounds, want)
	}
	// Round 2: C = F(1) + 1 = 2, starting on link 2. D_1 = (0+1)·8s/b2 + d2,
	// D_2 = (1+1)·8s/b1 + d1, E(T) = D_1 + (D_2 − D_1)/2.
	d1, d2 := 8*s/2e6+0.030, 2*8*s/1e6+0.010
	t2 := d1 + (d2-d1)/2
	got, err = Paper(paths, PaperOptions{Bytes: 3 * s})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * 3 * s / (t1 + t2); math.Abs(got.Throughput-want) > 1e-9*want || got.Rounds != 2 {
		t.Errorf("E = 3s: %v bit/s in %d rounds, want %v in 2", got.Throughput, got.Rounds, want)
	}
	// With ⌈j/n⌉ segment 2 of round 2 waits for one segment, not two.
	d2c := 8*s/1e6 + 0.010
	got, err = Paper(paths, PaperOptions{Bytes: 3 * s, QueueTerm: QueueCeil})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * 3 * s / (t1 + d1 + (d2c-d1)/2); math.Abs(got.Throughput-want) > 1e-9*want {
		t.Errorf("⌈j/n⌉: %v bit/s, want %v", got.Throughput, want)
	}
	// The delayed-ACK rule for the one-segment round adds the timer to round 1.
	got, err = Paper(paths, PaperOptions{Bytes: s, Single: SingleDelayedAck, DelayedAck: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if want := 8 * s / (t1 + 0.040); math.Abs(got.Throughput-want) > 1e-9*want {
		t.Errorf("delayed ACK: %v bit/s, want %v", got.Throughput, want)
	}
}

// The model's known limit: the recursion settles at 2–3 segments per round whatever the
// bandwidth, so throughput hardly moves with rate.
func TestPaperSettles(t *testing.T) {
	for _, rate := range []float64{1e6, 1e7, 1e8} {
		paths := []Path{{Rate: rate, Delay: ms(20)}, {Rate: rate, Delay: ms(40)}}
		for _, rnd := range []Rounding{RoundNearest, RoundDown, RoundUp} {
			res, err := Paper(paths, PaperOptions{Rounding: rnd})
			if err != nil {
				t.Fatal(err)
			}
			if res.SteadyC < 2 || res.SteadyC > 3 {
				t.Errorf("rate %v rounding %d: settles at %v segments per round", rate, rnd, res.SteadyC)
			}
			if lim := 8 * 3 * 536 / 0.020; res.Throughput > lim {
				t.Errorf("rate %v: %v bit/s, above 3 segments per 20 ms", rate, res.Throughput)
			}
		}
	}
	// Folding the reverse path in doubles every delay: slower.
	paths := []Path{{Rate: 1e7, Delay: ms(20)}, {Rate: 1e7, Delay: ms(40)}}
	a, _ := Paper(paths, PaperOptions{})
	b, _ := Paper(paths, PaperOptions{FoldReverse: true})
	if !(b.Throughput < a.Throughput) {
		t.Errorf("FoldReverse %v not below %v", b.Throughput, a.Throughput)
	}
}

func TestPaperBadInput(t *testing.T) {
	good := []Path{{Rate: 1e6, Delay: ms(10)}}
	for _, tc := range []struct {
		name  string
		paths []Path
		o     PaperOptions
		want  string
	}{
		{"no links", nil, PaperOptions{}, "no paths"},
		{"zero rate", []Path{{Rate: 0, Delay: ms(1)}}, PaperOptions{}, "rate"},
		{"NaN rate", []Path{{Rate: math.NaN(), Delay: ms(1)}}, PaperOptions{}, "rate"},
		{"negative delay", []Path{{Rate: 1e6, Delay: -ms(1)}}, PaperOptions{}, "negative"},
		{"segment", good, PaperOptions{Segment: -1}, "segment"},
		{"m_ACK", good, PaperOptions{AckEvery: -2}, "m_ACK"},
		{"W_l", good, PaperOptions{InitWindow: 0.5}, "initial window"},
		{"W_s", good, PaperOptions{InitWindow: 10, SSThresh: 5}, "slow-start"},
		{"E", good, PaperOptions{Bytes: 1e15}, "bytes to transfer"},
		{"rounding", good, PaperOptions{Rounding: 7}, "rounding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Paper(tc.paths, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
