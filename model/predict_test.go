package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// The payload share of a wire packet with the default segment and overhead.
const defaultEta = float64(DefaultMSS) / float64(DefaultMSS+DefaultOverhead)

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

func randomPaths(rng *rand.Rand, n int) []Path {
	ps := make([]Path, n)
	for i := range ps {
		ps[i] = Path{
			Name:   fmt.Sprint(i),
			Rate:   math.Exp(rng.Float64()*math.Log(1e4)) * 1e5, // 100 kbit/s … 1 Gbit/s
			Delay:  time.Duration(rng.Float64() * float64(300*time.Millisecond)),
			Jitter: time.Duration(rng.Float64() * float64(5*time.Millisecond)),
			Queue:  1 + rng.IntN(1000),
		}
		if rng.IntN(3) == 0 {
			ps[i].Loss = rng.Float64() * 0.05
		}
	}
	return ps
}

// Goodput never exceeds the sum of the paths' capacities (nor its payload share), and
// the wire rate never exceeds the split's capacity.
func TestNeverAboveCapacity(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range 3000 {
		n := 1 + rng.IntN(8)
		ps := randomPaths(rng, n)
		var sum float64
		for _, p := range ps {
			sum += p.Rate
		}
		split := Split{Mode: Mode(rng.IntN(3))}
		if rng.IntN(2) == 0 {
			split.Weights = make([]float64, n)
			for i := range split.Weights {
				split.Weights[i] = float64(rng.IntN(4))
			}
			split.Weights[rng.IntN(n)] = 1
		}
		tcp := TCP{CC: CC(rng.IntN(2)), Window: 1 << (14 + rng.IntN(10))}
		if rng.IntN(3) == 0 {
			tcp.Duration = time.Duration(1+rng.IntN(30)) * time.Second
		}
		p, err := Predict(ps, split, tcp)
		if err != nil {
			t.Fatal(err)
		}
		if !(p.Goodput > 0) || p.Goodput > defaultEta*sum*(1+1e-12) || p.WireRate > p.Capacity*(1+1e-12) || p.Capacity > sum*(1+1e-12) {
			t.Fatalf("case %d %v %+v: goodput %v wire %v capacity %v, sum of rates %v", it, split, ps, p.Goodput, p.WireRate, p.Capacity, sum)
		}
		if p.Spurious < 0 || p.Spurious > 1 || p.ReorderedRatio < 0 || p.ReorderedRatio > 1 {
			t.Fatalf("case %d: spurious %v reordered %v out of [0, 1]", it, p.Spurious, p.ReorderedRatio)
		}
	}
}

