// Package reseq puts a tunnel's packets back into the order the sender numbered them
// before the receiving host's stack sees them. Striping over paths of different delays
// delivers a flow's segments out of order; TCP takes three segments SACKed beyond a hole
// for a loss and halves its window, and the lab shows that most of a flow's window cuts
// over skewed or jittery paths are such spurious recoveries. The receiver's XDP program
// cannot hold packets, so it hands the decapsulated packets with their seq to the agent
// (ebpf/datapath.ReseqEtherType frames), whose Resequencer releases them onto the
// tunnel device in seq order (socket.go).
//
// A packet behind a hole waits until the hole fills, or at most the hold bound, which
// the agent derives from the paths' measured delays and jitter (Hold). A hole is given up
// at once when it is proven lost: every path in use has delivered a higher seq, and paths
// keep their own order, so no path can still bring it. With repair on (SetRepairWait), a
// hole proven lost waits instead for the sender's repair of it while the agent has asked
// for repairs (ExpectRepairs), as long as a repair has been measured to take. A packet
// from a path faster than the slowest path in use waits the difference (SetOffsets), so
// that the stack sees one path's delay. A TCP segment next in its own flow passes a
// hole that another flow's packet left (passAhead): TCP needs each flow in its order,
// not the tunnel's. Docs: docs/datapath.md.
package reseq

import (
	"encoding/binary"
	"math"
	"sync/atomic"

	"github.com/plait/plait/wire"
)

// The hold bound's limits. Below MinHold the agent's own wake-ups on a busy host are
// the noise, not the paths. MaxHold is Linux's minimum retransmission timeout: TCP's
// timer is at least its smoothed round trip plus that, so a held packet never makes TCP
// time out, and a loss no path proves still reaches TCP in time for fast recovery. Below
// it the hold is what the paths' skew needs: TCP sees the skew as delay, which it
// measures into its round trip, instead of as reordering.
const (
	MinHold = int64(1e6)
	MaxHold = int64(200e6)
)

// Window is how many seqs ahead of the next expected one a Buffer holds; a packet beyond
// it makes the Buffer give up the holes in its way. A hole may hold the packets behind
// it for MaxHold past the due time of the first of them, which may itself wait up to
// MaxHold (its offset): 400 ms of 240 Mbit/s in 1500-byte packets.
const Window = 8192

// maxBudget caps the waits' budget at the longest one hole may wait: MaxHold past a
// due time that may itself be MaxHold away (its offset).
const maxBudget = 2 * MaxHold

// Counters are a Buffer's cumulative counts, safe to read while it runs.
type Counters struct {
	InOrder atomic.Uint64 // packets released with no hole given up before them
	Bound   atomic.Uint64 // packets released after a hole waited out the hold bound
	Lost    atomic.Uint64 // packets released after a hole proven lost
	Skipped atomic.Uint64 // packets released early because the window was full or the sequence jumped
	Late    atomic.Uint64 // packets that came after their hole was given up: passed on at once
	Holes   atomic.Uint64 // seqs given up (at the bound, proven lost or skipped)
	Dropped atomic.Uint64 // packets the tunnel device did not take
	BusyNs  atomic.Uint64 // CPU time spent moving packets, system calls included
	Passed  atomic.Uint64 // pure ACKs passed on ahead of a hole (not held)
	Ahead   atomic.Uint64 // segments passed on ahead of a hole that was not in their flow
	Repairs atomic.Uint64 // repairs that came before their hole was given up
	Held    atomic.Int64  // packets waiting now
}

type slot struct {
	present bool
	sent    bool // passed on ahead of its turn (a pure ACK, a flow's next): nothing to release
	frame   []byte
	seg     seg
	due     int64 // not released before (ns): its arrival plus its path's offset
	// A hole given up while its repair was on its way: its seq and first sighting, so
	// that a repair that comes after all still teaches how long repairs take.
	lostSeq uint32
	lostAt  int64
}

type pathState struct {
	seen bool
	seq  uint32 // highest seq the path delivered
	at   int64  // when it last delivered, ns
	gap  int64  // smoothed time between its packets, ns
}

