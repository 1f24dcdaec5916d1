package reseq

import "math"

// streamSlots bounds the TCP flows told apart; a flow that finds no slot (or loses its
// slot to a newer flow) is held behind every hole, as all flows once were. A new flow
// takes the slot of the flow that released nothing for longest among those it probes.
const streamSlots = 256

// seg is what the resequencer needs of a TCP segment that carries data: its flow (one
// direction of a connection, flowKey) and the sequence numbers its data starts and ends
// at, SYN and FIN counting one each; syn, whether it opens a connection.
type seg struct {
	key, start, end uint32
	ok, syn         bool
}

// streams follows each TCP flow through the tunnel: where the data released to the
// stack so far ends, and which held packet (by seq) starts there, its flow's next. A hole
// in the tunnel's sequence that such a packet waits behind is some other flow's packet.
type streams struct {
	key, end [streamSlots]uint32
	used     [streamSlots]bool
	last     [streamSlots]uint64 // the release count at the flow's last release
	next     [streamSlots]uint32 // the seq of the held packet next in the flow
	hasNext  [streamSlots]bool
	// Where held packets not next in their flow wait (seqs), by a hash of their flow and
	// start (behindAt): a table without deletion, whose entries are checked against the
	// packet held at their seq, so that one stale or overwritten only leaves its packet
	// to wait for its turn.
	behind [2 * Window]uint32
	// The flows with a next packet held (indices), and the earliest due time among those
	// the last pass left for not being due (math.MaxInt64: none).
	ready    []int
	due      int64
	releases uint64 // releases so far: the clock of last
}

func (s *streams) init() { s.due = math.MaxInt64 }

func behindAt(key, start uint32) uint32 {
	return (key*0x9E3779B1 ^ start*0x85EBCA77) % (2 * Window)
}

// find returns the slot of key, or where it would go (false).
func (s *streams) find(key uint32) (int, bool) {
	h, old := int(key%streamSlots), -1
	for i := range 8 {
		j := (h + i) % streamSlots
		if !s.used[j] {
			return j, false
		}
		if s.key[j] == key {
			return j, true
		}
		if old < 0 || s.last[j] < s.last[old] {
			old = j
		}
	}
	return old, false
}

// setNext records that the packet held at seq is next in flow j.
func (s *streams) setNext(j int, seq uint32) {
	if !s.hasNext[j] {
		s.ready = append(s.ready, j)
	}
	s.next[j], s.hasNext[j] = seq, true
}

// held notes a packet held at seq.
func (s *streams) held(g seg, seq uint32) {
	if !g.ok {
		return
	}
	if j, found := s.find(g.key); found && s.end[j] == g.start {
		s.setNext(j, seq)
		return
	}
	s.behind[behindAt(g.key, g.start)] = seq
}

// released notes that a packet reached the stack (g: its seg), and returns where its
// flow's next may wait (check the packet held there: ok is only a hint).
func (s *streams) released(g seg) (j int, next uint32, ok bool) {
	if !g.ok {
		return 0, 0, false
	}
	j, found := s.find(g.key)
	s.releases++
	s.last[j] = s.releases
	switch {
	case !found:
		// A flow it takes the slot from loses its next: it no longer starts at end.
		s.key[j], s.end[j], s.used[j] = g.key, g.end, true
	case g.syn || diff(g.end, s.end[j]) > 0:
		// A retransmission does not move the end back; a connection that opens again
		// over the same addresses and ports starts anew.
		s.end[j] = g.end
	default:
		return 0, 0, false
	}
	return j, s.behind[behindAt(g.key, g.end)], true
}
