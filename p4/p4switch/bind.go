package p4switch

import (
	"fmt"
	"slices"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"github.com/plait/plait/p4/p4info"
)

// binding maps one P4Info's IDs onto the pipeline's objects. A P4Info binds only if it
// describes plait.p4: the same tables, match fields, actions, parameters, counters,
// registers and controller headers, by name and width (IDs may be anything).
type binding struct {
	info *p4info.Info

	tables   map[uint32]int
	tableIDs [numTables]uint32
	fieldIDs [numTables][]uint32 // by key index

	actions   map[uint32]int
	actionIDs [numActions]uint32
	paramIDs  [numActions][]uint32 // by parameter index

	counters   map[uint32]int
	counterIDs [numCounters]uint32

	registers   map[uint32]int
	registerIDs [numRegisters]uint32

	packetIn, packetOut []uint32 // metadata IDs by field index
}

func bind(info *p4info.Info) (*binding, error) {
	b := &binding{info: info, tables: map[uint32]int{}, actions: map[uint32]int{}, counters: map[uint32]int{}, registers: map[uint32]int{}}
	p := info.P4Info
	if n, want := len(p.GetTables()), numTables; n != want {
		return nil, fmt.Errorf("p4info has %d tables, plait.p4 has %d", n, want)
	}
	if n, want := len(p.GetActions()), numActions; n != want {
		return nil, fmt.Errorf("p4info has %d actions, plait.p4 has %d", n, want)
	}
	if n, want := len(p.GetCounters())+len(p.GetDirectCounters()), numCounters; n != want {
		return nil, fmt.Errorf("p4info has %d counters, plait.p4 has %d", n, want)
	}
	if n, want := len(p.GetRegisters()), numRegisters; n != want {
		return nil, fmt.Errorf("p4info has %d registers, plait.p4 has %d", n, want)
	}
	if len(p.GetMeters())+len(p.GetDirectMeters())+len(p.GetActionProfiles())+len(p.GetDigests())+len(p.GetValueSets())+len(p.GetExterns()) != 0 {
		return nil, fmt.Errorf("p4info has meters, action profiles, digests, value sets or externs; plait.p4 has none")
	}
	for i, s := range actionSpecs {
		a, err := info.Action(s.name)
		if err != nil {
			return nil, err
		}
		if len(a.GetParams()) != len(s.params) {
			return nil, fmt.Errorf("action %s has %d parameters, plait.p4 has %d", s.name, len(a.GetParams()), len(s.params))
		}
		for _, ps := range s.params {
			prm, err := a.Param(ps.name)
			if err != nil {
				return nil, err
			}
			if int(prm.GetBitwidth()) != ps.bits {
				return nil, fmt.Errorf("action %s parameter %s is bit<%d>, plait.p4 has bit<%d>", s.name, ps.name, prm.GetBitwidth(), ps.bits)
			}
			b.paramIDs[i] = append(b.paramIDs[i], prm.GetId())
		}
		id := a.GetPreamble().GetId()
		b.actions[id], b.actionIDs[i] = i, id
	}
	for i, s := range tableSpecs {
		t, err := info.Table(s.name)
		if err != nil {
			return nil, err
		}
		if t.GetSize() != int64(s.size) {
			return nil, fmt.Errorf("table %s has size %d, plait.p4 has %d", s.name, t.GetSize(), s.size)
		}
		if len(t.GetMatchFields()) != len(s.keys) {
			return nil, fmt.Errorf("table %s has %d match fields, plait.p4 has %d", s.name, len(t.GetMatchFields()), len(s.keys))
		}
		for _, k := range s.keys {
			f, err := t.Field(k.name)
			if err != nil {
				return nil, err
			}
			kind := map[int]p4configv1.MatchField_MatchType{matchExact: p4configv1.MatchField_EXACT, matchLPM: p4configv1.MatchField_LPM}[k.kind]
			if int(f.GetBitwidth()) != k.bits || f.GetMatchType() != kind {
				return nil, fmt.Errorf("table %s field %s is %v bit<%d>, plait.p4 has %v bit<%d>", s.name, k.name, f.GetMatchType(), f.GetBitwidth(), kind, k.bits)
			}
			b.fieldIDs[i] = append(b.fieldIDs[i], f.GetId())
		}
		var refs []int
		for _, r := range t.GetActionRefs() {
			refs = append(refs, b.actions[r.GetId()])
		}
		want := slices.Clone(s.actions)
		slices.Sort(refs)
		slices.Sort(want)
		if !slices.Equal(refs, want) {
			return nil, fmt.Errorf("table %s has other actions than plait.p4", s.name)
		}
		id := t.GetPreamble().GetId()
		b.tables[id], b.tableIDs[i] = i, id
	}
	for i, s := range counterSpecs {
		c, err := info.Counter(s.name)
		if err != nil {
			return nil, err
		}
		if c.GetSize() != int64(s.size) || c.GetSpec().GetUnit() != p4configv1.CounterSpec_BOTH {
			return nil, fmt.Errorf("counter %s is %v[%d], plait.p4 has BOTH[%d]", s.name, c.GetSpec().GetUnit(), c.GetSize(), s.size)
		}
		id := c.GetPreamble().GetId()
		b.counters[id], b.counterIDs[i] = i, id
	}
	for i, s := range registerSpecs {
		r, err := info.Register(s.name)
		if err != nil {
			return nil, err
		}
		if int(r.GetSize()) != s.size || int(r.GetTypeSpec().GetBitstring().GetBit().GetBitwidth()) != s.bits {
			return nil, fmt.Errorf("register %s differs from plait.p4's bit<%d>[%d]", s.name, s.bits, s.size)
		}
		id := r.GetPreamble().GetId()
		b.registers[id], b.registerIDs[i] = i, id
	}
	var err error
	if b.packetIn, err = bindHeader(info, "packet_in", packetInFields); err != nil {
		return nil, err
	}
	if b.packetOut, err = bindHeader(info, "packet_out", packetOutFields); err != nil {
		return nil, err
	}
	return b, nil
}

func bindHeader(info *p4info.Info, name string, fields []paramSpec) ([]uint32, error) {
	m, err := info.PacketMetadata(name)
	if err != nil {
		return nil, err
	}
	if len(m.GetMetadata()) != len(fields) {
		return nil, fmt.Errorf("controller header %s has %d fields, plait.p4 has %d", name, len(m.GetMetadata()), len(fields))
	}
	var ids []uint32
	for _, fs := range fields {
		f, err := m.Field(fs.name)
		if err != nil {
			return nil, err
		}
		if int(f.GetBitwidth()) != fs.bits {
			return nil, fmt.Errorf("controller header %s field %s is bit<%d>, plait.p4 has bit<%d>", name, fs.name, f.GetBitwidth(), fs.bits)
		}
		ids = append(ids, f.GetId())
	}
	return ids, nil
}
