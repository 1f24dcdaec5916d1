package agent

import (
	"math"
	"time"

	pb "github.com/plait/plait/api/plait/v1"
)

const (
	// triggerEvery is how often the trigger reads the sender's byte counters: a small
	// part of the shortest round trip it serves (tens of ms), and 200 reads a second of
	// a few map lookups each.
	triggerEvery = 5 * time.Millisecond
	// A quiet spell re-arms a trigger: quietSteps steps (500 ms) in which the tunnel sent
	// less than quietShare of its rate. TCP restarts slow start after an idle RTO, and
	// a new flow starts in it, often right behind a little traffic of its own (a ping,
	// iperf3's control connection) that would spoil a wait for silence.
	quietSteps = 100
	quietShare = 0.05
)

// trigger follows one tunnel's queue for its SignalTrigger (see agent.proto).
type trigger struct {
	cfg       *pb.SignalTrigger
	at        uint64             // CLOCK_MONOTONIC ns of the last step
	sent      [quietSteps]uint64 // the byte counter at the last quietSteps steps, a ring
	steps     int
	queue     float64 // s
	busySince uint64  // the last step that found the queue empty
	armed     bool
	start     uint64 // when the tunnel stopped being quiet after it armed; 0 before
	// What the armed trigger saw, for the log: the deepest queue and the longest it stood.
	peak, stood float64
}

// step takes the tunnel's byte counter at now and reports whether to signal.
func (g *trigger) step(now, bytes uint64) bool {
	last := g.sent[(g.steps+quietSteps-1)%quietSteps]
	if g.steps == 0 || bytes < last { // first step, or counters reset with the tunnel
		*g = trigger{cfg: g.cfg, at: now, busySince: now}
		g.sent[0], g.steps = bytes, 1
		return false
	}
	oldest := g.sent[g.steps%quietSteps] // quietSteps steps ago, once there are that many
	g.sent[g.steps%quietSteps] = bytes
	g.steps++
	dt := float64(now-g.at) / 1e9
	g.at = now
	if g.cfg == nil { // keep the history, so that a trigger set just before a flow is armed
		g.armed = false
		return false
	}
	g.queue = math.Max(0, g.queue+float64(bytes-last)*8/g.cfg.RateBps-dt)
	if g.queue == 0 {
		g.busySince = now
	}
	if g.steps > quietSteps && float64(bytes-oldest)*8 < quietShare*g.cfg.RateBps*quietSteps*triggerEvery.Seconds() {
		// What the paths could not drain by now was dropped: a queue that outlives a
		// quiet spell is the rate estimate's error.
		g.armed, g.start, g.queue, g.peak, g.stood = true, 0, 0, 0, 0
		return false
	}
	if !g.armed {
		return false
	}
	if g.start == 0 {
		g.start = now
	}
	if now-g.start > uint64(g.cfg.WindowMs)*uint64(time.Millisecond) {
		g.armed = false
		return false
	}
	standingUs := float64(now-g.busySince) / 1e3
	g.peak, g.stood = max(g.peak, g.queue), max(g.stood, standingUs/1e6)
	if g.queue*1e6 >= g.cfg.QueueUs && standingUs >= g.cfg.StandingUs {
		g.armed = false
		return true
	}
	return false
}

// stepTriggers steps every sending tunnel's trigger, set or not (a quiet spell is read
// from the history), and gives the signals they ask for. Their state is the caller's
// (Run's), not the tunnel's, which every change replaces.
func (a *Agent) stepTriggers(state map[uint32]*trigger) {
	type work struct {
		id, slot uint32
		cfg      *pb.SignalTrigger
	}
	var todo []work
	a.mu.Lock()
	for id, t := range a.tunnels {
		if !t.cfg.ReceiveOnly {
			todo = append(todo, work{id, t.slot, t.cfg.SignalTrigger})
		}
	}
	a.mu.Unlock()
	live := map[uint32]bool{}
	for _, w := range todo {
		live[w.id] = true
		c, err := a.dp.ReadSender(w.slot)
		if err != nil {
			continue
		}
		var bytes uint64
		for _, b := range c.Bytes {
			bytes += b
		}
		g := state[w.id]
		if g == nil {
			g = &trigger{}
			state[w.id] = g
		}
		g.cfg = w.cfg
		armed := g.armed && g.start != 0
		if !g.step(monoNow(), bytes) {
			if armed && !g.armed && g.cfg != nil {
				a.opts.log.Info("signal trigger expired", "tunnel", w.id, "peak_queue_ms", g.peak*1e3, "longest_standing_ms", g.stood*1e3,
					"level_ms", g.cfg.QueueUs/1e3, "standing_ms", g.cfg.StandingUs/1e3)
			}
			continue
		}
		_, err = a.update(w.id, func(t *tunnel) error {
			t.triggered++
			return a.askSignal(t)
		})
		if err != nil {
			a.opts.log.Warn("triggered congestion signal", "tunnel", w.id, "err", err)
		} else {
			a.opts.log.Info("triggered congestion signal", "tunnel", w.id, "queue_ms", g.queue*1e3, "standing_ms", g.stood*1e3)
		}
	}
	for id := range state {
		if !live[id] {
			delete(state, id)
		}
	}
}