type rise struct {
	seq uint32
	at  int64
	due int64 // when the packet would have been released, hole or not: at plus its path's offset
}

// Buffer is the resequencing state of one tunnel. It is not safe for concurrent use,
// except SetHold and Counters.
type Buffer struct {
	emit func(frame []byte) // releases a packet; frame is valid only during the call
	hold atomic.Int64       // ns, as the agent measures the paths (SetHold)
	// How long holes take to fill, smoothed as RFC 6298 smooths round trips: the hold
	// is at least fill + 4 × fillVar, the bound a retransmission timer would put on it.
	fill, fillVar atomic.Int64
	// With repair on, how long a repair takes from the hole's first sighting (the
	// request's round trip and the wait for the proof), smoothed the same way; before the
	// first, repairHint, the agent's estimate from the paths' delays (0: repair off).
	repair, repairVar, repairHint atomic.Int64
	// Until when repairs are on their way (ns): a hole proven lost waits for one only
	// while the agent has asked for some (ExpectRepairs).
	expect atomic.Int64
	// The share of the time holes may spend waiting for repairs past the proof that
	// they are lost (float64 bits; SetRepairWait), and what is left of it (ns, at most
	// maxBudget) as of budgetAt.
	share            atomic.Uint64
	budget, budgetAt int64
	// The hold learns from its mistakes as RACK's reordering window does: every packet
	// that comes after its hole was given up adds a quarter of the measured hold (once
	// per hole given up since the last step), and sixteen holes given up without one take
	// a quarter off again. It starts a step up: a hold too short costs the flow a
	// spurious recovery, one too long only delays the repair of a loss no path proved.
	steps   atomic.Int64
	stepSeq uint32
	quiet   int
	inUse   atomic.Uint32 // bit i: path i carries data
	// offset[i] is how long a packet that came by path i waits at least (ns): as much as
	// its path is faster than the slowest path in use (SetOffsets).
	offset  [wire.MaxPaths]atomic.Int64
	opened  atomic.Int64 // when the last TCP connection opened (SYN or SYN-ACK; ns, 0: none)
	proofAt int64        // when the hole at next was first proven lost (0: not)
	started bool
	next    uint32 // the seq released next
	held    int
	slots   [Window]slot
	// rises are the arrivals that raised the highest seq seen, oldest first: the first
	// with a seq above next is when the hole at next was first seen.
	rises     [Window]rise
	rHead, rN int
	maxSeq    uint32
	paths     [wire.MaxPaths]pathState
	flows     flows
	streams   streams
	C         Counters
}

// New returns a Buffer that hands released packets to emit, holding a packet behind a
// hole at most hold.
func New(hold int64, emit func(frame []byte)) *Buffer {
	b := &Buffer{emit: emit}
	b.hold.Store(hold)
	b.steps.Store(1)
	b.budget = maxBudget
	b.streams.init()
	return b
}

// SetHold sets the hold bound as measured (ns).
func (b *Buffer) SetHold(ns int64) { b.hold.Store(ns) }

// SetRepairWait turns waiting for repairs on (ns > 0: how long one is expected to take
// before any has come) or off (0), and sets the share of the time holes may spend
// waiting for them past their proof (0 < share <= 1; else off). A hole that waits holds
// its flow behind it, and that flow's clock with it; one given up reaches TCP as a
// loss, which costs the flow a window cut to β (cubic's 0.7, RFC 9438) until the repair
// that follows the hole turns TCP's retransmission into a duplicate (RFC 2883's DSACK),
// TCP undoes the cut and widens its reordering window. So the waits are held to what
// that cut would cost, 1 - β of the time; a flow that does not cut (BBR) gains nothing
// from a wait. On sweep-3-13's four 35 Mbit/s paths with 0.03-0.33 % loss, about ten
// holes a second each waited up to the 200 ms cap.
func (b *Buffer) SetRepairWait(ns int64, share float64) {
	if !(share > 0) {
		ns = 0
	}
	b.share.Store(math.Float64bits(min(share, 1)))
	b.repairHint.Store(ns)
}

