package model

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/plait/plait/split"
)

// Constants of Linux's stacks that the predictor uses (see docs/model.md for where each enters).
const (
	cubicBeta     = 0.7                                   // multiplicative decrease
	cubicC        = 0.4                                   // window growth, segments/s³
	cubicAlpha    = 3 * (1 - cubicBeta) / (1 + cubicBeta) // Reno-friendly growth, segments per round trip
	rackPersist   = 16                                    // recoveries a grown RACK window survives without DSACK
	bbrCwndGain   = 2.0                                   // inflight cap in BDPs of min_rtt
	bbrTSOBudget  = 1e-3
	sawtoothSteps = 64
	// bottleneckTol treats paths whose rate/share is within this relative distance of
	// the minimum as saturating together (capacity weights are never exact in floats).
	bottleneckTol = 1e-9
)

// lanes is the flow as the predictor solves it: per used path its share of packets, base
// round trip and how much queueing one packet of excess window adds to it.
type lanes struct {
	idx      []int     // input path index
	f        []float64 // share of packets
	rtt      []float64 // base RTT (s): forward delay (+ EDPF's lead) + reverse delay
	lead     []float64 // queueing that exists even without excess window (EDPF), s
	jitter   []float64 // s
	qpp      []float64 // queueing per packet of excess window, s
	qcap     []float64 // queueing a lane holds before it drops, s (0: it never queues)
	drift    []float64 // queueing a saturated lane gains on the others, s per s (P10)
	capacity float64   // wire bit/s the split can carry
	buffer   float64   // excess packets the bottleneck queues hold before dropping
	loss     float64   // random loss per packet
}

// Predict returns the predicted goodput and behaviour of one Linux TCP flow striped over
// paths by split. The equations are in docs/model.md.
func Predict(paths []Path, sp Split, tcp TCP) (Prediction, error) {
	tcp = tcp.WithDefaults()
	if err := validatePaths(paths); err != nil {
		return Prediction{}, fmt.Errorf("predict: %w", err)
	}
	if err := tcp.validate(); err != nil {
		return Prediction{}, fmt.Errorf("predict: %w", err)
	}
	weights, err := splitWeights(paths, sp)
	if err != nil {
		return Prediction{}, fmt.Errorf("predict: %w", err)
	}
	if sp.Mode == EDPF {
		return predictEDPF(paths, weights, tcp), nil
	}
	return solve(paths, fixedSplit(paths, weights, sp.Mode, tcp), tcp), nil
}

// splitWeights checks the split and returns one non-negative weight per path.
func splitWeights(paths []Path, sp Split) ([]float64, error) {
	if sp.Mode < RR || sp.Mode > EDPF {
		return nil, fmt.Errorf("unknown mode %d", sp.Mode)
	}
	w := make([]float64, len(paths))
	if sp.Weights == nil {
		for i, p := range paths {
			w[i] = 1
			if sp.Mode == WRR {
				w[i] = p.Rate
			}
		}
		return w, nil
	}
	if len(sp.Weights) != len(paths) {
		return nil, fmt.Errorf("%d weights for %d paths: give one weight per path", len(sp.Weights), len(paths))
	}
	used := false
	for i, x := range sp.Weights {
		if !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("weight %v of %s: weights must be finite and at least 0", x, paths[i].label(i))
		}
		if x > 0 {
			used = true
			w[i] = x
			if sp.Mode != WRR {
				w[i] = 1
			}
		}
	}
	if !used {
		return nil, errors.New("all weights are zero: at least one path must carry the flow")
	}
	return w, nil
}

func pktBits(tcp TCP) float64 { return 8 * float64(tcp.MSS+tcp.Overhead) }

// reverseDelay is the one-way delay of the news an ACK carries (P1 of docs/model.md).
func reverseDelay(paths []Path, used []int, tcp TCP) float64 {
	if tcp.AckPath == AckFixed {
		return tcp.AckDelay.Seconds()
	}
	r := math.Inf(1)
	for _, i := range used {
		r = min(r, paths[i].Delay.Seconds())
	}
	return r
}

