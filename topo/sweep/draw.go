// Package sweep judges the controller on an ensemble of scenarios instead of the few it
// was developed on: it draws lab scenarios from stated, realistic ranges (Ranges), writes
// each as a scenario file that `plait lab run` reruns, runs ideal, single-best, MPTCP,
// wrr and auto on each in the lab, and reports the distribution of auto's goodput against
// ideal, single-best and MPTCP next to the targets of issue 30 (Targets).
package sweep

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/plait/plait/topo/scenario"
)

// Ranges are what scenarios are drawn from. Every bound is stated here once; the sweep
// prints them with its results.
type Ranges struct {
	Paths     [2]int           // paths per scenario, uniform
	Rate      [2]float64       // bit/s per path, log-uniform (rates spread over decades)
	Spread    float64          // fastest / slowest path at most, the ratio log-uniform in [1, Spread]
	Delay     [2]time.Duration // one-way per path, uniform
	Jitter    [2]time.Duration // per path, uniform
	Loss      [2]float64       // random loss per path (fraction) in a lossy scenario, uniform
	LossFree  float64          // share of scenarios with no random loss on any path
	CC        []string         // congestion controls, equally likely
	Flows     [2]int           // parallel TCP flows, uniform
	QueueTime time.Duration    // drop-tail queue: this long at the path's rate, or its round trip if longer
	MinQueue  int              // packets, at least
}

// Default are issue 30's ranges. Half the scenarios are loss-free because the issue's
// strictest target (auto ≥ 0.92 × ideal) holds on loss-free scenarios only. Queues are
// sized in time as LTE base stations size theirs (as S1's are), and hold at least a round
// trip so that one flow alone can fill its path; 10 packets at least so that a burst of
// segments from one ACK fits a slow path's queue.
var Default = Ranges{
	Paths:     [2]int{2, 4},
	Rate:      [2]float64{1e6, 100e6},
	Spread:    50,
	Delay:     [2]time.Duration{5 * time.Millisecond, 120 * time.Millisecond},
	Jitter:    [2]time.Duration{0, 5 * time.Millisecond},
	Loss:      [2]float64{0, 0.01},
	LossFree:  0.5,
	CC:        []string{"cubic", "bbr"},
	Flows:     [2]int{1, 4},
	QueueTime: 100 * time.Millisecond,
	MinQueue:  10,
}

// String states the ranges in one line each.
func (r Ranges) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "paths      %d-%d per scenario, uniform\n", r.Paths[0], r.Paths[1])
	fmt.Fprintf(&b, "rate       %s-%s per path, log-uniform; fastest/slowest log-uniform in 1-%g\n",
		scenario.FormatRate(r.Rate[0]), scenario.FormatRate(r.Rate[1]), r.Spread)
	fmt.Fprintf(&b, "delay      %v-%v one-way per path, uniform\n", r.Delay[0], r.Delay[1])
	fmt.Fprintf(&b, "jitter     %v-%v per path, uniform\n", r.Jitter[0], r.Jitter[1])
	fmt.Fprintf(&b, "loss       none in %g %% of scenarios; else %g-%g %% per path, uniform\n",
		100*r.LossFree, 100*r.Loss[0], 100*r.Loss[1])
	fmt.Fprintf(&b, "cc         %s, equally likely\n", strings.Join(r.CC, " or "))
	fmt.Fprintf(&b, "flows      %d-%d, uniform\n", r.Flows[0], r.Flows[1])
	fmt.Fprintf(&b, "queue      the path's rate times max(%v, its round trip), at least %d packets\n", r.QueueTime, r.MinQueue)
	return b.String()
}

// Compare is what every drawn scenario runs: rr is left out, wrr is the static striping
// auto must beat.
var Compare = []string{scenario.ConfigIdeal, scenario.ConfigSingleBest, scenario.ConfigMPTCP, scenario.ConfigWRR, scenario.ConfigAuto}

// Drawn is one drawn scenario: its file and the scenario the file parses to, which is
// what runs (so a rerun of the file is the same scenario).
type Drawn struct {
	Index    int // 1-based
	Name     string
	YAML     []byte
	Scenario *scenario.Scenario
	LossFree bool
}

// set puts resequence and repair ("" keeps the scenario's default) into the drawn
// scenario's file and parses it again: the file, not the draw, is what runs.
func (d *Drawn) set(resequence, repair string) error {
	y := string(d.YAML)
	if resequence != "" {
		y += "resequence: " + resequence + "\n"
	}
	if repair != "" {
		y += "repair: " + repair + "\n"
	}
	s, err := scenario.Parse([]byte(y))
	if err != nil {
		return fmt.Errorf("scenario %s with resequence %q, repair %q: %w", d.Name, resequence, repair, err)
	}
	d.YAML, d.Scenario = []byte(y), s
	return nil
}