// ExpectRepairs says that the agent has asked for repairs that should come by until
// (ns, monotonic): holes proven lost wait for them until then at the latest. A hole
// whose packet nobody asked for (the agent asks for random losses only) is given up as
// without repair.
func (b *Buffer) ExpectRepairs(until int64) {
	for {
		e := b.expect.Load()
		if until <= e || b.expect.CompareAndSwap(e, until) {
			return
		}
	}
}

// RepairWait is how long a hole proven lost waits for its repair, from its first
// sighting (ns; 0: repair is off): as repairs have taken, or the agent's estimate until
// one has come, within MinHold..MaxHold.
func (b *Buffer) RepairWait() int64 { return min(b.repairWait(), MaxHold) }

// repairWait is RepairWait before MaxHold: deadline limits it from the hole's first
// packet's due time.
func (b *Buffer) repairWait() int64 {
	w := b.repairHint.Load()
	if w == 0 {
		return 0
	}
	if r := b.repair.Load(); r != 0 {
		w = r + 4*b.repairVar.Load()
	}
	return max(w, MinHold)
}

// SetOffsets sets how long a packet that came by each path waits at least (ns, at
// most MaxHold), whether or not a hole is before it: with each path's offset the
// difference between the slowest path's base delay and its own, every packet
// reaches the stack as late as the slowest path's, and TCP sees the paths as one. Its
// estimators assume one path: BBR takes the least round trip it sees for the pipe's,
// cubic's HyStart ends slow start when a round's least sample rises above it, and a
// fast path's packets let through in order make both read the fastest path's delay.
// Pure ACKs and repairs do not wait.
func (b *Buffer) SetOffsets(off [wire.MaxPaths]int64) {
	for i, o := range off {
		b.offset[i].Store(min(max(o, 0), MaxHold))
	}
}

// Opened is when the last TCP connection opened this way (its SYN or SYN-ACK came; ns,
// monotonic; 0: none yet): its data follows a round trip later, split afresh.
func (b *Buffer) Opened() int64 { return b.opened.Load() }

// SetPaths says which paths carry the tunnel's data (bit i: path i); a hole is proven
// lost only once each of them has delivered beyond it. A path the split stopped feeding
// only costs holes their bound until it leaves the set; a path left out of it that still
// carries data makes its packets late.
func (b *Buffer) SetPaths(mask uint32) { b.inUse.Store(mask) }

// Hold is the hold bound in force (ns): as measured, plus what late packets taught it,
// within MinHold..MaxHold.
func (b *Buffer) Hold() int64 { return min(b.holdFor(), MaxHold) }

// holdFor is Hold before MaxHold: deadline limits it from the hole's first packet's due
// time.
func (b *Buffer) holdFor() int64 {
	h := max(b.hold.Load(), b.fill.Load()+4*b.fillVar.Load())
	return max(h+b.steps.Load()*h/4, MinHold)
}

// filled learns from a hole that filled at now, first seen at since.
func (b *Buffer) filled(since, now int64) { smooth(&b.fill, &b.fillVar, now-since) }

