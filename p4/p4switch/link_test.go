package p4switch

import (
	"math"
	"strings"
	"testing"
	"time"
)

// testLink is a link whose egress stamps a fixed frame length and records what leaves.
func testLink(p LinkParams, frameLen int) (*link, *[]*packet) {
	var freed []*packet
	l := newLink(p, 0, func(pk *packet) { pk.off, pk.end = 0, frameLen }, func(pk *packet) { freed = append(freed, pk) })
	return l, &freed
}

// Departures follow the rate in virtual time even when the link is looked at late and
// rarely: 1000 frames of 1250 B at 10 Mbit/s end exactly 1 ms apart.
func TestRateDoesNotDrift(t *testing.T) {
	l, _ := testLink(LinkParams{RateBps: 10e6, QueuePackets: 2000}, 1250)
	for i := 0; i < 1000; i++ {
		l.enqueue(&packet{}, 0)
	}
	var out []*packet
	for now := int64(0); len(out) < 1000; now += 7_300_000 { // wake every 7.3 ms
		l.mu.Lock()
		l.advance(now)
		out = l.popDue(now, out, 1<<20)
		l.mu.Unlock()
	}
	for i, pk := range out {
		if want := int64(i+1) * int64(time.Millisecond); pk.deliver != want {
			t.Fatalf("frame %d delivered at %d ns, want %d", i, pk.deliver, want)
		}
	}
}

// The egress pipeline sees the time a packet waited for serialisation and the queue it
// found; the drop-tail limit counts packets waiting, not the one serialising.
func TestQueueTelemetryAndLimit(t *testing.T) {
	l, freed := testLink(LinkParams{RateBps: 8e6, QueuePackets: 3}, 1000) // 1 ms per frame
	var pks []*packet
	for i := 0; i < 6; i++ {
		pk := &packet{}
		pks = append(pks, pk)
		l.enqueue(pk, 0)
	}
	if len(*freed) != 2 || l.stats.QueueDrops != 2 {
		t.Fatalf("%d freed, %d queue drops; want 2 (1 serialising + 3 queued)", len(*freed), l.stats.QueueDrops)
	}
	l.mu.Lock()
	l.advance(int64(10 * time.Millisecond))
	l.mu.Unlock()
	for i, pk := range pks[:4] {
		if pk.st.sm.enqQdepth != uint32(max(i-1, 0)) || pk.st.sm.deqTimedeltaUs != uint32(i*1000) {
			t.Errorf("packet %d: enq_qdepth %d deq_timedelta %d us, want %d and %d", i, pk.st.sm.enqQdepth, pk.st.sm.deqTimedeltaUs, max(i-1, 0), i*1000)
		}
	}
}

// A packet stamped before the port's goroutine last advanced the link (ingress stamps a
// whole batch with one time) arrives when it is seen: the wait it reports and the queue it
// found agree, rather than a wait behind a packet that had already left the queue.
func TestLateStampedPacketArrivesWhenSeen(t *testing.T) {
	l, _ := testLink(LinkParams{RateBps: 8e6}, 1000) // 1 ms per frame
	l.enqueue(&packet{}, 0)
	l.enqueue(&packet{}, 0)
	l.mu.Lock()
	l.advance(int64(1500 * time.Microsecond)) // the second frame started at 1 ms
	l.mu.Unlock()
	pk := &packet{}
	l.enqueue(pk, 0)
	l.mu.Lock()
	l.advance(int64(time.Second))
	l.mu.Unlock()
	if pk.st.sm.enqQdepth != 0 || pk.st.sm.deqTimedeltaUs != 500 {
		t.Errorf("enq_qdepth %d deq_timedelta %d us, want 0 and 500 (arrived at 1.5 ms, behind the frame serialising until 2 ms)", pk.st.sm.enqQdepth, pk.st.sm.deqTimedeltaUs)
	}
}

// With a tick, a link delivers only at its TTI boundaries (phase + k·tick), whatever it
// sent before: the first packet after an idle spell waits for a boundary like the rest, so
// a back-to-back train of 5 frames at 33.3 Mbit/s (1.2 ms of serialisation) spans one or
// two ticks by its phase against the grid, and over all phases spans its serialisation
// time on average.
func TestTickDeliversOnTheGrid(t *testing.T) {
	const tick, phase = int64(time.Millisecond), int64(300 * time.Microsecond)
	const frame, rate = 1250, 33.3e6
	ser := float64(frame*8) / rate * 1e9
	var spans float64
	const trains = 100
	for k := 0; k < trains; k++ {
		l, _ := testLink(LinkParams{RateBps: rate, Delay: 20 * time.Millisecond}, frame)
		l.tick, l.phase = tick, phase
		at := int64(k) * tick / trains // every phase of the train against the grid
		for i := 0; i < 5; i++ {
			l.enqueue(&packet{}, at)
		}
		l.mu.Lock()
		l.advance(int64(time.Second))
		out := l.popDue(int64(time.Second), nil, 10)
		l.mu.Unlock()
		for i, pk := range out {
			end := at + int64(float64(i+1)*ser) + int64(20*time.Millisecond)
			if (pk.deliver-phase)%tick != 0 || pk.deliver < end || pk.deliver >= end+tick {
				t.Fatalf("train at %d ns, frame %d: delivered at %d ns, want the first boundary (%d + k·%d) at or after %d", at, i, pk.deliver, phase, tick, end)
			}
		}
		spans += float64(out[4].deliver - out[0].deliver)
	}
	if mean, want := spans/trains, 4*ser; math.Abs(mean-want) > 0.02*want {
		t.Errorf("trains spanned %.0f ns on average, want their serialisation, %.0f ns", mean, want)
	}
}

