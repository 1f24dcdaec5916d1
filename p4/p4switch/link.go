package p4switch

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultQueuePackets is the drop-tail limit of a port whose LinkParams leave it 0.
const DefaultQueuePackets = 1000

// MaxQueuePackets keeps queue depths within plait_tel's 16-bit max_qdepth.
const MaxQueuePackets = 65535

// LinkParams describe the link an egress port emulates.
type LinkParams struct {
	RateBps      uint64        // serialisation rate of L2 frames; 0: unlimited
	Delay        time.Duration // one-way propagation delay
	Jitter       time.Duration // uniform +-Jitter on top of Delay
	Reorder      bool          // let jitter reorder packets; otherwise departures keep order
	LossPercent  float64       // Bernoulli loss, 0..100
	GE           *GilbertElliott
	QueuePackets uint32     // drop-tail limit on packets waiting for serialisation; 0: default
	Down         bool       // drop everything
	Trace        *LinkTrace // deliver at a trace's opportunities (linktrace.go); nil: none
}

// GilbertElliott is two-state loss: each packet first moves the chain, then is lost with
// the probability of the state it is in. It replaces Bernoulli loss when set.
type GilbertElliott struct {
	PGoodToBad, PBadToGood, LossGood, LossBad float64
}

const maxDelay = 10 * time.Second

// Validate reports the first bad value, naming it and its range.
func (p LinkParams) Validate() error {
	prob := func(name string, v float64) error {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return fmt.Errorf("%s %v: want a probability between 0 and 1", name, v)
		}
		return nil
	}
	switch {
	case p.RateBps != 0 && p.RateBps < 1000:
		return fmt.Errorf("rate %d bit/s: want 0 (unlimited) or at least 1kbit", p.RateBps)
	case p.Delay < 0 || p.Delay > maxDelay:
		return fmt.Errorf("delay %v: want 0 to %v", p.Delay, maxDelay)
	case p.Jitter < 0 || p.Jitter > maxDelay:
		return fmt.Errorf("jitter %v: want 0 to %v", p.Jitter, maxDelay)
	case math.IsNaN(p.LossPercent) || p.LossPercent < 0 || p.LossPercent > 100:
		return fmt.Errorf("loss %v%%: want a percentage between 0 and 100", p.LossPercent)
	case p.QueuePackets > MaxQueuePackets:
		return fmt.Errorf("queue %d packets: want 1 to %d (0 for the default %d)", p.QueuePackets, MaxQueuePackets, DefaultQueuePackets)
	}
	if ge := p.GE; ge != nil {
		if err := errors.Join(prob("gilbert-elliott p_good_to_bad", ge.PGoodToBad), prob("gilbert-elliott p_bad_to_good", ge.PBadToGood),
			prob("gilbert-elliott loss_good", ge.LossGood), prob("gilbert-elliott loss_bad", ge.LossBad)); err != nil {
			return err
		}
	}
	return p.Trace.validate()
}

// LinkStats count what an egress port did. The late counts say how faithful the
// emulation was: packets the port's goroutine sent more than 1 or 5 ms after their
// delivery time (a loaded machine descheduled it), which reorders them against other
// links by as much.
type LinkStats struct {
	TxPackets, TxBytes               uint64
	QueueDrops, LossDrops, DownDrops uint64
	QueueDepth                       int
	Late1ms, Late5ms                 uint64
	LateMax                          time.Duration
	ChangesRefused                   uint64 // scheduled changes invalid at their time
	LossBursts                       uint64 // runs of loss drops in a row: LossDrops/LossBursts is the mean burst
}