// fixedSplit builds the lanes of rr and wrr: every used path carries its share whatever
// the load, so the path with the least rate per share saturates first (P2, P4). wrr's
// packets follow the host sender's slot table (split.Apportion), not the weights exactly:
// the lanes the weights saturate together drift apart by what the slots round off (P10).
func fixedSplit(paths []Path, w []float64, mode Mode, tcp TCP) lanes {
	sent := w
	if mode == WRR {
		slots, err := split.Apportion(w, split.HostSlots)
		if err != nil {
			panic(err) // splitWeights checked the weights
		}
		sent = make([]float64, len(w))
		for i, n := range slots {
			sent[i] = float64(n)
		}
	}
	var l lanes
	var total, asked float64
	for i, x := range sent {
		if x > 0 {
			l.idx = append(l.idx, i)
			total += x
			asked += w[i]
		}
	}
	dr := reverseDelay(paths, l.idx, tcp)
	var dmax float64
	for _, i := range l.idx {
		dmax = max(dmax, paths[i].Delay.Seconds())
	}
	l.capacity = math.Inf(1)
	want := math.Inf(1) // the capacity the weights ask for
	for _, i := range l.idx {
		p := paths[i]
		f := sent[i] / total
		l.f = append(l.f, f)
		l.lead = append(l.lead, 0)
		if tcp.Resequenced {
			// The resequencer holds a faster path's packets to the slowest path's delay, and
			// its hold absorbs the jitter: in order, nothing arrives early or late.
			l.rtt = append(l.rtt, dmax+dr)
			l.jitter = append(l.jitter, 0)
		} else {
			l.rtt = append(l.rtt, p.Delay.Seconds()+dr)
			l.jitter = append(l.jitter, p.Jitter.Seconds())
		}
		l.loss += f * p.Loss
		l.capacity = min(l.capacity, p.Rate/f)
		want = min(want, p.Rate*asked/w[i])
	}
	var fk, ak float64
	bott := make([]bool, len(l.idx))
	for k, i := range l.idx {
		if paths[i].Rate*asked/w[i] <= want*(1+bottleneckTol) {
			bott[k] = true
			fk += l.f[k]
			ak += w[i] / asked
		}
	}
	l.buffer = math.Inf(1)
	for k, i := range l.idx {
		q, qcap, drift := 0.0, 0.0, 0.0
		if bott[k] {
			// Excess window spreads over the bottleneck paths by share; all of them
			// queue the same time per packet of it.
			q = pktBits(tcp) / (fk * l.capacity)
			l.buffer = min(l.buffer, paths[i].queue()*fk/l.f[k])
			qcap = paths[i].queue() * fk / l.f[k] * q
			drift = (l.f[k]/fk)/(w[i]/asked/ak) - 1
		}
		l.qpp = append(l.qpp, q)
		l.qcap = append(l.qcap, qcap)
		l.drift = append(l.drift, drift)
	}
	return l
}

// edpfLanes builds the lanes of EDPF over the given paths: one link of their summed rate
// whose every packet arrives at the largest delay, the faster paths holding the
// difference in their queues (the lead). ok is false when a path's queue cannot hold its
// lead: EDPF would then overflow it at any load that needs the slowest path.
func edpfLanes(paths []Path, used []int, tcp TCP) (l lanes, ok bool) {
	dr := reverseDelay(paths, used, tcp)
	var dmax float64
	for _, i := range used {
		l.capacity += paths[i].Rate
		dmax = max(dmax, paths[i].Delay.Seconds())
	}
	pb := pktBits(tcp)
	l.buffer = math.Inf(1)
	ok = true
	for _, i := range used {
		p := paths[i]
		f := p.Rate / l.capacity
		lead := dmax - p.Delay.Seconds()
		spare := p.queue() - lead*p.Rate/pb
		if spare < 0 {
			ok = false
		}
		l.idx = append(l.idx, i)
		l.f = append(l.f, f)
		l.rtt = append(l.rtt, dmax+dr)
		l.lead = append(l.lead, lead)
		l.jitter = append(l.jitter, p.Jitter.Seconds())
		l.qpp = append(l.qpp, pb/l.capacity)
		l.drift = append(l.drift, 0)
		l.qcap = append(l.qcap, 0)
		l.loss += f * p.Loss
		l.buffer = min(l.buffer, max(spare, 0)/f)
	}
	return l, ok
}

