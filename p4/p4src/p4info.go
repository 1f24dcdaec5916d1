package p4src

import (
	"fmt"
	"sort"
	"strings"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// P4Info derives the P4Info p4c would emit for the program: fully qualified names, aliases
// as the shortest unique suffix, IDs as p4c assigns them (resource type in the top byte,
// the low 24 bits of the Jenkins one-at-a-time hash of the name, linear probing on
// collisions, names hashed in sorted order within each type), every table's default
// action as its initial_default_action, and an empty type_info (the program has no
// user-defined types). A controller header's preamble carries its @controller_header name
// but p4c hashes the header type's name (p4c's P4RuntimeSymbolTable adds the type):
// packet_in_t gives packet_in 80671331.
func (p *Program) P4Info() *p4configv1.P4Info {
	ids := newIDAllocator()
	var names, chTypes []string
	for _, a := range p.Actions {
		names = append(names, a.Name)
	}
	names = append(names, "NoAction")
	for _, t := range p.Tables {
		names = append(names, t.Name)
	}
	for _, c := range p.Counters {
		names = append(names, c.Name)
	}
	for _, r := range p.Registers {
		names = append(names, r.Name)
	}
	for _, h := range p.ControllerHeaders() {
		chTypes = append(chTypes, h.Name)
	}
	alias := aliases(append(names, chTypes...))

	actionID := ids.assign(p4configv1.P4Ids_ACTION, append(actionNames(p.Actions), "NoAction"))
	tableID := ids.assign(p4configv1.P4Ids_TABLE, tableNames(p.Tables))
	counterID := ids.assign(p4configv1.P4Ids_COUNTER, counterNames(p.Counters))
	registerID := ids.assign(p4configv1.P4Ids_REGISTER, registerNames(p.Registers))
	headerID := ids.assign(p4configv1.P4Ids_CONTROLLER_HEADER, chTypes)

	pre := func(id uint32, name string) *p4configv1.Preamble {
		return &p4configv1.Preamble{Id: id, Name: name, Alias: alias[name]}
	}
	info := &p4configv1.P4Info{PkgInfo: &p4configv1.PkgInfo{Arch: "v1model"}, TypeInfo: &p4configv1.P4TypeInfo{}}
	for _, t := range p.Tables {
		pt := &p4configv1.Table{
			Preamble:             pre(tableID[t.Name], t.Name),
			InitialDefaultAction: &p4configv1.TableActionCall{ActionId: actionID[t.DefaultAction]},
			Size:                 int64(t.Size),
		}
		for i, k := range t.Keys {
			pt.MatchFields = append(pt.MatchFields, &p4configv1.MatchField{
				Id: uint32(i + 1), Name: k.Expr, Bitwidth: int32(k.Bits),
				Match: &p4configv1.MatchField_MatchType_{MatchType: matchType(k.Match)},
			})
		}
		for _, a := range t.Actions {
			pt.ActionRefs = append(pt.ActionRefs, &p4configv1.ActionRef{Id: actionID[a]})
		}
		info.Tables = append(info.Tables, pt)
	}
	used := map[string]bool{}
	for _, t := range p.Tables {
		for _, a := range t.Actions {
			used[a] = true
		}
	}
	emitAction := func(name string, params []Param) {
		pa := &p4configv1.Action{Preamble: pre(actionID[name], name)}
		if name == "NoAction" {
			pa.Preamble.Annotations = []string{`@noWarn("unused")`}
		}
		for i, prm := range params {
			pa.Params = append(pa.Params, &p4configv1.Action_Param{Id: uint32(i + 1), Name: prm.Name, Bitwidth: int32(prm.Bits)})
		}
		info.Actions = append(info.Actions, pa)
	}
	if used["NoAction"] {
		emitAction("NoAction", nil)
	}
	for _, a := range p.Actions {
		if used[a.Name] {
			emitAction(a.Name, a.Params)
		}
	}
	for _, c := range p.Counters {
		info.Counters = append(info.Counters, &p4configv1.Counter{
			Preamble: pre(counterID[c.Name], c.Name),
			Spec:     &p4configv1.CounterSpec{Unit: counterUnit(c.Unit)},
			Size:     int64(c.Size),
		})
	}
	for _, h := range p.ControllerHeaders() {
		cpm := &p4configv1.ControllerPacketMetadata{Preamble: &p4configv1.Preamble{
			Id: headerID[h.Name], Name: h.ControllerHeader, Alias: h.ControllerHeader,
		}}
		cpm.Preamble.Annotations = []string{fmt.Sprintf("@controller_header(%q)", h.ControllerHeader)}
		for i, f := range h.Fields {
			cpm.Metadata = append(cpm.Metadata, &p4configv1.ControllerPacketMetadata_Metadata{Id: uint32(i + 1), Name: f.Name, Bitwidth: int32(f.Bits)})
		}
		info.ControllerPacketMetadata = append(info.ControllerPacketMetadata, cpm)
	}
	for _, r := range p.Registers {
		info.Registers = append(info.Registers, &p4configv1.Register{
			Preamble: pre(registerID[r.Name], r.Name),
			TypeSpec: &p4configv1.P4DataTypeSpec{TypeSpec: &p4configv1.P4DataTypeSpec_Bitstring{
				Bitstring: &p4configv1.P4BitstringLikeTypeSpec{TypeSpec: &p4configv1.P4BitstringLikeTypeSpec_Bit{
					Bit: &p4configv1.P4BitTypeSpec{Bitwidth: int32(r.Bits)},
				}},
			}},
			Size: int32(r.Size),
		})
	}
	return info
}

func matchType(m string) p4configv1.MatchField_MatchType {
	return p4configv1.MatchField_MatchType(p4configv1.MatchField_MatchType_value[strings.ToUpper(m)])
}

func counterUnit(u string) p4configv1.CounterSpec_Unit {
	switch u {
	case "packets":
		return p4configv1.CounterSpec_PACKETS
	case "bytes":
		return p4configv1.CounterSpec_BYTES
	}
	return p4configv1.CounterSpec_BOTH
}

type idAllocator struct{ used map[uint32]bool }

func newIDAllocator() *idAllocator { return &idAllocator{used: map[uint32]bool{}} }

func (a *idAllocator) assign(typ p4configv1.P4Ids_Prefix, names []string) map[string]uint32 {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	ids := map[string]uint32{}
	for _, n := range sorted {
		h := jenkins(n)
		for {
			id := uint32(typ)<<24 | h&0xffffff
			if !a.used[id] {
				a.used[id] = true
				ids[n] = id
				break
			}
			h++
		}
	}
	return ids
}

// jenkins is Bob Jenkins' one-at-a-time hash, which p4c uses for P4Runtime IDs.
func jenkins(s string) uint32 {
	var h uint32
	for i := 0; i < len(s); i++ {
		h += uint32(s[i])
		h += h << 10
		h ^= h >> 6
	}
	h += h << 3
	h ^= h >> 11
	h += h << 15
	return h
}

// aliases gives every name its shortest dot-separated suffix that no other name shares.
func aliases(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		parts := strings.Split(n, ".")
		for i := len(parts) - 1; i >= 0; i-- {
			suffix := strings.Join(parts[i:], ".")
			unique := true
			for _, o := range names {
				if o != n && (o == suffix || strings.HasSuffix(o, "."+suffix)) {
					unique = false
				}
			}
			if unique || i == 0 {
				out[n] = suffix
				break
			}
		}
	}
	return out
}

func actionNames(as []*Action) []string {
	var n []string
	for _, a := range as {
		n = append(n, a.Name)
	}
	return n
}

func tableNames(ts []*Table) []string {
	var n []string
	for _, t := range ts {
		n = append(n, t.Name)
	}
	return n
}

func counterNames(cs []*Counter) []string {
	var n []string
	for _, c := range cs {
		n = append(n, c.Name)
	}
	return n
}

func registerNames(rs []*Register) []string {
	var n []string
	for _, r := range rs {
		n = append(n, r.Name)
	}
	return n
}
