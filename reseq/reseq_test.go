package reseq

import (
	"slices"
	"testing"

	"github.com/plait/plait/wire"
)

// feed pushes packets (seq, path) at given times (ms) and expires after each, as Run does
// after each batch, and records the order of release (frames carry the seq's low byte).
type feed struct {
	b   *Buffer
	out []uint32
}

func newFeed(holdMs int64, paths uint32) *feed {
	f := &feed{}
	f.b = New(holdMs*1e6, func(frame []byte) { f.out = append(f.out, uint32(frame[0])) })
	f.b.steps.Store(0) // the hold as set, for exact times
	f.b.SetPaths(paths)
	return f
}

func (f *feed) push(atMs int64, seq uint32, path uint8) {
	f.b.Push([]byte{byte(seq)}, seq, path, atMs*1e6)
	f.b.Expire(atMs * 1e6)
}

func (f *feed) expire(atMs int64) { f.b.Expire(atMs * 1e6) }

func TestHoleThatFillsReleasesInOrder(t *testing.T) {
	f := newFeed(30, 0b11)
	f.push(0, 1, 0)
	f.push(1, 3, 0) // 2 is on the slow path
	f.push(2, 4, 0)
	f.push(25, 2, 1)
	if want := []uint32{1, 2, 3, 4}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	if c := &f.b.C; c.InOrder.Load() != 4 || c.Holes.Load() != 0 || f.b.Deadline() != 0 {
		t.Errorf("in order %d, holes %d, deadline %d; want 4, 0, none", c.InOrder.Load(), c.Holes.Load(), f.b.Deadline())
	}
}

// A hole waits its bound from the first packet beyond it; what comes after it is late,
// and teaches the hold a step.
func TestHoleGivenUpAtTheBound(t *testing.T) {
	f := newFeed(10, 0b11)
	f.push(0, 1, 0)
	f.push(1, 3, 0)
	if d := f.b.Deadline(); d != 11e6 {
		t.Fatalf("deadline %d ns, want 11 ms", d)
	}
	f.expire(10)
	if len(f.out) != 1 {
		t.Fatalf("released %v before the bound", f.out)
	}
	f.expire(11)
	f.push(12, 2, 1)
	if want := []uint32{1, 3, 2}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	c := &f.b.C
	if c.Bound.Load() != 1 || c.Late.Load() != 1 || c.Holes.Load() != 1 {
		t.Errorf("bound %d, late %d, holes %d; want 1 each", c.Bound.Load(), c.Late.Load(), c.Holes.Load())
	}
	if h := f.b.Hold(); h != 12.5e6 {
		t.Errorf("hold after a late packet %d ns, want 12.5 ms", h)
	}
}

// A hole is proven lost once every path in use has delivered beyond it, for two of the
// slowest path's packet spacings; a path that has not keeps it waiting.
func TestHoleProvenLost(t *testing.T) {
	f := newFeed(50, 0b11)
	for i := range 6 {
		f.push(int64(i), uint32(i), uint8(i%2))
	}
	// Seq 6 (path 0) is lost; path 0 and path 1 then deliver beyond it.
	f.push(6, 7, 1)
	if len(f.out) != 6 {
		t.Fatalf("released %v: path 0 has not delivered beyond the hole", f.out)
	}
	f.push(7, 8, 0)
	f.expire(8)
	if len(f.out) != 6 {
		t.Fatalf("released %v within the proof's confirmation", f.out)
	}
	f.expire(9)
	if want := []uint32{0, 1, 2, 3, 4, 5, 7, 8}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	if c := &f.b.C; c.Lost.Load() != 1 || c.Bound.Load() != 0 {
		t.Errorf("lost %d, bound %d; want 1, 0", c.Lost.Load(), c.Bound.Load())
	}
	// A path in use that has not delivered beyond a hole keeps it waiting for the bound.
	g := newFeed(50, 0b111)
	g.push(0, 1, 0)
	g.push(1, 3, 0)
	g.push(2, 4, 1)
	g.expire(40)
	if len(g.out) != 1 {
		t.Errorf("released %v though path 2 may still bring seq 2", g.out)
	}
}

// A sequence that jumps beyond the window (a sender that started over) flushes what is
// held and restarts.
func TestSequenceJump(t *testing.T) {
	f := newFeed(50, 0b1)
	f.push(0, 1, 0)
	f.push(1, 3, 0)
	f.push(2, 1+2*Window, 0)
	f.push(3, 2+2*Window, 0)
	// The frames carry the seq's low byte.
	if want := []uint32{1, 3, 1, 2}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	if c := &f.b.C; c.Skipped.Load() != 1 || c.InOrder.Load() != 3 {
		t.Errorf("skipped %d, in order %d; want 1, 3", c.Skipped.Load(), c.InOrder.Load())
	}
}

