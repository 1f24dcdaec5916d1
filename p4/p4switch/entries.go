package p4switch

import (
	"bytes"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Conversions between P4Runtime entities and the pipeline's entries, with the checks of
// the P4Runtime spec: unknown IDs and malformed entries are INVALID_ARGUMENT (NOT_FOUND
// for unknown tables, counters and registers), values wider than their field
// OUT_OF_RANGE.

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// value decodes a binary string that must fit in bits.
func value(b []byte, bits int, what string) (uint64, error) {
	c, err := p4info.Canonical(b, int32(bits))
	if err != nil {
		return 0, status.Errorf(codes.OutOfRange, "%s: %v", what, err)
	}
	v, _ := p4info.Uint(c)
	return v, nil
}

func (b *binding) table(id uint32) (int, error) {
	t, ok := b.tables[id]
	if !ok {
		return 0, status.Errorf(codes.NotFound, "no table with id %d", id)
	}
	return t, nil
}

// toEntry converts a table entry of a Write. withAction is false for DELETE, which
// identifies the entry by its key alone.
func (b *binding) toEntry(te *p4v1.TableEntry, withAction bool) (int, *entry, error) {
	ti, err := b.table(te.GetTableId())
	if err != nil {
		return 0, nil, err
	}
	spec := &tableSpecs[ti]
	e := &entry{metadata: bytes.Clone(te.GetMetadata()), controllerMetadata: te.GetControllerMetadata()}
	if te.GetPriority() != 0 {
		return 0, nil, invalid("table %s has no ternary or range fields: priority must be 0, got %d", spec.name, te.GetPriority())
	}
	if te.GetMeterConfig() != nil || te.GetCounterData() != nil || te.GetMeterCounterData() != nil {
		return 0, nil, invalid("table %s has no direct meters or counters", spec.name)
	}
	if te.GetIdleTimeoutNs() != 0 {
		return 0, nil, invalid("table %s does not support idle timeout", spec.name)
	}
	if te.GetIsDefaultAction() {
		if len(te.GetMatch()) > 0 {
			return 0, nil, invalid("default entry of table %s must have no match fields", spec.name)
		}
	} else if err := b.matchKey(ti, te.GetMatch(), e); err != nil {
		return 0, nil, err
	}
	if !withAction {
		return ti, e, nil
	}
	if te.GetAction() == nil && !te.GetIsDefaultAction() {
		return 0, nil, invalid("table %s entry has no action", spec.name)
	}
	if te.GetAction() != nil {
		if err := b.action(ti, te.GetAction(), e); err != nil {
			return 0, nil, err
		}
	} else {
		e.action = spec.def
	}
	return ti, e, nil
}

func (b *binding) matchKey(ti int, ms []*p4v1.FieldMatch, e *entry) error {
	spec := &tableSpecs[ti]
	seen := make([]bool, len(spec.keys))
	for _, m := range ms {
		ki := -1
		for i, id := range b.fieldIDs[ti] {
			if id == m.GetFieldId() {
				ki = i
			}
		}
		if ki < 0 {
			return invalid("table %s has no match field with id %d", spec.name, m.GetFieldId())
		}
		k := spec.keys[ki]
		if seen[ki] {
			return invalid("table %s: match field %s given twice", spec.name, k.name)
		}
		seen[ki] = true
		switch k.kind {
		case matchExact:
			x := m.GetExact()
			if x == nil {
				return invalid("table %s: match field %s is exact", spec.name, k.name)
			}
			v, err := value(x.GetValue(), k.bits, fmt.Sprintf("table %s field %s", spec.name, k.name))
			if err != nil {
				return err
			}
			e.key[ki] = v
		case matchLPM:
			x := m.GetLpm()
			if x == nil {
				return invalid("table %s: match field %s is lpm", spec.name, k.name)
			}
			if x.GetPrefixLen() <= 0 || int(x.GetPrefixLen()) > k.bits {
				return invalid("table %s field %s: prefix length %d outside 1..%d (omit the field for a don't-care match)", spec.name, k.name, x.GetPrefixLen(), k.bits)
			}
			v, err := value(x.GetValue(), k.bits, fmt.Sprintf("table %s field %s", spec.name, k.name))
			if err != nil {
				return err
			}
			if v&^prefixMask(k.bits, int(x.GetPrefixLen())) != 0 {
				return invalid("table %s field %s: value %#x has bits set beyond prefix length %d", spec.name, k.name, v, x.GetPrefixLen())
			}
			e.key[ki], e.plen = v, int(x.GetPrefixLen())
		}
	}
	for i, k := range spec.keys {
		if !seen[i] && k.kind == matchExact {
			return invalid("table %s: exact match field %s missing", spec.name, k.name)
		}
	}
	return nil
}

func (b *binding) action(ti int, ta *p4v1.TableAction, e *entry) error {
	spec := &tableSpecs[ti]
	a := ta.GetAction()
	if a == nil {
		return invalid("table %s has no action profile: use a direct action", spec.name)
	}
	ai, ok := b.actions[a.GetActionId()]
	if !ok {
		return invalid("no action with id %d", a.GetActionId())
	}
	allowed := false
	for _, x := range spec.actions {
		allowed = allowed || x == ai
	}
	as := &actionSpecs[ai]
	if !allowed {
		return invalid("table %s cannot use action %s", spec.name, as.name)
	}
	seen := make([]bool, len(as.params))
	for _, p := range a.GetParams() {
		pi := -1
		for i, id := range b.paramIDs[ai] {
			if id == p.GetParamId() {
				pi = i
			}
		}
		if pi < 0 {
			return invalid("action %s has no parameter with id %d", as.name, p.GetParamId())
		}
		if seen[pi] {
			return invalid("action %s: parameter %s given twice", as.name, as.params[pi].name)
		}
		seen[pi] = true
		v, err := value(p.GetValue(), as.params[pi].bits, fmt.Sprintf("action %s parameter %s", as.name, as.params[pi].name))
		if err != nil {
			return err
		}
		e.params[pi] = v
	}
	for i, s := range seen {
		if !s {
			return invalid("action %s: parameter %s missing", as.name, as.params[i].name)
		}
	}
	e.action = ai
	return nil
}

// fromEntry is the P4Runtime form of an entry, with canonical binary strings.
func (b *binding) fromEntry(ti int, e *entry, isDefault bool) *p4v1.TableEntry {
	spec := &tableSpecs[ti]
	te := &p4v1.TableEntry{TableId: b.tableIDs[ti], IsDefaultAction: isDefault, Metadata: e.metadata, ControllerMetadata: e.controllerMetadata}
	if !isDefault {
		for ki, k := range spec.keys {
			v := encodeUint(e.key[ki])
			fm := &p4v1.FieldMatch{FieldId: b.fieldIDs[ti][ki]}
			if k.kind == matchLPM {
				if e.plen == 0 {
					continue
				}
				fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: int32(e.plen)}}
			} else {
				fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}
			}
			te.Match = append(te.Match, fm)
		}
	}
	a := &p4v1.Action{ActionId: b.actionIDs[e.action]}
	for pi := range actionSpecs[e.action].params {
		a.Params = append(a.Params, &p4v1.Action_Param{ParamId: b.paramIDs[e.action][pi], Value: encodeUint(e.params[pi])})
	}
	te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
	return te
}

func encodeUint(v uint64) []byte {
	b, _ := p4info.Encode(v, 64)
	return b
}