// predictEDPF follows EDPF's own choice of paths: it fills the lowest-delay paths first
// and spills onto the next only while the ones it uses are saturated.
func predictEDPF(paths []Path, w []float64, tcp TCP) Prediction {
	var order []int
	for i, x := range w {
		if x > 0 {
			order = append(order, i)
		}
	}
	// EDPF's first choice on idle paths is the earliest arrival of one packet.
	pb := pktBits(tcp)
	first := func(i int) float64 { return paths[i].Delay.Seconds() + pb/paths[i].Rate }
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(first(a), first(b)) })
	var best Prediction
	for k := 1; k <= len(order); k++ {
		l, ok := edpfLanes(paths, order[:k], tcp)
		if !ok {
			break
		}
		p := solve(paths, l, tcp)
		if k == 1 || p.Goodput > best.Goodput {
			best = p
		}
		if p.Limit != LimitCapacity && p.Limit != LimitBuffer {
			break
		}
	}
	return best
}

// solve is P3–P9 of docs/model.md for a set of lanes.
func solve(paths []Path, l lanes, tcp TCP) Prediction {
	pb := pktBits(tcp)
	eta := float64(tcp.MSS) / float64(tcp.MSS+tcp.Overhead)
	n := len(l.idx)

	// P3: base round trips.
	var rbar, rmax float64
	rmin := math.Inf(1)
	for k := range n {
		rbar += l.f[k] * l.rtt[k]
		rmax = max(rmax, l.rtt[k])
		rmin = min(rmin, l.rtt[k])
	}

	// P5: window limits with empty queues.
	x, limit := l.capacity, LimitCapacity
	winBits := 8 * float64(tcp.Window) / eta // wire bits of the window's payload
	if xr := winBits / rmax; xr < x {
		x, limit = xr, LimitWindow
	}
	if tcp.MaxCwnd > 0 {
		if xc := float64(tcp.MaxCwnd) * pb / rbar; xc < x {
			x, limit = xc, LimitCwnd
		}
	}
	if tcp.CC == BBR {
		if xb := bbrInflightCap(pb, rbar, rmin); xb < x {
			x, limit = xb, LimitBBR
		}
	}

	// P6: operating point. excess is the mean number of packets queued beyond the pipe.
	xsat := l.capacity
	var excess, events float64
	run := course{l: l, pb: pb, eta: eta, rbar: rbar, rmin: rmin, rhat: rmax, x: x}
	if limit == LimitCapacity && tcp.CC == Cubic {
		bdp := x * rbar / pb
		elim := math.Inf(1)
		for k := range n {
			if l.qpp[k] > 0 {
				elim = min(elim, (winBits/x-l.rtt[k])/l.qpp[k])
			}
		}
		if tcp.MaxCwnd > 0 {
			elim = min(elim, float64(tcp.MaxCwnd)-bdp)
		}
		if elim < l.buffer {
			// A window limit stops cubic before the queue overflows: the split still
			// runs at capacity, over a standing queue and without losses.
			excess = max(elim, 0)
			run.standing = excess
		} else {
			run.overflow = true
			var qbar float64
			for k := range n {
				qbar += l.f[k] * l.qpp[k]
			}
			util, ex, cycle := cubicSawtooth(bdp, l.buffer, rbar+qbar*l.buffer/2)
			x *= util
			xsat = x
			excess = ex
			events = 1 / cycle
			if util < 1 {
				limit = LimitBuffer
			}
		}
	}

	// P7: random loss.
	if l.loss > 0 {
		var qbar float64
		for k := range n {
			qbar += l.f[k] * l.qpp[k] * excess
		}
		r := rbar + qbar
		lossRate := func(r float64) float64 { return tcp.Flows * cubicLossWindow(l.loss, r) * pb / r }
		if tcp.CC == Cubic && lossRate(r) < x {
			if x0 := lossRate(rbar); x0 < x {
				// The window random loss allows does not fill the pipe, so no queue
				// stands: its round trip is the base one (with the sawtooth's queue in it,
				// a 0.46 % path of 17 Mbit/s read as 1.8, where cubic gets 4.4).
				x, limit, excess = x0, LimitLoss, 0
				run.x, run.overflow, run.standing = x0, false, 0
			} else {
				// The pipe fills, and random loss cuts the window before the queue
				// overflows: the queue stands where the loss window meets the rate.
				lo, hi := 0.0, excess
				for range 40 {
					if mid := (lo + hi) / 2; lossRate(rbar+qbar*mid/excess) < x {
						hi = mid
					} else {
						lo = mid
					}
				}
				excess = lo
			}
		}
		events = max(events, min(l.loss*x/pb, 1/r))
	}

	pred := Prediction{
		Capacity:   l.capacity,
		Limit:      limit,
		Used:       slices.Sorted(slices.Values(l.idx)),
		Share:      make([]float64, len(paths)),
		QueueDelay: make([]float64, len(paths)),
		MinRTT:     rmin,
		Loss:       l.loss,
	}

	// P8: reordering against RACK.
	arr := make([]float64, n) // send-to-ACK time per lane, queueing included
	for k, i := range l.idx {
		q := l.lead[k] + l.qpp[k]*excess
		pred.Share[i] = l.f[k]
		pred.QueueDelay[i] = q
		arr[k] = l.rtt[k] - l.lead[k] + q
		pred.InOrderRTT = max(pred.InOrderRTT, arr[k])
	}
	for k := range n {
		if tcp.Resequenced {
			arr[k] = pred.InOrderRTT // released in order: behind the latest lane's packets
		}
		pred.RTT += l.f[k] * arr[k]
	}
	w0 := rmin / 4
	wmax := pred.InOrderRTT
	if tcp.StaticReoWnd {
		wmax = w0
	}
	pps := x / pb
	for k := range n {
		late := lateness(arr, l.jitter, k)
		var ext float64
		for j := range n {
			ext += l.f[j] * pps * max(0, arr[k]-arr[j])
		}
		pred.Skew = max(pred.Skew, late)
		pred.MeanExtent += l.f[k] * ext
		pred.ReorderedRatio += l.f[k] * (1 - math.Exp(-ext))
		switch {
		case late > wmax:
			pred.Spurious += l.f[k]
		case late > w0:
			steps := math.Ceil(late/w0) - 1
			pred.Spurious += l.f[k] * min(1, steps*pred.RTT*events/rackPersist)
		}
	}
	pred.ReoWnd = w0
	if pred.Skew > w0 && !tcp.StaticReoWnd {
		pred.ReoWnd = min(wmax, w0*math.Ceil(pred.Skew/w0))
	}

	// P9: goodput. Spurious retransmissions take capacity, not window.
	good := min(x, xsat/(1+pred.Spurious))
	pred.WireRate = min(good*(1+pred.Spurious), xsat)
	pred.Goodput = eta * (1 - l.loss) * good
	switch {
	case tcp.Duration == 0:
	case tcp.CC == Cubic:
		run.spurious, run.steady = pred.Spurious, pred.Goodput
		pred.Goodput = cubicRun(run, tcp)
	default:
		pred.Goodput = rampedGoodput(pred.Goodput, x, rbar, tcp, pb, eta)
	}
	return pred
}