// smooth takes sample l into a mean and mean deviation as RFC 6298 does.
func smooth(mean, dev *atomic.Int64, l int64) {
	f, v := mean.Load(), dev.Load()
	if f == 0 {
		mean.Store(l)
		dev.Store(l / 2)
		return
	}
	e := l - f
	mean.Store(f + e/8)
	dev.Store(v + (abs(e)-v)/4)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func diff(a, b uint32) int32 { return int32(a - b) }

// Push takes the packet numbered seq that arrived by path at now (ns, monotonic; path |
// wire.PathRepair: a repair): released at once when it is the next, kept when it is
// ahead of a hole, passed on when its hole was given up already. Holes are given up only
// by Expire, which the caller calls once it has pushed every packet that has arrived: a
// packet that came in time must not find its hole given up because it was read after a
// later one.
func (b *Buffer) Push(frame []byte, seq uint32, path uint8, now int64) {
	repair := path&wire.PathRepair != 0
	g, pure := classify(frame)
	due := now
	if !repair {
		// A repair says nothing of the path it took: it left later, out of its order.
		b.seen(seq, path, now)
		if !pure {
			if o := b.offset[path%wire.MaxPaths].Load(); o > 0 {
				due += o
			}
			b.flows.add(frame, g, now)
			if g.syn {
				b.opened.Store(now)
			}
		}
	}
	if !b.started {
		b.started, b.next, b.maxSeq = true, seq, seq-1
	}
	d := diff(seq, b.next)
	if d <= -Window || d >= Window {
		// The sender started over, or a packet from far ahead: everything held goes, and
		// the sequence restarts here.
		b.giveUpAll(&b.C.Skipped)
		b.next, b.maxSeq, b.rN = seq, seq-1, 0
		d = 0
	}
	if diff(seq, b.maxSeq) > 0 {
		b.maxSeq = seq
		if b.rN == Window {
			b.popRise()
		}
		b.rises[(b.rHead+b.rN)%Window] = rise{seq, now, due}
		b.rN++
	}
	if repair && d < 0 && d > -Window {
		// Measuring only the repairs that came in time would keep the wait as short as
		// the fastest of them: every slower one would be late again.
		if s := &b.slots[seq%Window]; s.lostAt != 0 && s.lostSeq == seq {
			smooth(&b.repair, &b.repairVar, now-s.lostAt)
			s.lostAt = 0
		}
	}
	if repair && d >= 0 {
		b.C.Repairs.Add(1)
		if d == 0 && b.held > 0 {
			smooth(&b.repair, &b.repairVar, now-b.rises[b.rHead].at)
			b.charge(now)
		}
	}
	switch {
	case d < 0:
		b.C.Late.Add(1)
		b.quiet = 0
		if !repair && diff(seq, b.stepSeq) >= 0 && b.Hold() < MaxHold {
			b.steps.Add(1)
			b.stepSeq = b.next
		}
		b.out(frame, g)
		return
	case d == 0 && due <= now:
		if b.held > 0 && !repair {
			b.filled(b.rises[b.rHead].at, now)
		}
		b.release(frame, g, &b.C.InOrder)
		b.drain(&b.C.InOrder, now)
	default:
		s := &b.slots[seq%Window]
		if s.present { // a duplicate of a packet still held
			return
		}
		if d == 0 && b.held > 0 && !repair {
			b.filled(b.rises[b.rHead].at, now)
		}
		s.present, s.due = true, due
		if pure {
			// An ACK that overtakes others costs TCP nothing (the older ones are then
			// ignored), and holding it would add the paths' skew to the round trip of
			// every segment it acknowledges.
			s.sent = true
			b.C.Passed.Add(1)
			b.emit(frame)
		} else {
			s.frame, s.seg = append(s.frame[:0], frame...), g
			b.streams.held(s.seg, seq)
		}
		b.held++
		b.C.Held.Store(int64(b.held))
	}
}

// seen notes that path delivered seq at now.
func (b *Buffer) seen(seq uint32, path uint8, now int64) {
	p := &b.paths[path%wire.MaxPaths]
	if p.seen {
		p.gap += (now - p.at - p.gap) / 8
	}
	if !p.seen || diff(seq, p.seq) > 0 {
		p.seen, p.seq = true, seq
	}
	p.at = now
}

// release emits the next packet (g: its seg).
func (b *Buffer) release(frame []byte, g seg, class *atomic.Uint64) {
	class.Add(1)
	b.out(frame, g)
	b.advance()
}

// out hands frame (g: its seg) to the stack, and finds its flow's next if held.
func (b *Buffer) out(frame []byte, g seg) {
	if j, seq, ok := b.streams.released(g); ok && b.nextIn(j, seq) {
		b.streams.setNext(j, seq)
	}
	b.emit(frame)
}

// nextIn is whether the packet held at seq, behind next, starts where flow j's released
// data ends.
func (b *Buffer) nextIn(j int, seq uint32) bool {
	s := &b.slots[seq%Window]
	return s.present && !s.sent && s.seg.key == b.streams.key[j] && s.seg.start == b.streams.end[j] && diff(seq, b.next) > 0
}

// advance moves on to the next seq.
func (b *Buffer) advance() {
	b.next++
	b.proofAt = 0
	for b.rN > 0 && diff(b.rises[b.rHead].seq, b.next) < 0 {
		b.popRise()
	}
}

func (b *Buffer) popRise() { b.rHead, b.rN = (b.rHead+1)%Window, b.rN-1 }

// drain releases the held packets that follow next without a hole and are due by now.
func (b *Buffer) drain(class *atomic.Uint64, now int64) {
	for b.held > 0 {
		s := &b.slots[b.next%Window]
		if !s.present || (!s.sent && s.due > now) {
			return
		}
		s.present = false
		b.held--
		b.C.Held.Store(int64(b.held))
		if s.sent {
			s.sent = false
			b.advance()
			continue
		}
		b.release(s.frame, s.seg, class)
		class = &b.C.InOrder
	}
}

// skip gives up the hole at next, and releases what follows it as class, as far as it
// is due by now.
func (b *Buffer) skip(class *atomic.Uint64, now int64) {
	waited := class == &b.C.Lost && b.RepairWait() > 0 && b.rN > 0
	if waited {
		b.charge(now)
	}
	b.proofAt = 0
	for !b.slots[b.next%Window].present {
		if waited {
			s := &b.slots[b.next%Window]
			s.lostSeq, s.lostAt = b.next, b.rises[b.rHead].at
		}
		b.C.Holes.Add(1)
		b.next++
		if b.quiet++; b.quiet >= 16 && b.steps.Load() > 0 {
			b.steps.Add(-1)
			b.quiet = 0
		}
	}
	for b.rN > 0 && diff(b.rises[b.rHead].seq, b.next) < 0 {
		b.popRise()
	}
	b.drain(class, now)
}

// giveUpAll releases everything held, due or not.
func (b *Buffer) giveUpAll(class *atomic.Uint64) {
	for b.held > 0 {
		b.skip(class, math.MaxInt64)
	}
}

// Deadline is when the packet at next is due or the hole at next is given up at the
// latest (ns), or 0 when nothing is held.
func (b *Buffer) Deadline() int64 {
	if b.held == 0 {
		return 0
	}
	if s := &b.slots[b.next%Window]; s.present {
		return s.due
	}
	if b.rN == 0 {
		return 0
	}
	d, _ := b.deadline()
	return min(d, b.streams.due)
}

// deadline is when the hole at next is given up, and the class of what it releases: at
// the hold bound, or once proven lost (for a proof's confirmation; with repair on and
// repairs asked for, for as long as a repair takes while they are on their way).
//
// MaxHold limits what a hole adds to the time TCP measures, so it counts from when the
// first packet beyond the hole was due, hole or not: its path's offset is in every
// round trip TCP sees, as the slowest path's delay.
func (b *Buffer) deadline() (int64, *atomic.Uint64) {
	r := b.rises[b.rHead]
	first, limit := r.at, r.due+MaxHold
	bound := min(first+b.holdFor(), limit)
	w := b.repairWait()
	if w > 0 {
		// Its repair is asked for once the path that lost it delivers its next packet:
		// with repair on, a hole also waits for the slowest path to speak.
		bound += b.confirm()
	}
	if b.proofAt == 0 {
		return bound, &b.C.Bound
	}
	lost := b.proofAt + b.confirm()
	if w > 0 {
		if wait := min(first+w, limit, b.expect.Load(), lost+b.budget); wait > lost {
			return wait, &b.C.Lost
		}
	}
	if lost < bound {
		return lost, &b.C.Lost
	}
	return bound, &b.C.Bound
}

// Expire releases the packets due by now and gives up the holes that waited out the
// bound or are proven lost by now.
func (b *Buffer) Expire(now int64) {
	b.budget = min(b.budget+int64(float64(now-b.budgetAt)*math.Float64frombits(b.share.Load())), maxBudget)
	b.budgetAt = now
	for b.held > 0 {
		if s := &b.slots[b.next%Window]; s.present {
			if !s.sent && s.due > now {
				return
			}
			b.drain(&b.C.InOrder, now)
			continue
		}
		if !b.provenLost() {
			b.proofAt = 0
		} else if b.proofAt == 0 {
			b.proofAt = now
		}
		d, class := b.deadline()
		if now < d {
			b.passAhead(now)
			return
		}
		b.skip(class, now)
	}
}

// passAhead passes on the held packets that are due and next in their own flow: the
// hole at next is another flow's, and a loss on one path then holds only the flow it
// struck, as it would cut only its own subflow's window in MPTCP. Each flow still
// reaches the stack in its own order, and no packet before its path's offset.
func (b *Buffer) passAhead(now int64) {
	st := &b.streams
	st.due = math.MaxInt64
	for i := 0; i < len(st.ready); {
		j := st.ready[i]
		seq := st.next[j]
		s := &b.slots[seq%Window]
		switch {
		case !st.hasNext[j] || !b.nextIn(j, seq):
			// Released in its turn, or its flow lost the slot: drain releases it.
			st.hasNext[j] = false
			st.ready[i] = st.ready[len(st.ready)-1]
			st.ready = st.ready[:len(st.ready)-1]
		case s.due > now:
			st.due = min(st.due, s.due)
			i++
		default:
			s.sent = true
			b.C.Ahead.Add(1)
			b.out(s.frame, s.seg) // finds the flow's next, if held: this loop takes it next
		}
	}
}

// charge takes from the waits' share the time the hole at next waited for its repair
// past its proof.
func (b *Buffer) charge(now int64) {
	if b.proofAt != 0 {
		b.budget -= max(now-b.proofAt-b.confirm(), 0)
	}
}

// provenLost is whether every path in use has delivered a seq beyond next: each path
// keeps its packets' order, so none can still bring it.
func (b *Buffer) provenLost() bool {
	mask := b.inUse.Load()
	for i := range b.paths {
		if mask&(1<<i) == 0 {
			continue
		}
		if p := &b.paths[i]; !p.seen || diff(p.seq, b.next) <= 0 {
			return false
		}
	}
	return mask != 0
}

// confirm is how long a proof must stand before the hole is given up: two of the
// slowest path's packet spacings. The sender numbers a packet and queues it on its path
// as two steps, and two CPUs sending at once can queue a higher seq first, which then
// arrives one packet time ahead on the same path: a proof that a hole is lost, until
// the packet comes.
func (b *Buffer) confirm() int64 {
	mask := b.inUse.Load()
	var c int64
	for i := range b.paths {
		if mask&(1<<i) != 0 {
			c = max(c, 2*b.paths[i].gap)
		}
	}
	return c
}

// classify reads what frame (Ethernet, IPv4) is to the resequencer, parsing it once: g,
// its seg when it is a TCP segment with data (a SYN or SYN-ACK opens a connection, its
// data one round trip behind); pure, a TCP segment without payload, SYN, FIN or RST. A
// pure ACK says where its sender's data will start, not where the data that reached the
// stack ends, so it has no seg.
func classify(f []byte) (g seg, pure bool) {
	tcp, payload, ok := tcpSegment(f)
	if !ok {
		return seg{}, false
	}
	n := uint32(max(payload, 0)) + uint32(tcp[13]>>1&1+tcp[13]&1) // SYN and FIN count one
	if n == 0 {
		return seg{}, tcp[13]&0x07 == 0
	}
	key, _ := flowKey(f, 0)
	start := binary.BigEndian.Uint32(tcp[4:])
	return seg{key, start, start + n, true, tcp[13]&0x02 != 0}, false
}

// tcpSegment returns frame's TCP header and how many bytes of payload follow it; not ok
// for anything but IPv4 TCP.
func tcpSegment(f []byte) (tcp []byte, payload int, ok bool) {
	const eth = 14
	if len(f) < eth+20 || f[eth]>>4 != 4 || f[eth+9] != 6 {
		return nil, 0, false
	}
	ihl := int(f[eth]&0x0f) * 4
	if len(f) < eth+ihl+20 {
		return nil, 0, false
	}
	tcp = f[eth+ihl:]
	total := int(f[eth+2])<<8 | int(f[eth+3])
	return tcp, total - ihl - int(tcp[12]>>4)*4, true
}
