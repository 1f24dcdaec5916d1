// Package p4info resolves P4Runtime objects by name, fully qualified
// ("PlaitIngress.port_fwd") or by alias ("port_fwd"), from a P4Info, and builds P4Runtime
// entities from names and plain values. The embedded switch binds its pipeline through it
// and the controller builds its writes with it, so neither hard-codes a numeric ID.
// Docs: docs/switch.md.
package p4info

import (
	"fmt"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"github.com/plait/plait/p4"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// Info indexes one P4Info.
type Info struct {
	P4Info *p4configv1.P4Info

	tables    index[*Table]
	actions   index[*Action]
	counters  index[*p4configv1.Counter]
	registers index[*p4configv1.Register]
	packetMD  index[*PacketMetadata]
}

// Table is a table with its match fields and actions indexed.
type Table struct {
	*p4configv1.Table
	fields      map[string]*p4configv1.MatchField
	fieldsByID  map[uint32]*p4configv1.MatchField
	actionRefs  map[uint32]*p4configv1.ActionRef
	actionNames map[string]uint32
}

// Action is an action with its parameters indexed.
type Action struct {
	*p4configv1.Action
	params     map[string]*p4configv1.Action_Param
	paramsByID map[uint32]*p4configv1.Action_Param
}

// PacketMetadata is a controller header (packet_in, packet_out).
type PacketMetadata struct {
	*p4configv1.ControllerPacketMetadata
	fields map[string]*p4configv1.ControllerPacketMetadata_Metadata
}

type index[T any] struct {
	byName map[string]T
	byID   map[uint32]T
}

func (x *index[T]) add(p *p4configv1.Preamble, v T) error {
	if x.byName == nil {
		x.byName, x.byID = map[string]T{}, map[uint32]T{}
	}
	if _, dup := x.byID[p.GetId()]; dup {
		return fmt.Errorf("duplicate id %#x (%s)", p.GetId(), p.GetName())
	}
	x.byID[p.GetId()] = v
	x.byName[p.GetName()] = v
	if a := p.GetAlias(); a != "" {
		if _, taken := x.byName[a]; !taken {
			x.byName[a] = v
		}
	}
	return nil
}

func (x *index[T]) get(kind, name string) (T, error) {
	v, ok := x.byName[name]
	if !ok {
		return v, fmt.Errorf("p4info has no %s %q", kind, name)
	}
	return v, nil
}

// Default is the P4Info of p4/plait.p4 checked in beside it.
func Default() *Info {
	info, err := Parse(p4.P4InfoText)
	if err != nil {
		panic(fmt.Sprintf("embedded p4/build/plait.p4info.txtpb: %v", err))
	}
	return info
}

// Parse reads a P4Info in protobuf text format (as p4c writes it) or binary.
func Parse(b []byte) (*Info, error) {
	p := &p4configv1.P4Info{}
	if err := prototext.Unmarshal(b, p); err != nil {
		if berr := proto.Unmarshal(b, p); berr != nil {
			return nil, fmt.Errorf("parse p4info: %w", err)
		}
	}
	return New(p)
}

// New indexes p. It fails on duplicate IDs and on references to missing actions.
func New(p *p4configv1.P4Info) (*Info, error) {
	info := &Info{P4Info: p}
	for _, a := range p.GetActions() {
		act := &Action{Action: a, params: map[string]*p4configv1.Action_Param{}, paramsByID: map[uint32]*p4configv1.Action_Param{}}
		for _, prm := range a.GetParams() {
			act.params[prm.GetName()] = prm
			act.paramsByID[prm.GetId()] = prm
		}
		if err := info.actions.add(a.GetPreamble(), act); err != nil {
			return nil, fmt.Errorf("p4info action: %w", err)
		}
	}
	for _, t := range p.GetTables() {
		tab := &Table{
			Table: t, fields: map[string]*p4configv1.MatchField{}, fieldsByID: map[uint32]*p4configv1.MatchField{},
			actionRefs: map[uint32]*p4configv1.ActionRef{}, actionNames: map[string]uint32{},
		}
		for _, f := range t.GetMatchFields() {
			tab.fields[f.GetName()] = f
			tab.fieldsByID[f.GetId()] = f
		}
		for _, r := range t.GetActionRefs() {
			a, ok := info.actions.byID[r.GetId()]
			if !ok {
				return nil, fmt.Errorf("p4info table %s refers to unknown action %#x", t.GetPreamble().GetName(), r.GetId())
			}
			tab.actionRefs[r.GetId()] = r
			tab.actionNames[a.GetPreamble().GetName()] = r.GetId()
			tab.actionNames[a.GetPreamble().GetAlias()] = r.GetId()
		}
		if err := info.tables.add(t.GetPreamble(), tab); err != nil {
			return nil, fmt.Errorf("p4info table: %w", err)
		}
	}
	for _, c := range p.GetCounters() {
		if err := info.counters.add(c.GetPreamble(), c); err != nil {
			return nil, fmt.Errorf("p4info counter: %w", err)
		}
	}
	for _, r := range p.GetRegisters() {
		if err := info.registers.add(r.GetPreamble(), r); err != nil {
			return nil, fmt.Errorf("p4info register: %w", err)
		}
	}
	for _, m := range p.GetControllerPacketMetadata() {
		pm := &PacketMetadata{ControllerPacketMetadata: m, fields: map[string]*p4configv1.ControllerPacketMetadata_Metadata{}}
		for _, f := range m.GetMetadata() {
			pm.fields[f.GetName()] = f
		}
		if err := info.packetMD.add(m.GetPreamble(), pm); err != nil {
			return nil, fmt.Errorf("p4info controller header: %w", err)
		}
	}
	return info, nil
}

// Table resolves a table by name or alias.
func (i *Info) Table(name string) (*Table, error) { return i.tables.get("table", name) }

// TableByID resolves a table by ID.
func (i *Info) TableByID(id uint32) (*Table, bool) { t, ok := i.tables.byID[id]; return t, ok }

// Action resolves an action by name or alias.
func (i *Info) Action(name string) (*Action, error) { return i.actions.get("action", name) }

// ActionByID resolves an action by ID.
func (i *Info) ActionByID(id uint32) (*Action, bool) { a, ok := i.actions.byID[id]; return a, ok }

// Counter resolves an indexed counter by name or alias.
func (i *Info) Counter(name string) (*p4configv1.Counter, error) {
	return i.counters.get("counter", name)
}

// CounterByID resolves a counter by ID.
func (i *Info) CounterByID(id uint32) (*p4configv1.Counter, bool) {
	c, ok := i.counters.byID[id]
	return c, ok
}

// Register resolves a register by name or alias.
func (i *Info) Register(name string) (*p4configv1.Register, error) {
	return i.registers.get("register", name)
}

// RegisterByID resolves a register by ID.
func (i *Info) RegisterByID(id uint32) (*p4configv1.Register, bool) {
	r, ok := i.registers.byID[id]
	return r, ok
}

// PacketMetadata resolves a controller header (packet_in, packet_out) by name.
func (i *Info) PacketMetadata(name string) (*PacketMetadata, error) {
	return i.packetMD.get("controller header", name)
}

// Name is the fully qualified name of the table.
func (t *Table) Name() string { return t.GetPreamble().GetName() }

// Field resolves a match field by name.
func (t *Table) Field(name string) (*p4configv1.MatchField, error) {
	f, ok := t.fields[name]
	if !ok {
		return nil, fmt.Errorf("table %s has no match field %q", t.Name(), name)
	}
	return f, nil
}

// FieldByID resolves a match field by ID.
func (t *Table) FieldByID(id uint32) (*p4configv1.MatchField, bool) {
	f, ok := t.fieldsByID[id]
	return f, ok
}

// ActionRef returns the table's reference to action id, if the table may use it.
func (t *Table) ActionRef(id uint32) (*p4configv1.ActionRef, bool) {
	r, ok := t.actionRefs[id]
	return r, ok
}

// Name is the fully qualified name of the action.
func (a *Action) Name() string { return a.GetPreamble().GetName() }

// Param resolves an action parameter by name.
func (a *Action) Param(name string) (*p4configv1.Action_Param, error) {
	p, ok := a.params[name]
	if !ok {
		return nil, fmt.Errorf("action %s has no parameter %q", a.Name(), name)
	}
	return p, nil
}

// ParamByID resolves an action parameter by ID.
func (a *Action) ParamByID(id uint32) (*p4configv1.Action_Param, bool) {
	p, ok := a.paramsByID[id]
	return p, ok
}

// Field resolves a controller header field by name.
func (m *PacketMetadata) Field(name string) (*p4configv1.ControllerPacketMetadata_Metadata, error) {
	f, ok := m.fields[name]
	if !ok {
		return nil, fmt.Errorf("controller header %s has no field %q", m.GetPreamble().GetName(), name)
	}
	return f, nil
}