// Draw draws n scenarios of duration each. Scenario i comes from its own generator,
// seeded by (seed, i): the first scenarios of a sweep are the same whatever n is, so a
// short sweep is the start of a longer one.
func Draw(r Ranges, seed uint64, n int, duration time.Duration) ([]Drawn, error) {
	out := make([]Drawn, 0, n)
	for i := 1; i <= n; i++ {
		d, err := r.draw(rand.New(rand.NewPCG(seed, uint64(i))), seed, i, duration)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (r Ranges) draw(g *rand.Rand, seed uint64, i int, duration time.Duration) (Drawn, error) {
	np := r.Paths[0] + g.IntN(r.Paths[1]-r.Paths[0]+1)
	// The fastest path's rate, then the spread down to the slowest (not below the range),
	// then the others between the two.
	// Rates are rounded to 0.1 Mbit/s as a person would write them (the slowest one up,
	// so that the spread stays within its bound).
	const step = 1e5
	fast := math.Round(logUniform(g, r.Rate[0], r.Rate[1])/step) * step
	slow := math.Ceil(max(r.Rate[0], fast/logUniform(g, 1, r.Spread))/step) * step
	rates := []float64{fast, slow}
	for len(rates) < np {
		rates = append(rates, math.Round(logUniform(g, slow, fast)/step)*step)
	}
	g.Shuffle(len(rates), func(a, b int) { rates[a], rates[b] = rates[b], rates[a] })
	lossy := g.Float64() >= r.LossFree
	cc := r.CC[g.IntN(len(r.CC))]
	flows := r.Flows[0] + g.IntN(r.Flows[1]-r.Flows[0]+1)

	name := fmt.Sprintf("sweep-%d-%02d", seed, i)
	var b strings.Builder
	fmt.Fprintf(&b, "# Drawn by plait lab sweep --seed %d (scenario %d); rerun it with plait lab run FILE.\n", seed, i)
	fmt.Fprintf(&b, "name: %s\n", name)
	var paths []string
	lossFree := true
	for k, rate := range rates {
		// Rounded as a person would write them; the file, not the draw, is what runs.
		delay := time.Duration(uniform(g, float64(r.Delay[0]), float64(r.Delay[1]))).Round(time.Millisecond)
		jitter := time.Duration(uniform(g, float64(r.Jitter[0]), float64(r.Jitter[1]))).Round(100 * time.Microsecond)
		lossPct := 0.0 // in hundredths of a percent
		if lossy {
			lossPct = math.Round(uniform(g, r.Loss[0], r.Loss[1])*1e4) / 100
			lossFree = lossFree && lossPct == 0
		}
		queue := max(r.MinQueue, int(math.Ceil(rate*max(r.QueueTime, 2*delay).Seconds()/(1500*8))))
		p := fmt.Sprintf("{name: %c, rate: %s, delay: %s", 'a'+k, scenario.FormatRate(rate), ms(delay))
		if jitter > 0 {
			p += ", jitter: " + ms(jitter)
		}
		if lossPct > 0 {
			p += ", loss: " + strconv.FormatFloat(lossPct, 'f', -1, 64)
		}
		paths = append(paths, p+fmt.Sprintf(", queue: %d}", queue))
	}
	fmt.Fprintf(&b, "description: drawn, %d paths, %s, %d %s flow%s, %s\n", np, spreadText(rates), flows, cc,
		map[bool]string{true: "", false: "s"}[flows == 1], map[bool]string{true: "loss-free", false: "random loss"}[lossFree])
	b.WriteString("paths:\n")
	for _, p := range paths {
		b.WriteString("  - " + p + "\n")
	}
	omit := min(scenario.DefaultOmit, duration/5)
	fmt.Fprintf(&b, "traffic: {duration: %v, omit: %v, cc: %s, flows: %d}\n", duration, omit, cc, flows)
	fmt.Fprintf(&b, "compare: [%s]\n", strings.Join(Compare, ", "))
	s, err := scenario.Parse([]byte(b.String()))
	if err != nil {
		return Drawn{}, fmt.Errorf("drawn scenario %s does not parse (a bug in the drawing): %w", name, err)
	}
	return Drawn{Index: i, Name: name, YAML: []byte(b.String()), Scenario: s, LossFree: lossFree}, nil
}

// ms writes d in milliseconds, as the shipped scenarios do ("45ms", "0.6ms").
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) + "ms"
}

func uniform(g *rand.Rand, lo, hi float64) float64 { return lo + g.Float64()*(hi-lo) }

func logUniform(g *rand.Rand, lo, hi float64) float64 {
	return math.Exp(uniform(g, math.Log(lo), math.Log(hi)))
}

func spreadText(rates []float64) string {
	lo, hi := rates[0], rates[0]
	for _, r := range rates {
		lo, hi = min(lo, r), max(hi, r)
	}
	return fmt.Sprintf("%.1f-%.1f Mbit/s (%.1f:1)", lo/1e6, hi/1e6, hi/lo)
}