// One path is single-path TCP: each regime against its textbook closed form.
func TestOnePathIsSinglePathTCP(t *testing.T) {
	pb := 8.0 * (DefaultMSS + DefaultOverhead)
	// RFC 8312 §5: cubic's mean window under random loss p, C = 0.4, β = 0.7.
	cubicW := func(p, rtt float64) float64 {
		return max(math.Pow(0.4*3.7/1.2, 0.25)*math.Pow(rtt/p, 0.75), math.Sqrt(1.5/p))
	}
	for _, tc := range []struct {
		name  string
		path  Path
		tcp   TCP
		want  float64 // goodput, bit/s; 0: only the bounds below
		lo    float64
		limit Limit
	}{
		{"deep buffer fills the link", Path{Rate: 10e6, Delay: ms(20), Queue: 1000}, TCP{},
			defaultEta * 10e6, 0, LimitCapacity},
		{"receive window over the RTT", Path{Rate: 100e6, Delay: ms(50)}, TCP{Window: 64 << 10},
			8 * 65536 / 0.100, 0, LimitWindow},
		{"cwnd clamp over the RTT", Path{Rate: 100e6, Delay: ms(50)}, TCP{MaxCwnd: 100},
			defaultEta * 100 * pb / 0.100, 0, LimitCwnd},
		{"random loss: cubic's Reno-friendly response", Path{Rate: 1e9, Delay: ms(40), Loss: 0.01}, TCP{},
			defaultEta * 0.99 * cubicW(0.01, 0.080) * pb / 0.080, 0, LimitLoss},
		{"random loss: cubic's own response", Path{Rate: 1e9, Delay: ms(200), Loss: 1e-4}, TCP{},
			defaultEta * (1 - 1e-4) * cubicW(1e-4, 0.400) * pb / 0.400, 0, LimitLoss},
		{"bbr fills the link, retransmits its losses", Path{Rate: 10e6, Delay: ms(40), Loss: 0.02, Queue: 5}, TCP{CC: BBR},
			defaultEta * 0.98 * 10e6, 0, LimitCapacity},
		{"short queue: cubic's sawtooth", Path{Rate: 50e6, Delay: ms(40), Queue: 20}, TCP{},
			0, 0.7 * defaultEta * 50e6, LimitBuffer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first Prediction
			for m := range 3 {
				p, err := Predict([]Path{tc.path}, Split{Mode: Mode(m)}, tc.tcp)
				if err != nil {
					t.Fatal(err)
				}
				if m == 0 {
					first = p
				} else if p.Goodput != first.Goodput {
					t.Errorf("%v gives %v, rr %v: one path has no split", Mode(m), p.Goodput, first.Goodput)
				}
			}
			if first.Limit != tc.limit {
				t.Errorf("limit %s, want %s", first.Limit, tc.limit)
			}
			if tc.want > 0 && !near(first.Goodput, tc.want, 1e-9) {
				t.Errorf("goodput %v, want %v", first.Goodput, tc.want)
			}
			if tc.lo > 0 && !(first.Goodput >= tc.lo && first.Goodput < defaultEta*tc.path.Rate) {
				t.Errorf("goodput %v outside [%v, %v)", first.Goodput, tc.lo, defaultEta*tc.path.Rate)
			}
			if first.Skew != 0 || first.Spurious != 0 || first.ReorderedRatio != 0 {
				t.Errorf("one path reorders: skew %v spurious %v ratio %v", first.Skew, first.Spurious, first.ReorderedRatio)
			}
		})
	}
}

// Equal paths with equal delays scale with their number under every split, unless
// random loss, not capacity, sets the window: then more paths add nothing.
func TestEqualPathsScale(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   Path
		tcp    TCP
		scales bool
	}{
		{"cubic, deep queue", Path{Rate: 20e6, Delay: ms(30), Queue: 500}, TCP{}, true},
		{"cubic, short queue", Path{Rate: 20e6, Delay: ms(30), Queue: 10}, TCP{}, true},
		{"bbr", Path{Rate: 20e6, Delay: ms(30), Queue: 50}, TCP{CC: BBR}, true},
		{"cubic, loss-limited", Path{Rate: 20e6, Delay: ms(30), Loss: 0.01}, TCP{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []Mode{RR, WRR, EDPF} {
				one, err := Predict([]Path{tc.path}, Split{Mode: mode}, tc.tcp)
				if err != nil {
					t.Fatal(err)
				}
				for n := 2; n <= 8; n++ {
					p, err := Predict(slices.Repeat([]Path{tc.path}, n), Split{Mode: mode}, tc.tcp)
					if err != nil {
						t.Fatal(err)
					}
					want := one.Goodput
					if tc.scales {
						want *= float64(n)
					}
					if !near(p.Goodput, want, 0.02) {
						t.Errorf("%v n=%d: %v, want %v (one path: %v)", mode, n, p.Goodput, want, one.Goodput)
					}
				}
			}
		})
	}
}