// skew is the largest lateness over the lanes (P8's skew).
func skew(a, jitter []float64) float64 {
	var late float64
	for k := range a {
		late = max(late, lateness(a, jitter, k))
	}
	return late
}

// lateness is how long after a later-sent packet of another lane a packet of lane k
// arrives at worst (P8's s_k), given each lane's send-to-ACK time a and jitter.
func lateness(a, jitter []float64, k int) float64 {
	var late float64
	for j := range a {
		if j != k {
			late = max(late, a[k]+jitter[k]-a[j]+jitter[j])
		}
	}
	return late
}

// bbrInflightCap is the rate at which BBR's cwnd, 2·BtlBw·min_rtt plus its quantisation
// budget, just covers the packets in flight X·R̄ (P5). Above 2·min_rtt of pipe the cap
// feeds back on the bandwidth estimate and settles where the budget alone fills the gap.
func bbrInflightCap(pb, rbar, minRTT float64) float64 {
	slack := rbar - bbrCwndGain*minRTT
	if slack <= 0 {
		return math.Inf(1)
	}
	// Budget: 3 TSO bursts of max(2, rate·1 ms) segments, plus the 2 packets of the one
	// probing phase in eight, about 1 on average.
	if x := 7 * pb / slack; x*bbrTSOBudget/pb <= 2 {
		return x
	}
	if slack > 3*bbrTSOBudget {
		return pb / (slack - 3*bbrTSOBudget)
	}
	return math.Inf(1)
}

