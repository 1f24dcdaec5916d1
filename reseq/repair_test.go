package reseq

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/plait/plait/model"
	"github.com/plait/plait/wire"
)

// cubicShare is the share of the time a cubic flow's holes may wait for repairs.
var cubicShare = 1 - model.Cubic.Beta()

// With repair on, a hole proven lost waits for its repair, which fills it in order and
// teaches the wait how long a repair takes, as does one that comes too late; a repair
// that does not come costs the hole the wait, not the hold bound.
func TestHoleProvenLostWaitsForRepair(t *testing.T) {
	f := newFeed(5, 0b11)
	f.b.SetRepairWait(20e6, cubicShare)
	for i := range 4 {
		f.push(int64(i), uint32(i), uint8(i%2))
	}
	// Seq 4 (path 0) is lost; both paths deliver beyond it at once: proven lost, and the
	// agent asks for it.
	f.push(4, 5, 1)
	f.b.ExpectRepairs(100e6)
	f.push(5, 6, 0)
	f.push(6, 7, 1)
	f.expire(10) // past the proof's confirmation and the hold bound
	if len(f.out) != 4 {
		t.Fatalf("released %v: the hole did not wait for its repair", f.out)
	}
	f.push(14, 4, 1|wire.PathRepair)
	if want := []uint32{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	c := &f.b.C
	if c.Repairs.Load() != 1 || c.Holes.Load() != 0 || c.Late.Load() != 0 {
		t.Errorf("repairs %d, holes %d, late %d; want 1, 0, 0", c.Repairs.Load(), c.Holes.Load(), c.Late.Load())
	}
	// The repair took 10 ms from the hole's first sighting (seq 5 at 4 ms).
	if w := f.b.RepairWait(); w != 10e6+4*5e6 {
		t.Errorf("repair wait %d ns after one repair of 10 ms, want 30 ms", w)
	}
	// The next loss is asked for but not repaired: given up once it has waited that long.
	f.push(20, 9, 1)
	f.push(21, 10, 0)
	f.expire(49)
	if len(f.out) != 8 {
		t.Fatalf("released %v before the repair wait", f.out)
	}
	f.expire(50)
	if len(f.out) != 10 || c.Lost.Load() != 1 || c.Holes.Load() != 1 {
		t.Errorf("released %v, lost %d, holes %d; want 10 packets, 1 after a hole lost, 1 hole", f.out, c.Lost.Load(), c.Holes.Load())
	}
	// Its repair comes after all, 60 ms after the hole was first seen: a repair slower
	// than the wait teaches it too, or the wait would stay as short as the fastest.
	f.push(80, 8, 1|wire.PathRepair)
	if w := f.b.RepairWait(); w != 16.25e6+4*16.25e6 {
		t.Errorf("repair wait %d ns after a repair of 60 ms came late, want 81.25 ms", w)
	}
	// A loss nobody asked a repair for (the requests expired) is given up once its proof
	// stands, not a repair's wait later.
	f.push(110, 11, 1)
	f.push(111, 13, 0)
	f.push(112, 14, 1)
	proof := f.b.Deadline()
	f.b.ExpectRepairs(300e6)
	if asked := f.b.Deadline(); asked <= proof {
		t.Errorf("deadline %d ns with a repair asked for, %d without: want later", asked, proof)
	}
}

// What a hole may add to TCP's round trip counts from when the packet beyond it was due:
// a fast path's packet waits out its offset in any case, and TCP's round trip holds that
// wait. So a repair that takes longer than MaxHold from the hole's first sighting is still
// waited for while it adds less than MaxHold past that packet's due time.
func TestRepairWaitCountsFromDue(t *testing.T) {
	f := newFeed(5, 0b11)
	f.b.SetRepairWait(300e6, cubicShare)
	f.b.SetOffsets([wire.MaxPaths]int64{0, 60e6}) // path 1 is 60 ms faster than path 0
	f.push(0, 0, 0)
	// Seq 1 (path 0) is lost; seq 2 comes by the fast path at 1 ms (due at 61 ms), and path
	// 0 proves the loss.
	f.push(1, 2, 1)
	f.push(2, 3, 0)
	f.b.ExpectRepairs(1e9)
	if d := f.b.Deadline(); d != 61e6+MaxHold {
		t.Fatalf("deadline %d ns, want %d: MaxHold past seq 2's due time", d, 61e6+MaxHold)
	}
	f.expire(240)
	if len(f.out) != 1 {
		t.Fatalf("released %v at 240 ms: the hole's wait counted from seq 2's arrival", f.out)
	}
	f.push(245, 1, 0|wire.PathRepair)
	if want := []uint32{0, 1, 2, 3}; !slices.Equal(f.out, want) {
		t.Fatalf("released %v, want %v", f.out, want)
	}
	if c := &f.b.C; c.Repairs.Load() != 1 || c.Late.Load() != 0 {
		t.Errorf("repairs %d, late %d; want 1, 0", c.Repairs.Load(), c.Late.Load())
	}
}

// Holes that wait for their repairs hold everything behind them, so their waits past
// the proofs keep to the flows' share of the time (what the window cut they spare
// would cost), beyond one hole's longest wait. A packet a millisecond over two paths, a
// loss every 20 ms that no repair fills: for cubic flows the first hole waits out the
// 100 ms repair wait, and once the budget is spent the stream is no longer a repair
// wait late; for flows that keep their window at a loss (BBR) no hole waits for one.
func TestRepairWaitsKeepToTheirShare(t *testing.T) {
	for _, share := range []float64{cubicShare, 1 - model.BBR.Beta()} {
		var now int64
		arrived := map[uint32]int64{}
		var late []int64 // each released packet's wait, ms
		b := New(5e6, func(frame []byte) {
			late = append(late, (now-arrived[binary.BigEndian.Uint32(frame)])/1e6)
		})
		b.steps.Store(0)
		b.SetPaths(0b11)
		b.SetRepairWait(100e6, share)
		b.ExpectRepairs(1e12)
		for seq := uint32(0); seq < 3000; seq++ {
			now = int64(seq) * 1e6
			if seq%20 != 18 { // path 0 loses every tenth of its packets
				arrived[seq] = now
				b.Push(binary.BigEndian.AppendUint32(nil, seq), seq, uint8(seq%2), now)
			}
			b.Expire(now)
		}
		first := slices.Max(late[:40])
		if share > 0 && first < 99 {
			t.Errorf("share %.1f: the first hole held what followed it %d ms, want the repair wait of 100 ms", share, first)
		}
		if share == 0 && first > 5 {
			t.Errorf("share 0: the first hole held what followed it %d ms, want at most the 5 ms hold bound", first)
		}
		var sum int64
		last := late[len(late)-950:]
		for _, l := range last {
			sum += l
		}
		t.Logf("share %.1f: first hole %d ms; mean wait over the last second %.1f ms", share, first, float64(sum)/float64(len(last)))
		if mean := float64(sum) / float64(len(last)); mean > 100*share+1 {
			t.Errorf("share %.1f: over the last second packets waited %.1f ms on average, want at most %.0f: the waits did not keep to their share", share, mean, 100*share+1)
		}
	}
}