// Delay asymmetry: reordering appears with it, EDPF removes it, RACK's window tracks it.
func TestReordering(t *testing.T) {
	paths := []Path{{Rate: 10e6, Delay: ms(10), Queue: 1000}, {Rate: 10e6, Delay: ms(40), Queue: 1000}}
	rr, err := Predict(paths, Split{Mode: RR}, TCP{CC: BBR})
	if err != nil {
		t.Fatal(err)
	}
	// ACKs come back over the 10 ms path: RTTs 20 and 50 ms, min_rtt/4 = 5 ms.
	if !near(rr.Skew, 0.030, 1e-9) || !near(rr.MinRTT, 0.020, 1e-9) || !near(rr.InOrderRTT, 0.050, 1e-9) {
		t.Errorf("skew %v min RTT %v in-order RTT %v", rr.Skew, rr.MinRTT, rr.InOrderRTT)
	}
	if !(rr.ReorderedRatio > 0.4) || !(rr.MeanExtent > 1) {
		t.Errorf("reordered ratio %v, extent %v: half the packets overtake the other half", rr.ReorderedRatio, rr.MeanExtent)
	}
	// srtt, the in-order RTT of 50 ms, covers the 30 ms skew after adaptation: window
	// 6 × 5 ms, no loss events.
	if !near(rr.ReoWnd, 0.030, 1e-9) || rr.Spurious != 0 {
		t.Errorf("RACK window %v spurious %v", rr.ReoWnd, rr.Spurious)
	}
	static, _ := Predict(paths, Split{Mode: RR}, TCP{CC: BBR, StaticReoWnd: true})
	if !near(static.ReoWnd, 0.005, 1e-9) || !near(static.Spurious, 0.5, 1e-9) {
		t.Errorf("static RACK window %v spurious %v: every slow-path packet is retransmitted", static.ReoWnd, static.Spurious)
	}
	if !(static.Goodput < rr.Goodput) {
		t.Errorf("spurious retransmissions cost nothing: %v vs %v", static.Goodput, rr.Goodput)
	}
	edpf, _ := Predict(paths, Split{Mode: EDPF}, TCP{CC: BBR})
	if edpf.Skew != 0 || edpf.ReorderedRatio != 0 || edpf.Spurious != 0 {
		t.Errorf("edpf reorders: %+v", edpf)
	}
	if !near(edpf.QueueDelay[0], 0.030, 1e-9) {
		t.Errorf("edpf holds %v s on the fast path, want the 30 ms lead", edpf.QueueDelay[0])
	}
	// srtt follows the in-order RTT, so a large skew is learnt; only jitter takes the
	// lateness beyond srtt, and that cannot be learnt.
	far := []Path{{Rate: 10e6, Delay: ms(5), Queue: 1000}, {Rate: 10e6, Delay: ms(200), Queue: 1000}}
	tcp := TCP{CC: BBR, Window: 64 << 20}
	p, _ := Predict(far, Split{Mode: RR}, tcp)
	if !(p.Skew < p.InOrderRTT) || !(p.Spurious < 0.05) {
		t.Errorf("skew %v within srtt %v: spurious %v, want it learnt", p.Skew, p.InOrderRTT, p.Spurious)
	}
	far[0].Jitter = ms(20)
	p, _ = Predict(far, Split{Mode: RR}, tcp)
	if !(p.Skew > p.InOrderRTT) || !near(p.Spurious, 0.5, 1e-9) {
		t.Errorf("skew %v beyond srtt %v: spurious %v, want 0.5", p.Skew, p.InOrderRTT, p.Spurious)
	}
}