// cubicSawtooth averages one loss cycle of cubic on a pipe of bdp packets with buffer
// packets of queue (P6): the window falls to β·W_max at each overflow and climbs back
// along the larger of the cubic curve and the Reno-friendly line. It returns the
// utilisation, the mean excess over the pipe (the standing queue) and the cycle time.
func cubicSawtooth(bdp, buffer, rtt float64) (util, excess, cycle float64) {
	wmax := bdp + buffer
	if wmax <= 0 {
		return 1, 0, math.Inf(1)
	}
	k := math.Cbrt(wmax * (1 - cubicBeta) / cubicC)
	cycle = k
	if rtt > 0 {
		cycle = min(k, (1-cubicBeta)*wmax*rtt/cubicAlpha)
	}
	for s := range sawtoothSteps {
		t := (float64(s) + 0.5) * cycle / sawtoothSteps
		w := cubicWindow(cubicBeta*wmax, wmax, t, rtt)
		if bdp > 0 {
			util += min(1, w/bdp)
		} else {
			util++
		}
		excess += max(0, w-bdp)
	}
	return util / sawtoothSteps, excess / sawtoothSteps, cycle
}

// cubicLossWindow is the mean window in segments of cubic under random loss p (RFC 8312
// §5): the larger of the cubic response and the Reno-friendly one.
func cubicLossWindow(p, rtt float64) float64 {
	wc := math.Pow(cubicC*(3+cubicBeta)/(4*(1-cubicBeta)), 0.25) * math.Pow(rtt/p, 0.75)
	wr := math.Sqrt(3 / (2 * p))
	return max(wc, wr)
}

// rampedGoodput is P9's finite transfer: slow start doubles from the initial window each
// base round trip rtt until it fills the pipe, then the steady goodput holds for the
// rest. The goodput counts what arrives between tcp.Omit and tcp.Duration.
func rampedGoodput(steady, x, rtt float64, tcp TCP, pb, eta float64) float64 {
	iw := float64(tcp.InitCwnd)
	rounds := 0.0
	if target := x * rtt / pb; target > iw && rtt > 0 {
		rounds = math.Ceil(math.Log2(target / iw))
	}
	tss := rounds * rtt
	// delivered is the payload (bits) delivered by time t.
	delivered := func(t float64) float64 {
		if t <= 0 {
			return 0
		}
		if t <= tss {
			return min(iw*(math.Exp2(t/rtt)-1)*pb*eta, steady*t)
		}
		return min(iw*(math.Exp2(rounds)-1)*pb*eta, steady*tss) + steady*(t-tss)
	}
	d, o := tcp.Duration.Seconds(), tcp.Omit.Seconds()
	return (delivered(d) - delivered(o)) / (d - o)
}
