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
// keep their own order, so no path can still bring it. Docs: docs/datapath.md.
package reseq

import (
	"sync/atomic"

	"github.com/plait/plait/wire"
)

// Window is how many seqs ahead of the next expected one a Buffer holds; a packet beyond
// it makes the Buffer give up the holes in its way. At the hold's cap (MaxHold) it is
// 780 Mbit/s of 1500-byte packets.
const Window = 4096

// Counters are a Buffer's cumulative counts, safe to read while it runs.
type Counters struct {
	InOrder atomic.Uint64 // packets released with no hole given up before them
	Bound   atomic.Uint64 // packets released after a hole waited out the hold bound
	Lost    atomic.Uint64 // packets released after a hole proven lost
	Skipped atomic.Uint64 // packets released early because the window was full or the sequence jumped
	Late    atomic.Uint64 // packets that came after their hole was given up: passed on at once
	Holes   atomic.Uint64 // seqs given up (at the bound, proven lost or skipped)
	Dropped atomic.Uint64 // packets the tunnel device did not take
	Held    atomic.Int64  // packets waiting now
}

type slot struct {
	present bool
	class   *atomic.Uint64 // what its release counts as, set when its hole is given up
	frame   []byte
}

type pathState struct {
	seen bool
	seq  uint32 // highest seq the path delivered
	at   int64  // when, ns
	gap  int64  // smoothed time between its packets, ns
}

type rise struct {
	seq uint32
	at  int64
}

// Buffer is the resequencing state of one tunnel. It is not safe for concurrent use,
// except SetHold and Counters.
type Buffer struct {
	emit    func(frame []byte) // releases a packet; frame is valid only during the call
	hold    atomic.Int64       // ns
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
	C         Counters
}

// New returns a Buffer that hands released packets to emit, holding a packet behind a
// hole at most hold.
func New(hold int64, emit func(frame []byte)) *Buffer {
	b := &Buffer{emit: emit}
	b.hold.Store(hold)
	return b
}

// SetHold changes the hold bound (ns).
func (b *Buffer) SetHold(ns int64) { b.hold.Store(ns) }

// Hold is the hold bound (ns).
func (b *Buffer) Hold() int64 { return b.hold.Load() }

func diff(a, b uint32) int32 { return int32(a - b) }

// Push takes the packet numbered seq that arrived by path at now (ns, monotonic):
// released at once when it is the next, kept when it is ahead of a hole, passed on when
// its hole was given up already.
func (b *Buffer) Push(frame []byte, seq uint32, path uint8, now int64) {
	b.seen(seq, path, now)
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
		b.rises[(b.rHead+b.rN)%Window] = rise{seq, now}
		b.rN++
	}
	switch {
	case d < 0:
		b.C.Late.Add(1)
		b.emit(frame)
		return
	case d == 0:
		b.release(frame, &b.C.InOrder)
		b.drain(&b.C.InOrder)
	default:
		s := &b.slots[seq%Window]
		if s.present { // a duplicate of a packet still held
			return
		}
		s.present, s.class = true, &b.C.InOrder
		s.frame = append(s.frame[:0], frame...)
		b.held++
		b.C.Held.Store(int64(b.held))
	}
	b.Expire(now)
}

// seen notes that path delivered seq at now.
func (b *Buffer) seen(seq uint32, path uint8, now int64) {
	p := &b.paths[path%wire.MaxPaths]
	if p.seen {
		if g := now - p.at; p.gap == 0 {
			p.gap = g
		} else {
			p.gap += (g - p.gap) / 8
		}
		if diff(seq, p.seq) > 0 {
			p.seq = seq
		}
	} else {
		p.seen, p.seq = true, seq
	}
	p.at = now
}

// release emits the next packet.
func (b *Buffer) release(frame []byte, class *atomic.Uint64) {
	class.Add(1)
	b.emit(frame)
	b.next++
	for b.rN > 0 && diff(b.rises[b.rHead].seq, b.next) < 0 {
		b.popRise()
	}
}

func (b *Buffer) popRise() { b.rHead, b.rN = (b.rHead+1)%Window, b.rN-1 }

// drain releases the held packets that follow next without a hole.
func (b *Buffer) drain(class *atomic.Uint64) {
	for b.held > 0 {
		s := &b.slots[b.next%Window]
		if !s.present {
			return
		}
		s.present = false
		b.held--
		b.C.Held.Store(int64(b.held))
		b.release(s.frame, class)
		class = &b.C.InOrder
	}
}

// skip gives up the hole at next, and releases what follows it as class.
func (b *Buffer) skip(class *atomic.Uint64) {
	for !b.slots[b.next%Window].present {
		b.C.Holes.Add(1)
		b.next++
	}
	for b.rN > 0 && diff(b.rises[b.rHead].seq, b.next) < 0 {
		b.popRise()
	}
	b.drain(class)
}

func (b *Buffer) giveUpAll(class *atomic.Uint64) {
	for b.held > 0 {
		b.skip(class)
	}
}

// Deadline is when the hole at next is given up at the latest (ns), or 0 when nothing
// is held.
func (b *Buffer) Deadline() int64 {
	if b.held == 0 || b.rN == 0 {
		return 0
	}
	return b.rises[b.rHead].at + b.hold.Load()
}

// Expire gives up the holes that waited out the bound or are proven lost by now.
func (b *Buffer) Expire(now int64) {
	for b.held > 0 {
		switch {
		case b.provenLost(now):
			b.skip(&b.C.Lost)
		case b.rN == 0 || now >= b.Deadline():
			b.skip(&b.C.Bound)
		default:
			return
		}
	}
}

// provenLost is whether every path in use has delivered a seq beyond next: each path
// keeps its packets' order, so none can still bring it. A path is in use until it has
// been silent for longer than a few of its own packet spacings plus the hold: longer
// than that, a path the split still feeds is not silent, and one it no longer feeds
// cannot hold up a hole.
func (b *Buffer) provenLost(now int64) bool {
	hold := b.hold.Load()
	any := false
	for i := range b.paths {
		p := &b.paths[i]
		if !p.seen || now-p.at > 4*p.gap+hold {
			continue
		}
		if diff(p.seq, b.next) <= 0 {
			return false
		}
		any = true
	}
	return any
}
