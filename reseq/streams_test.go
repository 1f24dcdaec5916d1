package reseq

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/plait/plait/wire"
)

// A hole holds only the flow whose packet it is: another flow's segments that are next
// in their own flow pass it (when due: not before their path's offset), the struck
// flow's wait, a flow not yet seen waits, and nothing is released twice. A connection
// that opens again over the same addresses and ports starts its flow anew.
func TestHoleHoldsOnlyItsFlow(t *testing.T) {
	seg := func(sport uint16, tcpSeq uint32) []byte {
		f := tcpFrame(sport)
		binary.BigEndian.PutUint32(f[14+20+4:], tcpSeq)
		return f
	}
	var out []string
	b := New(100e6, func(f []byte) {
		out = append(out, fmt.Sprintf("%c%d", 'A'+rune(f[14+20+1]-1), binary.BigEndian.Uint32(f[14+20+4:])))
	})
	b.SetPaths(0b111)                           // path 2 brings nothing: the hole is not proven lost
	b.SetOffsets([wire.MaxPaths]int64{0, 20e6}) // path 1 is 20 ms faster than path 0
	A, B, C := uint16(1), uint16(2), uint16(3)
	push := func(ms int64, frame []byte, seq uint32, path uint8) {
		b.Push(frame, seq, path, ms*1e6)
		b.Expire(ms * 1e6)
	}
	push(0, seg(A, 0), 1, 0)
	push(1, seg(B, 0), 2, 0)
	// seq 3 (A at 1000) is missing
	push(2, seg(B, 1000), 4, 0)
	push(3, seg(A, 2000), 5, 0)
	push(4, seg(B, 2000), 6, 1) // due at 24 ms
	push(5, seg(C, 0), 7, 0)
	if want := []string{"A0", "B0", "B1000"}; !slices.Equal(out, want) {
		t.Fatalf("released %v, want %v", out, want)
	}
	if d := b.Deadline(); d != 24e6 {
		t.Errorf("deadline %d ns, want B's next due at 24 ms", d)
	}
	b.Expire(24e6)
	push(30, seg(A, 1000), 3, 0)
	if want := []string{"A0", "B0", "B1000", "B2000", "A1000", "A2000", "C0"}; !slices.Equal(out, want) {
		t.Fatalf("released %v, want %v", out, want)
	}
	if c := &b.C; c.Ahead.Load() != 2 || c.InOrder.Load() != 5 || c.Holes.Load() != 0 || b.held != 0 || b.next != 8 {
		t.Errorf("ahead %d, in order %d, holes %d, held %d, next %d; want 2, 5, 0, 0, 8",
			c.Ahead.Load(), c.InOrder.Load(), c.Holes.Load(), b.held, b.next)
	}
	// B's addresses and ports open a new connection, its sequence numbers "behind" the
	// old one's: its SYN sets where the flow's data ends, and its data passes a hole again.
	const isn = 0xF0000000
	syn := seg(B, isn)
	syn[14+2], syn[14+3], syn[14+20+13] = 0, 40, 0x02 // no payload, SYN
	push(40, syn, 8, 0)
	// seq 9 is missing
	push(41, seg(B, isn+1), 10, 0)
	if got := out[len(out)-2:]; !slices.Equal(got, []string{"B4026531840", "B4026531841"}) || b.C.Ahead.Load() != 3 {
		t.Errorf("after B opened again: released %v, ahead %d; want its SYN and its data ahead of the hole", out, b.C.Ahead.Load())
	}
}

// Four flows striped over three paths of different delays and jitter, nothing lost:
// every packet reaches the stack once, each flow's in its own order, and many pass holes
// that another flow's packets leave.
func TestFlowsKeepTheirOwnOrder(t *testing.T) {
	type rel struct {
		flow  uint16
		start uint32
	}
	var out []rel
	b := New(MaxHold, func(f []byte) {
		out = append(out, rel{binary.BigEndian.Uint16(f[14+20:]), binary.BigEndian.Uint32(f[14+20+4:])})
	})
	b.SetPaths(0b111)
	type arrival struct {
		at    int64
		seq   uint32
		path  uint8
		frame []byte
	}
	rng := rand.New(rand.NewPCG(1, 2))
	delay := []int64{5e6, 20e6, 45e6}
	var arr []arrival
	const n, flows = 20000, 4
	var sent [flows]uint32
	for i := range n {
		flow := uint16(rng.IntN(flows))
		f := tcpFrame(flow)
		binary.BigEndian.PutUint32(f[14+20+4:], sent[flow]) // 1000 bytes a segment
		sent[flow] += 1000
		path := uint8(rng.IntN(3))
		arr = append(arr, arrival{int64(i)*100e3 + delay[path] + rng.Int64N(2e6), uint32(i), path, f})
	}
	// Each path keeps its own order, as the resequencer's proofs assume.
	for p := range uint8(3) {
		var last int64
		for i := range arr {
			if arr[i].path == p {
				arr[i].at = max(arr[i].at, last)
				last = arr[i].at
			}
		}
	}
	slices.SortStableFunc(arr, func(x, y arrival) int { return int(x.at - y.at) })
	for _, a := range arr {
		b.Push(a.frame, a.seq, a.path, a.at)
		b.Expire(a.at)
	}
	b.Expire(arr[len(arr)-1].at + MaxHold)
	if len(out) != n {
		t.Fatalf("released %d packets of %d", len(out), n)
	}
	last := map[uint16]uint32{}
	for _, r := range out {
		if l, ok := last[r.flow]; ok && r.start <= l {
			t.Fatalf("flow %d: segment at %d released after %d", r.flow, r.start, l)
		}
		last[r.flow] = r.start
	}
	if c := &b.C; c.Holes.Load() != 0 || c.Ahead.Load() < n/10 {
		t.Errorf("holes %d, passed ahead %d of %d; want none given up, many ahead", c.Holes.Load(), c.Ahead.Load(), n)
	}
	t.Logf("passed ahead %d of %d", b.C.Ahead.Load(), n)
}
