package p4switch

import (
	"slices"
	"sync/atomic"
)

// entry is a table entry in the pipeline's terms: key values (the LPM one already
// masked), the prefix length of the LPM key, and the action with its arguments.
type entry struct {
	key    [maxKeys]uint64
	plen   int
	action int
	params [maxParams]uint64

	// Carried for Read: P4Runtime's opaque per-entry data.
	metadata           []byte
	controllerMetadata uint64
}

type entryKey struct {
	key  [maxKeys]uint64
	plen int
}

func (e *entry) id() entryKey { return entryKey{e.key, e.plen} }

// table holds one table's entries. Lookups run under Pipeline.mu read-locked, changes
// under it write-locked.
type table struct {
	spec    *tableSpec
	entries map[entryKey]*entry
	order   []*entry // insertion order, for reads that come back as written
	lens    []int    // prefix lengths in use, longest first
	lenUse  map[int]int
	def     entry
}

func newTable(spec *tableSpec) *table {
	return &table{spec: spec, entries: map[entryKey]*entry{}, lenUse: map[int]int{}, def: entry{action: spec.def}}
}

func prefixMask(bits, plen int) uint64 {
	if plen == 0 {
		return 0
	}
	return (^uint64(0) >> (64 - bits)) &^ (^uint64(0) >> (64 - bits) >> plen)
}

// lookup returns the matching entry, or the default entry and false on a miss. The LPM
// key, if any, prefers the longest prefix.
func (t *table) lookup(k [maxKeys]uint64) (*entry, bool) {
	if t.spec.lpm < 0 {
		if e, ok := t.entries[entryKey{k, 0}]; ok {
			return e, true
		}
		return &t.def, false
	}
	bits := t.spec.keys[t.spec.lpm].bits
	v := k[t.spec.lpm]
	for _, l := range t.lens {
		k[t.spec.lpm] = v & prefixMask(bits, l)
		if e, ok := t.entries[entryKey{k, l}]; ok {
			return e, true
		}
	}
	return &t.def, false
}

func (t *table) insert(e *entry) {
	t.entries[e.id()] = e
	t.order = append(t.order, e)
	if t.spec.lpm >= 0 {
		if t.lenUse[e.plen]++; t.lenUse[e.plen] == 1 {
			t.lens = append(t.lens, e.plen)
			slices.SortFunc(t.lens, func(a, b int) int { return b - a })
		}
	}
}

func (t *table) remove(e *entry) {
	delete(t.entries, e.id())
	t.order = slices.DeleteFunc(t.order, func(x *entry) bool { return x == e })
	if t.spec.lpm >= 0 {
		if t.lenUse[e.plen]--; t.lenUse[e.plen] == 0 {
			delete(t.lenUse, e.plen)
			t.lens = slices.DeleteFunc(t.lens, func(l int) bool { return l == e.plen })
		}
	}
}

// counterCell is one cell of a packets_and_bytes counter.
type counterCell struct{ packets, bytes atomic.Uint64 }

type counterArray []counterCell

func (c counterArray) count(i int, bytes int) {
	if i >= 0 && i < len(c) {
		c[i].packets.Add(1)
		c[i].bytes.Add(uint64(bytes))
	}
}

// registerArray holds bit<32> cells; fetchAdd is plait.p4's read-then-write of one cell,
// atomic so that ports processing packets in parallel never hand out a number twice.
type registerArray []atomic.Uint64

func (r registerArray) fetchAdd(i int) uint32 {
	if i < 0 || i >= len(r) {
		return 0
	}
	return uint32(r[i].Add(1) - 1)
}