// Resequenced, a split is one in-order path as slow as its slowest lane: no skew, no
// spurious recovery, every packet at the in-order round trip, and BBR's min_rtt that
// round trip too, so its in-flight cap is gone.
func TestResequenced(t *testing.T) {
	far := []Path{{Rate: 10e6, Delay: ms(5), Jitter: ms(20), Queue: 1000}, {Rate: 10e6, Delay: ms(200), Queue: 1000}}
	for _, cc := range []CC{Cubic, BBR} {
		plain, _ := Predict(far, Split{Mode: RR}, TCP{CC: cc, Window: 64 << 20})
		p, err := Predict(far, Split{Mode: RR}, TCP{CC: cc, Window: 64 << 20, Resequenced: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.Skew != 0 || p.Spurious != 0 || p.ReorderedRatio != 0 {
			t.Errorf("%v resequenced: skew %v spurious %v reordered %v, want none", cc, p.Skew, p.Spurious, p.ReorderedRatio)
		}
		if !near(p.MinRTT, 0.205, 1e-9) || !near(p.RTT, p.InOrderRTT, 1e-9) {
			t.Errorf("%v resequenced: min RTT %v, RTT %v, in-order %v: want every lane at 205 ms", cc, p.MinRTT, p.RTT, p.InOrderRTT)
		}
		if !(plain.Spurious > 0) || !(p.Goodput > plain.Goodput) {
			t.Errorf("%v: resequenced %v vs %v (spurious %v): in order should gain", cc, p.Goodput, plain.Goodput, plain.Spurious)
		}
	}
}

// A finite transfer pays its slow-start ramp; a long one approaches the steady state.
func TestRamp(t *testing.T) {
	paths := []Path{{Rate: 50e6, Delay: ms(50), Queue: 2000}}
	steady, _ := Predict(paths, Split{}, TCP{})
	var last float64
	for _, d := range []time.Duration{time.Second, 5 * time.Second, 60 * time.Second, time.Hour} {
		p, err := Predict(paths, Split{}, TCP{Duration: d})
		if err != nil {
			t.Fatal(err)
		}
		if !(p.Goodput < steady.Goodput) || !(p.Goodput > last) {
			t.Errorf("%v: %v, steady %v, shorter run %v", d, p.Goodput, steady.Goodput, last)
		}
		last = p.Goodput
	}
	if !near(last, steady.Goodput, 0.005) {
		t.Errorf("an hour gives %v, steady %v", last, steady.Goodput)
	}
	// Leaving out the start (a lab's omit) leaves out the ramp: 10 doublings of 100 ms
	// reach the 50 Mbit/s window in about a second.
	whole, _ := Predict(paths, Split{}, TCP{Duration: 5 * time.Second})
	late, _ := Predict(paths, Split{}, TCP{Duration: 5 * time.Second, Omit: 2 * time.Second})
	early, _ := Predict(paths, Split{}, TCP{Duration: 5 * time.Second, Omit: 200 * time.Millisecond})
	if !(whole.Goodput < early.Goodput) || !(early.Goodput < late.Goodput) || !near(late.Goodput, steady.Goodput, 1e-9) {
		t.Errorf("omit 0, 0.2 s, 2 s of 5 s: %v, %v, %v; steady %v", whole.Goodput, early.Goodput, late.Goodput, steady.Goodput)
	}
}

func TestPredictBadInput(t *testing.T) {
	ok := []Path{{Rate: 1e6, Delay: ms(10)}, {Rate: 2e6, Delay: ms(20)}}
	for _, tc := range []struct {
		name  string
		paths []Path
		split Split
		tcp   TCP
		want  string
	}{
		{"no paths", nil, Split{}, TCP{}, "no paths"},
		{"zero rate", []Path{{Name: "lte", Rate: 0}}, Split{}, TCP{}, "path 0 (lte): rate"},
		{"infinite rate", []Path{{Rate: math.Inf(1)}}, Split{}, TCP{}, "rate"},
		{"negative delay", []Path{{Rate: 1e6, Delay: -ms(1)}}, Split{}, TCP{}, "delay"},
		{"negative jitter", []Path{{Rate: 1e6, Jitter: -ms(1)}}, Split{}, TCP{}, "jitter"},
		{"loss 1", []Path{{Rate: 1e6, Loss: 1}}, Split{}, TCP{}, "loss"},
		{"negative queue", []Path{{Rate: 1e6, Queue: -1}}, Split{}, TCP{}, "queue"},
		{"weight count", ok, Split{Mode: WRR, Weights: []float64{1}}, TCP{}, "1 weights for 2 paths"},
		{"negative weight", ok, Split{Mode: WRR, Weights: []float64{1, -1}}, TCP{}, "weight -1"},
		{"NaN weight", ok, Split{Mode: WRR, Weights: []float64{1, math.NaN()}}, TCP{}, "weight NaN"},
		{"all zero", ok, Split{Mode: RR, Weights: []float64{0, 0}}, TCP{}, "all weights are zero"},
		{"mode", ok, Split{Mode: 9}, TCP{}, "unknown mode"},
		{"window", ok, Split{}, TCP{Window: 100}, "window"},
		{"cc", ok, Split{}, TCP{CC: 5}, "congestion control"},
		{"ack delay", ok, Split{}, TCP{AckPath: AckFixed, AckDelay: -1}, "ACK delay"},
		{"omit all", ok, Split{}, TCP{Duration: time.Second, Omit: time.Second}, "omit"},
		{"omit without duration", ok, Split{}, TCP{Omit: time.Second}, "omit"},
		{"negative omit", ok, Split{}, TCP{Duration: time.Second, Omit: -1}, "omit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Predict(tc.paths, tc.split, tc.tcp)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestBestSubset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		paths []Path
		mode  Mode
		tcp   TCP
		want  []int
	}{
		{"large delay asymmetry, limited window, rr: drop the slow path",
			[]Path{{Rate: 10e6, Delay: ms(5)}, {Rate: 10e6, Delay: ms(150)}}, RR, TCP{Window: 64 << 10}, []int{0}},
		{"same, wrr", []Path{{Rate: 10e6, Delay: ms(5)}, {Rate: 10e6, Delay: ms(150)}}, WRR, TCP{Window: 64 << 10}, []int{0}},
		{"same, bbr", []Path{{Rate: 10e6, Delay: ms(5)}, {Rate: 10e6, Delay: ms(150)}}, WRR, TCP{CC: BBR, Window: 64 << 10}, []int{0}},
		{"equal delays, limited window: use both",
			[]Path{{Rate: 10e6, Delay: ms(5)}, {Rate: 10e6, Delay: ms(5)}}, RR, TCP{Window: 64 << 10}, []int{0, 1}},
		{"seed 002's rule: four links, ADA 90 ms, the two fastest are best",
			[]Path{{Rate: 1e6, Delay: ms(5)}, {Rate: 1e6, Delay: ms(20)}, {Rate: 1e6, Delay: ms(140)}, {Rate: 1e6, Delay: ms(230)}},
			RR, TCP{Window: 16 << 10}, []int{0, 1}},
		{"issue 4: 5:2:7 with equal delays, all of them",
			[]Path{{Rate: 5e6, Delay: ms(20)}, {Rate: 2e6, Delay: ms(20)}, {Rate: 7e6, Delay: ms(20)}}, WRR, TCP{}, []int{0, 1, 2}},
		{"rr on 5:2:7 with bbr: the 2 Mbit/s path caps rr at 6, 5 and 7 give 10",
			[]Path{{Rate: 5e6, Delay: ms(20)}, {Rate: 2e6, Delay: ms(20)}, {Rate: 7e6, Delay: ms(20)}}, RR, TCP{CC: BBR}, []int{0, 2}},
		{"rr on 5:2:7 with cubic: RACK learns the queue cubic fills on the 5 Mbit/s path (srtt includes it), 5 and 7 give 10",
			[]Path{{Rate: 5e6, Delay: ms(20)}, {Rate: 2e6, Delay: ms(20)}, {Rate: 7e6, Delay: ms(20)}}, RR, TCP{}, []int{0, 2}},
		{"a lossy path is left out under cubic",
			[]Path{{Rate: 10e6, Delay: ms(20), Queue: 1000}, {Rate: 10e6, Delay: ms(20), Loss: 0.05, Queue: 1000}}, WRR, TCP{}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := BestSubset(tc.paths, tc.mode, tc.tcp)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Paths, tc.want) {
				t.Errorf("paths %v (%v bit/s), want %v", c.Paths, c.Prediction.Goodput, tc.want)
			}
			all, err := Predict(tc.paths, Split{Mode: tc.mode}, tc.tcp)
			if err != nil {
				t.Fatal(err)
			}
			if c.Prediction.Goodput < all.Goodput {
				t.Errorf("best %v below all paths' %v", c.Prediction.Goodput, all.Goodput)
			}
			again, _ := Predict(tc.paths, c.Split, tc.tcp)
			if again.Goodput != c.Prediction.Goodput {
				t.Errorf("the choice's split predicts %v, the choice says %v", again.Goodput, c.Prediction.Goodput)
			}
			if tc.mode == WRR && len(c.Paths) == len(tc.paths) {
				for i, w := range c.Split.Weights {
					if !near(w/c.Split.Weights[0], tc.paths[i].Rate/tc.paths[0].Rate, 0.05) {
						t.Errorf("weights %v not in the ratio of the rates", c.Split.Weights)
					}
				}
			}
		})
	}
	if _, err := BestSubset(nil, RR, TCP{}); err == nil {
		t.Error("no paths accepted")
	}
	if _, err := BestSubset(slices.Repeat([]Path{{Rate: 1e6}}, MaxSubsetPaths+1), RR, TCP{}); err == nil {
		t.Error("too many paths accepted")
	}
}

// Modes, congestion controls and ACK paths survive JSON, which the CLI and the controller
// exchange.
func TestTextRoundTrip(t *testing.T) {
	for _, m := range []Mode{RR, WRR, EDPF} {
		b, _ := m.MarshalText()
		var back Mode
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Errorf("mode %v: %q back to %v, %v", m, b, back, err)
		}
	}
	for _, c := range []CC{Cubic, BBR} {
		b, _ := c.MarshalText()
		var back CC
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("cc %v: %q back to %v, %v", c, b, back, err)
		}
	}
	for _, a := range []AckPath{AckOverPaths, AckFixed} {
		b, _ := a.MarshalText()
		var back AckPath
		if err := back.UnmarshalText(b); err != nil || back != a {
			t.Errorf("ack path %v: %q back to %v, %v", a, b, back, err)
		}
	}
	var m Mode
	if err := m.UnmarshalText([]byte("spray")); err == nil {
		t.Error("mode spray accepted")
	}
}

