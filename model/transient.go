package model

import "math"

// course is what P10 needs of a solved flow: the lanes, the rate its window limits allow
// (before P6's sawtooth), whether that rate overflows the queues, and the steady goodput
// P9 gives once the flow has settled.
type course struct {
	l        lanes
	pb, eta  float64
	rbar     float64 // pipe round trip without queueing
	rmin     float64 // min_rtt
	rhat     float64 // in-order round trip without queueing: srtt, the cap of reo_wnd
	x        float64 // wire bit/s the window limits allow
	overflow bool    // cubic grows until the queues drop (P6's sawtooth)
	standing float64 // packets of standing queue when a window limit stops cubic first
	spurious float64 // P8's r
	steady   float64 // P9's goodput
}

// cubicWindow is cubic's window τ seconds into an epoch that began at w0 with wmax
// remembered, the larger of the cubic curve and the Reno-friendly line (RFC 8312); with
// no round trip there is no line.
func cubicWindow(w0, wmax, tau, rtt float64) float64 {
	k := math.Cbrt(max(0, wmax-w0) / cubicC)
	w := wmax + cubicC*math.Pow(tau-k, 3)
	if rtt > 0 {
		w = max(w, w0+cubicAlpha*tau/rtt)
	}
	return w
}

// cubicRun is P10: the goodput of a finite cubic transfer, from Omit to Duration, that
// follows the window from the initial window until it settles into P6's steady state.
func cubicRun(c course, tcp TCP) float64 {
	const maxSteps = 1 << 14
	d, o := tcp.Duration.Seconds(), tcp.Omit.Seconds()
	bdp := c.x * c.rbar / c.pb
	full := c.eta * (1 - c.l.loss) * c.x / (1 + c.spurious)
	settle := bdp + c.standing // a window limit stops the climb here
	if c.overflow {
		settle = bdp + c.l.buffer
	}
	reoStep := c.rmin / 4 // one step of RACK's window
	reoCap := c.rhat
	if tcp.StaticReoWnd {
		reoCap = reoStep
	}
	late := skew(c.l.rtt, c.l.jitter) // P8's skew with the queues empty, as at the start
	// A lane later than R̄ loses slow start at the first episode, and one later than R̄
	// by more than a step of reo_wnd is never learnt: its resent segments give srtt no
	// sample, and srtt, the cap of reo_wnd, stays about R̄ (above it by the in-order
	// samples, which the margin stands for).
	startFalls := late > c.rbar
	if late > c.rbar+reoStep {
		reoCap = min(reoCap, c.rbar)
	}
	var drain float64 // the longest queue at the overflow, which the cut drains
	for k := range c.l.f {
		drain = max(drain, c.l.qpp[k]*c.l.buffer)
	}
	floor := bdp // where a cascade stops
	if c.lateUnqueued() {
		floor = float64(tcp.InitCwnd)
	}

	// The lanes' queues from the time tq the window first fills the pipe: the excess
	// window by P4's spread, and each lane's drift, what it gains on the others. The
	// lateness RACK meets counts the drift alone (as P8's steady skew is left out above);
	// a lane overflows when both together fill it.
	tq := -1.0
	arrive := make([]float64, len(c.l.f))
	queues := func(t, w float64) (late float64, over bool) {
		if tq < 0 && w >= bdp {
			tq = t
		}
		for k := range c.l.f {
			q := 0.0
			if c.l.qpp[k] > 0 && tq >= 0 {
				drift := c.l.drift[k] * (t - tq)
				over = over || max(0, w-bdp)*c.l.qpp[k]+drift >= c.l.qcap[k]
				q = max(0, drift)
			}
			arrive[k] = c.l.rtt[k] + q
		}
		return skew(arrive, c.l.jitter), over
	}

	dt := max(c.rbar, d/maxSteps)
	w, steps := float64(tcp.InitCwnd), 1.0
	slowStart, cascaded := true, false
	var epochT, epochW, epochMax, delivered float64
	nextEpisode := c.rmin + reoStep // the first late segment is marked
	epoch := func(t float64) { epochT, epochW, epochMax = t, w, w }
	add := func(t0, t1, rate float64) {
		if t1 = min(t1, d); t1 > o {
			delivered += rate * (t1 - max(t0, o))
		}
	}
	for t := 0.0; t < d; t += dt {
		lateNow, over := queues(t, w)
		reo := min(steps*reoStep, reoCap)
		spurious := lateNow > reo
		if spurious && t >= nextEpisode {
			// A recovery episode lasts the in-order round trip; the next segment
			// of the late lane is marked min_rtt + reo_wnd after it is sent.
			nextEpisode = t + c.rhat + c.rmin + reo
			if startFalls {
				slowStart = false // the first episode ends it, and nothing undoes that
			}
			if !slowStart {
				epoch(t)
			}
			if !tcp.StaticReoWnd {
				steps++ // the episode's DSACK
			}
		}
		if over && c.overflow {
			settle = min(settle, w) // a drifting lane overflows before the others fill
		}
		if w >= settle {
			if !c.overflow || cascaded || len(c.l.f) < 2 || drain <= reo {
				add(t, d, c.steady)
				break
			}
			// The cut drains the queues unevenly, so segments still queued fall
			// further behind the drained lanes than reo_wnd, and their copies
			// overtake them: the cuts stand until no queue is left, or, with a
			// lane late beyond what RACK allows in recovery, nearly no window.
			cascaded = true
			w = settle
			cuts := 0
			for w > floor || cuts == 0 {
				w *= cubicBeta
				cuts++
			}
			epoch(t)
			if cuts > 1 {
				epochMax = w / cubicBeta * (1 + cubicBeta) / 2 // fast convergence
			} else {
				epochMax = settle
			}
			steps = math.Ceil(reoCap / reoStep) // the cascade's DSACKs
		}
		add(t, t+dt, full*min(1, w/bdp))
		switch {
		case slowStart:
			w *= math.Exp2(dt / c.rbar)
			if w >= bdp {
				// HyStart leaves slow start as the queues begin to fill.
				slowStart = false
				w = bdp
				epoch(t + dt)
			}
		case spurious:
			// Every episode restarts cubic's epoch, undone or not: the
			// Reno-friendly line is all the growth there is.
			w += cubicAlpha * dt / c.rbar
		default:
			w = cubicWindow(epochW, epochMax, t+dt-epochT, c.rbar)
		}
	}
	return delivered / (d - o)
}

// lateUnqueued reports whether a queueing lane is at least min_rtt late at empty queues
// behind a fastest lane that never queues (rr on S1-6..8). In recovery Karn's rule
// keeps the late lane's resent segments from sampling srtt, the faster lanes' SACKs
// pull it below that lane's round trip, and with it RACK's window: the lab's chains of
// episodes then went on to a few segments. The threshold is read off the lab (P10).
func (c course) lateUnqueued() bool {
	late := false
	for k := range c.l.f {
		if c.l.qpp[k] == 0 {
			continue
		}
		if c.l.rtt[k] == c.rmin { // the fastest lane queues
			return false
		}
		late = late || lateness(c.l.rtt, c.l.jitter, k) >= c.rmin
	}
	return late
}