// A pure ACK is not held: it overtakes the data ahead of it, and is not released again
// when its turn comes.
func TestPureACKPasses(t *testing.T) {
	ack := make([]byte, 14+20+20)
	ack[14], ack[14+9], ack[14+3] = 0x45, 6, 40 // IPv4, TCP, 40 bytes
	ack[14+20+12], ack[14+20+13] = 5<<4, 0x10   // no options, ACK
	data := append(append([]byte(nil), ack...), 1)
	data[14+3] = 41
	var out []string
	b := New(50e6, func(f []byte) {
		if _, pure := classify(f); pure {
			out = append(out, "ack")
		} else {
			out = append(out, "data")
		}
	})
	b.SetPaths(0b11)
	b.Push(data, 1, 0, 0)
	b.Push(ack, 3, 0, 1e6) // seq 2 is missing
	b.Push(data, 4, 0, 2e6)
	b.Push(data, 2, 1, 3e6)
	if want := []string{"data", "ack", "data", "data"}; !slices.Equal(out, want) {
		t.Fatalf("released %v, want %v", out, want)
	}
	if b.C.Passed.Load() != 1 || b.held != 0 || b.next != 5 {
		t.Errorf("passed %d, held %d, next %d; want 1, 0, 5", b.C.Passed.Load(), b.held, b.next)
	}
}

// A SYN or SYN-ACK says when a connection opened; its ACK, its data and other protocols
// do not.
func TestOpenedAtSYN(t *testing.T) {
	seg := func(flags byte, payload int) []byte {
		f := make([]byte, 14+20+20+payload)
		f[14], f[14+9], f[14+3] = 0x45, 6, byte(40+payload)
		f[14+20+12], f[14+20+13] = 5<<4, flags
		return f
	}
	udp := seg(0x02, 0)
	udp[14+9] = 17
	b := New(50e6, func([]byte) {})
	for i, c := range []struct {
		frame []byte
		at    int64
		want  int64
	}{{seg(0x10, 0), 1, 0}, {udp, 2, 0}, {seg(0x02, 0), 3, 3}, {seg(0x10, 100), 4, 3}, {seg(0x12, 0), 5, 5}} {
		b.Push(c.frame, uint32(i), 0, c.at)
		if got := b.Opened(); got != c.want {
			t.Errorf("after frame %d (flags %#x): opened %d, want %d", i, c.frame[14+20+13], got, c.want)
		}
	}
}

// With offsets, a packet from a fast path waits its path's offset even when nothing is
// missing before it, so every packet reaches the stack as late as the slowest path's;
// later packets wait behind it, and packets from the slow path (offset 0) that are next
// go at once. Repairs do not wait, and a sequence jump flushes what waits.
func TestOffsetsEqualiseDelays(t *testing.T) {
	f := newFeed(50, 0b11)
	f.b.SetOffsets([wire.MaxPaths]int64{40e6}) // path 0 is 40 ms faster than path 1
	f.push(0, 1, 0)
	if d := f.b.Deadline(); len(f.out) != 0 || d != 40e6 {
		t.Fatalf("released %v, deadline %d at once; want nothing, 40 ms", f.out, d)
	}
	f.push(10, 2, 0)
	f.expire(39)
	if len(f.out) != 0 {
		t.Fatalf("released %v before the offset", f.out)
	}
	f.expire(40)
	if want := []uint32{1}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v at 40 ms, want %v", f.out, want)
	}
	f.push(42, 3, 1) // the slow path's next waits behind seq 2 (due at 50 ms)
	f.expire(49)
	if len(f.out) != 1 {
		t.Fatalf("released %v before seq 2 was due", f.out)
	}
	f.expire(50)
	f.push(60, 4, 1)
	f.push(61, 5, 0|wire.PathRepair)
	if want := []uint32{1, 2, 3, 4, 5}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	if c := &f.b.C; c.InOrder.Load() != 5 || c.Holes.Load() != 0 || f.b.held != 0 {
		t.Errorf("in order %d, holes %d, held %d; want 5, 0, 0", c.InOrder.Load(), c.Holes.Load(), f.b.held)
	}
	f.push(70, 6, 0)
	f.push(71, 6+2*Window, 1)
	if want := []uint32{1, 2, 3, 4, 5, 6, 6}; !slices.Equal(f.out, want) {
		t.Errorf("released %v after a jump, want %v", f.out, want)
	}
}

// A hole behind packets that wait their offset is still given up at its bound, and
// what follows it is released only when due.
func TestOffsetsAndHoles(t *testing.T) {
	f := newFeed(10, 0b11)
	f.b.SetOffsets([wire.MaxPaths]int64{30e6})
	f.push(0, 1, 1)
	f.push(1, 3, 0) // seq 2 missing; 3 due at 31 ms
	f.expire(11)
	if want := []uint32{1}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v at the bound, want %v", f.out, want)
	}
	if d := f.b.Deadline(); d != 31e6 || f.b.C.Holes.Load() != 1 {
		t.Fatalf("deadline %d, holes %d; want 31 ms, 1", d, f.b.C.Holes.Load())
	}
	f.expire(31)
	if want := []uint32{1, 3}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
}