// A rate change applies to packets not yet serialising and keeps them all.
func TestRateChangeKeepsQueue(t *testing.T) {
	l, freed := testLink(LinkParams{RateBps: 8e6}, 1000)
	for i := 0; i < 4; i++ {
		l.enqueue(&packet{}, 0)
	}
	l.set(LinkParams{RateBps: 16e6})
	var out []*packet
	l.mu.Lock()
	l.advance(int64(time.Second))
	out = l.popDue(int64(time.Second), out, 100)
	l.mu.Unlock()
	if len(out) != 4 || len(*freed) != 0 {
		t.Fatalf("%d delivered, %d dropped after a rate change, want 4 and 0", len(out), len(*freed))
	}
	want := []int64{1e6, 1.5e6, 2e6, 2.5e6} // first at 8 Mbit/s (already serialising), rest at 16
	for i, pk := range out {
		if pk.deliver != want[i] {
			t.Errorf("packet %d delivered at %d, want %d", i, pk.deliver, want[i])
		}
	}
}

// Gilbert–Elliott loss approaches its stationary rate and comes in bursts.
func TestGilbertElliott(t *testing.T) {
	ge := &GilbertElliott{PGoodToBad: 0.02, PBadToGood: 0.25, LossGood: 0, LossBad: 0.8}
	l, _ := testLink(LinkParams{GE: ge}, 100)
	const n = 200000
	lost, runs, prev := 0, 0, false
	for i := 0; i < n; i++ {
		x := l.lose()
		if x {
			lost++
			if !prev {
				runs++
			}
		}
		prev = x
	}
	piBad := ge.PGoodToBad / (ge.PGoodToBad + ge.PBadToGood)
	want := piBad * ge.LossBad
	got := float64(lost) / n
	if math.Abs(got-want) > 0.1*want {
		t.Errorf("loss rate %.4f, want %.4f ±10%%", got, want)
	}
	if burst := float64(lost) / float64(runs); burst < 1.5 {
		t.Errorf("mean loss burst %.2f packets: losses are not correlated", burst)
	}
}

func TestLinkParamsValidate(t *testing.T) {
	cases := []struct {
		name string
		p    LinkParams
		want string
	}{
		{"ok", LinkParams{RateBps: 5e6, Delay: 100 * time.Millisecond, LossPercent: 0.5, QueuePackets: 50}, ""},
		{"tiny rate", LinkParams{RateBps: 10}, "rate"},
		{"negative delay", LinkParams{Delay: -time.Millisecond}, "delay"},
		{"huge jitter", LinkParams{Jitter: time.Hour}, "jitter"},
		{"loss over 100", LinkParams{LossPercent: 101}, "loss"},
		{"loss NaN", LinkParams{LossPercent: math.NaN()}, "loss"},
		{"queue too long", LinkParams{QueuePackets: 70000}, "queue"},
		{"ge probability", LinkParams{GE: &GilbertElliott{PGoodToBad: 2}}, "p_good_to_bad"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate()
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("Validate() = %v, want error mentioning %q", err, c.want)
			}
		})
	}
}

// Down drops new packets and those still queued; up again, the link carries traffic.
func TestDown(t *testing.T) {
	l, freed := testLink(LinkParams{RateBps: 8e6}, 1000)
	for i := 0; i < 3; i++ {
		l.enqueue(&packet{}, 0)
	}
	l.set(LinkParams{RateBps: 8e6, Down: true})
	l.enqueue(&packet{}, 0)
	l.mu.Lock()
	l.advance(int64(time.Second))
	out := l.popDue(int64(time.Second), nil, 100)
	l.mu.Unlock()
	if len(out) != 1 || len(*freed) != 3 || l.stats.DownDrops != 3 {
		t.Fatalf("down: %d out (the one already on the wire), %d dropped, %d down drops; want 1, 3, 3", len(out), len(*freed), l.stats.DownDrops)
	}
	l.set(LinkParams{})
	l.enqueue(&packet{}, int64(time.Second))
	l.mu.Lock()
	out = l.popDue(int64(time.Second), nil, 100)
	l.mu.Unlock()
	if len(out) != 1 {
		t.Errorf("up again: %d out, want 1", len(out))
	}
}