// link emulates one egress port's link. Packets wait in serq for the transmitter, which
// serialises them back to back at the rate in virtual time: a packet starts at
// max(arrival, end of the previous one), so departures never drift however late the
// port's goroutine wakes. The egress pipeline runs when serialisation starts (it sees the
// time waited and the queue depth found at enqueue); then the packet is lost, or joins
// the delay line until end of serialisation + delay + jitter.
type link struct {
	mu          sync.Mutex
	params      LinkParams
	limit       int
	serq        fifo
	busyUntil   int64
	clock       int64 // the latest time advance ran at
	line        delayLine
	lastDeliver int64
	seq         uint64
	rng         *rand.Rand
	geBad       bool
	lastLost    bool // whether loss took the last packet that met it
	stats       LinkStats
	trace       traceState   // where the link is in its trace (linktrace.go)
	changes     []linkChange // scheduled, in time order

	// armed is when the port's goroutine will next look at the link: 0 while it runs,
	// math.MaxInt64 when it waits for a wake-up only.
	armed int64
	wake  chan struct{}
	// With a tick, packets leave only at the link's TTI boundaries, phase + k·tick (see
	// WithTick); the phase is the link's own, as cells are not synchronised.
	tick, phase int64

	egress func(*packet) // egress pipeline and deparser
	free   func(*packet)
}

func newLink(p LinkParams, now int64, egress, free func(*packet)) *link {
	l := &link{rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), wake: make(chan struct{}, 1), egress: egress, free: free}
	l.setAt(p, now)
	return l
}

// set changes the parameters; queued packets stay and follow the new ones from their
// next step on (a new rate applies to packets not yet serialising, a new delay to packets
// not yet on the wire).
func (l *link) set(p LinkParams) {
	l.params = p
	l.limit = int(p.QueuePackets)
	if l.limit == 0 {
		l.limit = DefaultQueuePackets
	}
}

// enqueue takes a packet from ingress at time now. Ingress stamps a whole receive batch
// with one time, so by the time a packet gets here the port's goroutine may have advanced
// the link past it; the packet then arrives when it is seen, not in the link's past,
// where it would find a queue that had already started serialising.
func (l *link) enqueue(pk *packet, now int64) {
	l.mu.Lock()
	now = max(now, l.clock)
	l.advance(now)
	switch {
	case l.params.Down:
		l.stats.DownDrops++
		l.free(pk)
	case l.serq.len() >= l.limit:
		l.stats.QueueDrops++
		l.free(pk)
	default:
		pk.arrival, pk.qdepth = now, uint32(l.serq.len())
		l.serq.push(pk)
		l.advance(now)
	}
	wake := l.armed != 0 && l.onGrid(l.next()) < l.armed
	if wake {
		l.armed = 0
	}
	l.mu.Unlock()
	if wake {
		l.kick()
	}
}

// kick wakes the port's transmit goroutine from its timer, without waiting: a change or
// an arrival brought its next departure forward. The caller disarmed it under l.mu.
func (l *link) kick() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// disarm disarms the transmit goroutine's timer (l.mu held) and says whether it was armed,
// so that the caller kicks it once l.mu is released.
func (l *link) disarm() bool {
	wake := l.armed != 0
	l.armed = 0
	return wake
}

// advance starts the serialisation of every queued packet whose turn came by now.
func (l *link) advance(now int64) {
	l.clock = max(l.clock, now)
	defer l.applyDue(now)
	for l.serq.len() > 0 {
		pk := l.serq.front()
		start := max(pk.arrival, l.busyUntil)
		if start > now {
			return
		}
		l.applyDue(start)
		l.serq.pop()
		pk.st.sm.enqQdepth = pk.qdepth
		pk.st.sm.deqTimedeltaUs = uint32((start - pk.arrival) / 1000)
		l.egress(pk)
		n := int64(pk.end - pk.off)
		l.busyUntil = start
		if l.params.RateBps > 0 {
			l.busyUntil += n * 8 * int64(time.Second) / int64(l.params.RateBps)
		}
		if l.params.Trace != nil {
			l.busyUntil = max(l.busyUntil, l.trace.depart(start, int(n)))
		}
		if l.params.Down {
			l.stats.DownDrops++
			l.free(pk)
			continue
		}
		lost := l.lose()
		if lost && !l.lastLost {
			l.stats.LossBursts++
		}
		if l.lastLost = lost; lost {
			l.stats.LossDrops++
			l.free(pk)
			continue
		}
		d := l.busyUntil + int64(l.params.Delay)
		if j := int64(l.params.Jitter); j > 0 {
			d = max(d+l.rng.Int64N(2*j+1)-j, l.busyUntil)
		}
		if !l.params.Reorder {
			d = max(d, l.lastDeliver)
		}
		d = l.onGrid(d)
		l.lastDeliver = max(l.lastDeliver, d)
		pk.deliver, pk.seq = d, l.seq
		l.seq++
		l.line.push(pk)
	}
}

