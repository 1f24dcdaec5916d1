package p4switch

import (
	"fmt"
	"sort"
	"time"

	"github.com/plait/plait/internal/mmtrace"
)

// LinkTrace makes a link deliver at a recorded trace's opportunities (Mahimahi's mm-link
// semantics): an opportunity is room for mmtrace.OpportunityBytes bytes of IP packet; a
// packet leaves at the opportunity that covers its last byte, a large one spanning
// several and small ones sharing one; what a packet leaves of an opportunity serves the
// next only if it was already queued then, otherwise it is lost. The trace starts at
// Offset into itself when it is set, and repeats. With a rate as well, a packet leaves
// no sooner than its serialisation at the rate from its start: the rate caps the trace.
type LinkTrace struct {
	*mmtrace.Trace
	Offset time.Duration
}

// ethHeader is the frame's bytes outside the IP packet a trace's opportunity carries.
const ethHeader = 14

// traceState is a link's place in its trace.
type traceState struct {
	of     *LinkTrace // the LinkTrace this state follows: a new one restarts it
	cur    mmtrace.Cursor
	left   int   // bytes left of the opportunity at leftAt
	leftAt int64 // the last opportunity used
}

// depart returns when a packet of n frame bytes that reaches the head of the queue at
// start leaves, and uses up the opportunities that carry it.
func (ts *traceState) depart(start int64, frame int) int64 {
	need := max(frame-ethHeader, 1)
	if ts.leftAt == start && ts.left > 0 { // the rest of an opportunity it was queued for
		used := min(need, ts.left)
		ts.left -= used
		if need -= used; need == 0 {
			return start
		}
	}
	ts.cur.SkipTo(start)
	for {
		at := ts.cur.Time()
		ts.cur.Next()
		if need <= mmtrace.OpportunityBytes {
			ts.left, ts.leftAt = mmtrace.OpportunityBytes-need, at
			return at
		}
		need -= mmtrace.OpportunityBytes
	}
}

// follow starts the trace p names at now when it is not the one the link follows.
func (ts *traceState) follow(p *LinkTrace, now int64) {
	if p == ts.of {
		return
	}
	*ts = traceState{of: p}
	if p != nil {
		ts.cur = p.Start(now, p.Offset)
	}
}

func (p *LinkTrace) validate() error {
	if p == nil {
		return nil
	}
	if p.Trace == nil || len(p.Ms) == 0 || p.Ms[len(p.Ms)-1] == 0 {
		return fmt.Errorf("trace: no opportunities, or none after 0 ms")
	}
	if p.Offset < 0 {
		return fmt.Errorf("trace offset %v: want 0 or more", p.Offset)
	}
	return nil
}

// linkChange is a change scheduled for a link: apply gives the parameters from at on.
type linkChange struct {
	at    int64
	apply func(LinkParams) (LinkParams, error)
}

// schedule adds a change; changes apply in time order, those of one time in the order
// they came.
func (l *link) schedule(c linkChange) {
	i := sort.Search(len(l.changes), func(k int) bool { return l.changes[k].at > c.at })
	l.changes = append(l.changes, linkChange{})
	copy(l.changes[i+1:], l.changes[i:])
	l.changes[i] = c
}

// applyDue applies the scheduled changes due by t, in the link's time: a packet that
// starts leaving at or after a change's time sees it. A change that turns out invalid
// against the parameters of its time is counted and skipped.
func (l *link) applyDue(t int64) {
	for len(l.changes) > 0 && l.changes[0].at <= t {
		c := l.changes[0]
		l.changes = l.changes[1:]
		p, err := c.apply(l.params)
		if err == nil {
			err = p.Validate()
		}
		if err != nil {
			l.stats.ChangesRefused++
			continue
		}
		l.setAt(p, c.at)
	}
}

// setAt sets the parameters at time now: a trace that is new starts then.
func (l *link) setAt(p LinkParams, now int64) {
	l.set(p)
	l.trace.follow(p.Trace, now)
}

// ScheduleLinkChange applies apply to a port's link parameters at time at (the switch's
// clock, CLOCK_MONOTONIC ns), exactly in the link's own time.
func (s *Switch) ScheduleLinkChange(port uint16, at int64, apply func(LinkParams) (LinkParams, error)) error {
	sp := s.ports[port]
	if sp == nil {
		return fmt.Errorf("no port %d (ports: %v)", port, s.portNumbers())
	}
	l := sp.link
	l.mu.Lock()
	l.schedule(linkChange{at: at, apply: apply})
	l.advance(max(l.clock, s.now())) // packets due before a change in the past go first
	wake := l.disarm()
	l.mu.Unlock()
	if wake {
		l.kick()
	}
	return nil
}