func TestBestOverModes(t *testing.T) {
	// A2 under bbr: EDPF's in-order delivery keeps the pipe RTT within BBR's cap.
	a2 := []Path{{Rate: 5e6, Delay: ms(100)}, {Rate: 2e6, Delay: ms(10)}, {Rate: 7e6, Delay: ms(50)}}
	c, err := Best(a2, TCP{CC: BBR})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Mode{RR, WRR, EDPF} {
		s, _ := BestSubset(a2, m, TCP{CC: BBR})
		if s.Prediction.Goodput > c.Prediction.Goodput {
			t.Errorf("%v's best %v beats Best's %v (%v)", m, s.Prediction.Goodput, c.Prediction.Goodput, c.Split.Mode)
		}
	}
	if only, _ := Best(a2, TCP{}, RR); only.Split.Mode != RR {
		t.Errorf("asked for rr, got %v", only.Split.Mode)
	}
}

// BBR's inflight cap of 2·BDP(min_rtt): with SACK the pipe holds X·R̄, and when R̄
// exceeds 2·min_rtt the cwnd-limited delivery rate drags the bandwidth estimate down
// until the quantisation budget (7 segments here) fills the gap.
func TestBBRInflightCap(t *testing.T) {
	pb := 8.0 * (DefaultMSS + DefaultOverhead)
	paths := []Path{{Rate: 50e6, Delay: ms(5)}, {Rate: 50e6, Delay: ms(100)}}
	p, err := Predict(paths, Split{Mode: WRR}, TCP{CC: BBR})
	if err != nil {
		t.Fatal(err)
	}
	// RTTs 10 and 105 ms (ACKs over the 5 ms path): R̄ = 57.5 ms, 2·min_rtt = 20 ms.
	if want := defaultEta * 7 * pb / (0.0575 - 0.020); p.Limit != LimitBBR || !near(p.Goodput, want, 1e-9) {
		t.Errorf("limit %s goodput %v, want %s %v", p.Limit, p.Goodput, LimitBBR, want)
	}
	// Within 2·min_rtt there is no cap; nor with cubic, nor with EDPF's in-order pipe.
	for _, tc := range []struct {
		paths []Path
		split Split
		tcp   TCP
	}{
		{[]Path{{Rate: 50e6, Delay: ms(5)}, {Rate: 50e6, Delay: ms(12)}}, Split{Mode: WRR}, TCP{CC: BBR}},
		{paths, Split{Mode: WRR}, TCP{}},
		{paths, Split{Mode: EDPF}, TCP{CC: BBR}},
	} {
		q, err := Predict(tc.paths, tc.split, tc.tcp)
		if err != nil {
			t.Fatal(err)
		}
		if q.Limit == LimitBBR {
			t.Errorf("%v %v %+v: capped by BBR's inflight", tc.split.Mode, tc.tcp.CC, tc.paths)
		}
	}
}