func (l *link) lose() bool {
	if ge := l.params.GE; ge != nil {
		if l.geBad {
			l.geBad = l.rng.Float64() >= ge.PBadToGood
		} else {
			l.geBad = l.rng.Float64() < ge.PGoodToBad
		}
		loss := ge.LossGood
		if l.geBad {
			loss = ge.LossBad
		}
		return l.rng.Float64() < loss
	}
	return l.params.LossPercent > 0 && l.rng.Float64()*100 < l.params.LossPercent
}

// popDue moves up to n packets due by now from the delay line to out.
func (l *link) popDue(now int64, out []*packet, n int) []*packet {
	for l.line.len() > 0 && len(out) < n && l.line.head().deliver <= now {
		pk := l.line.pop()
		if late := time.Duration(now - pk.deliver); late > time.Millisecond {
			l.stats.Late1ms++
			if late > 5*time.Millisecond {
				l.stats.Late5ms++
			}
			l.stats.LateMax = max(l.stats.LateMax, late)
		}
		l.stats.TxPackets++
		l.stats.TxBytes += uint64(pk.end - pk.off)
		out = append(out, pk)
	}
	return out
}

// onGrid is the first TTI boundary at or after t (t itself without a tick).
func (l *link) onGrid(t int64) int64 {
	if l.tick == 0 || t == math.MaxInt64 {
		return t
	}
	if r := (t - l.phase) % l.tick; r != 0 {
		t += l.tick - r
	}
	return t
}

// next is the time of the link's next event: a serialisation start or a delivery.
func (l *link) next() int64 {
	n := int64(math.MaxInt64)
	if l.serq.len() > 0 {
		n = max(l.serq.front().arrival, l.busyUntil)
	}
	if l.line.len() > 0 {
		n = min(n, l.line.head().deliver)
	}
	return n
}

func (l *link) snapshot() (LinkParams, LinkStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.stats
	st.QueueDepth = l.serq.len()
	return l.params, st
}

// fifo is a ring buffer of packets.
type fifo struct {
	buf        []*packet
	head, size int
}

func (f *fifo) len() int       { return f.size }
func (f *fifo) front() *packet { return f.buf[f.head] }
func (f *fifo) push(pk *packet) {
	if f.size == len(f.buf) {
		nb := make([]*packet, max(16, 2*len(f.buf)))
		for i := 0; i < f.size; i++ {
			nb[i] = f.buf[(f.head+i)%len(f.buf)]
		}
		f.buf, f.head = nb, 0
	}
	f.buf[(f.head+f.size)%len(f.buf)] = pk
	f.size++
}

func (f *fifo) pop() *packet {
	pk := f.buf[f.head]
	f.buf[f.head] = nil
	f.head = (f.head + 1) % len(f.buf)
	f.size--
	return pk
}

// delayLine is a min-heap on (deliver, seq): delivery order, FIFO among equal times.
// Without reordering the times only grow, so a push costs one comparison.
type delayLine []*packet

func (d delayLine) len() int      { return len(d) }
func (d delayLine) head() *packet { return d[0] }
func (d delayLine) less(i, j int) bool {
	return d[i].deliver < d[j].deliver || d[i].deliver == d[j].deliver && d[i].seq < d[j].seq
}

func (d *delayLine) push(pk *packet) {
	*d = append(*d, pk)
	h := *d
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (d *delayLine) pop() *packet {
	h := *d
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = nil
	h = h[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h.less(l, m) {
			m = l
		}
		if r < n && h.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*d = h
	return top
}