// The lanes wrr's weights saturate together drift apart by what the slot table rounds
// off, and by nothing under rr; the drifts weigh out to zero over the lanes' rates.
func TestFixedSplitDrift(t *testing.T) {
	ps := []Path{
		{Rate: 35.9e6, Delay: ms(20)}, {Rate: 18.4e6, Delay: ms(35)}, {Rate: 33.3e6, Delay: ms(25)},
		{Rate: 14.7e6, Delay: ms(45)}, {Rate: 14.8e6, Delay: ms(30)},
	}
	tcp := TCP{}.WithDefaults()
	for _, mode := range []Mode{RR, WRR} {
		w, err := splitWeights(ps, Split{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		l := fixedSplit(ps, w, mode, tcp)
		var sum float64
		for k, i := range l.idx {
			sum += ps[i].Rate * l.drift[k]
		}
		if math.Abs(sum) > 1 {
			t.Errorf("%v: rate-weighted drift %v, want 0", mode, sum)
		}
		iv := l.drift[3]
		if want := 129.0 / 1024 / (14.7 / 117.1); mode == WRR && math.Abs(iv-(want-1)) > 1e-9 {
			t.Errorf("wrr: lane iv drifts %v, want %v (129 of 1024 slots)", iv, want-1)
		}
		if mode == RR && slices.ContainsFunc(l.drift, func(d float64) bool { return d != 0 }) {
			t.Errorf("rr: drift %v, want none", l.drift)
		}
	}
}

// Under random loss that keeps cubic's window below the pipe no queue stands, so the
// loss-limited rate is the window over the base round trip; and every flow has its own
// window, so n flows carry n of them, up to the capacity.
func TestRandomLossRateOverTheBaseRoundTrip(t *testing.T) {
	p := Path{Rate: 17e6, Delay: 25 * time.Millisecond, Loss: 0.0046}
	one := func(flows float64) Prediction {
		pr, err := Predict([]Path{p}, Split{Mode: WRR}, TCP{CC: Cubic, Flows: flows})
		if err != nil {
			t.Fatal(err)
		}
		return pr
	}
	tcp := TCP{}.WithDefaults()
	want := math.Sqrt(3/(2*p.Loss)) * pktBits(tcp) / 0.05 * (1 - p.Loss) * float64(tcp.MSS) / float64(tcp.MSS+tcp.Overhead)
	if g := one(1); g.Limit != LimitLoss || math.Abs(g.Goodput/want-1) > 0.01 {
		t.Errorf("one flow: %.2f Mbit/s (%s), want %.2f (loss)", g.Goodput/1e6, g.Limit, want/1e6)
	}
	if g := one(3); g.Limit != LimitLoss || math.Abs(g.Goodput/(3*want)-1) > 0.01 {
		t.Errorf("three flows: %.2f Mbit/s (%s), want %.2f (loss)", g.Goodput/1e6, g.Limit, 3*want/1e6)
	}
	if g := one(8); g.Limit == LimitLoss || g.Goodput > p.Rate {
		t.Errorf("eight flows: %.2f Mbit/s (%s), want the capacity's", g.Goodput/1e6, g.Limit)
	}
	if _, err := Predict([]Path{p}, Split{Mode: WRR}, TCP{Flows: 0.5}); err == nil {
		t.Error("half a flow predicted, want an error")
	}
}
