package p4src

import (
	"fmt"
	"sort"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
)

// Compare lists the differences between two P4Infos that matter to a P4Runtime client
// resolving by name: the set of tables, actions, counters, registers and controller
// headers, match fields (name, id, width, kind), action references, action parameters,
// sizes and widths. Numeric IDs of objects may differ; IDs within an object may not.
// It also checks that every ID carries its resource type's prefix.
func Compare(want, got *p4configv1.P4Info) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	for _, info := range []*p4configv1.P4Info{want, got} {
		diffs = append(diffs, checkPrefixes(info)...)
	}
	wa, ga := actionsByID(want), actionsByID(got)
	diffSet(add, "table", names(want.Tables), names(got.Tables))
	for _, wt := range want.Tables {
		gt := findByName(got.Tables, wt.Preamble.Name)
		if gt == nil {
			continue
		}
		n := wt.Preamble.Name
		if wt.Size != gt.Size {
			add("table %s: size %d, want %d", n, gt.Size, wt.Size)
		}
		if len(wt.MatchFields) != len(gt.MatchFields) {
			add("table %s: %d match fields, want %d", n, len(gt.MatchFields), len(wt.MatchFields))
		} else {
			for i, wm := range wt.MatchFields {
				gm := gt.MatchFields[i]
				if wm.Id != gm.Id || wm.Name != gm.Name || wm.Bitwidth != gm.Bitwidth || wm.GetMatchType() != gm.GetMatchType() {
					add("table %s: match field %d is %s, want %s", n, i+1, fieldString(gm), fieldString(wm))
				}
			}
		}
		var wr, gr []string
		for _, r := range wt.ActionRefs {
			wr = append(wr, wa[r.Id])
		}
		for _, r := range gt.ActionRefs {
			gr = append(gr, ga[r.Id])
		}
		diffSet(func(f string, a ...any) { add("table %s: "+f, append([]any{n}, a...)...) }, "action", wr, gr)
	}
	diffSet(add, "action", names(want.Actions), names(got.Actions))
	for _, w := range want.Actions {
		g := findByName(got.Actions, w.Preamble.Name)
		if g == nil {
			continue
		}
		if len(w.Params) != len(g.Params) {
			add("action %s: %d params, want %d", w.Preamble.Name, len(g.Params), len(w.Params))
			continue
		}
		for i, wp := range w.Params {
			gp := g.Params[i]
			if wp.Id != gp.Id || wp.Name != gp.Name || wp.Bitwidth != gp.Bitwidth {
				add("action %s: param %d is %d/%s/bit<%d>, want %d/%s/bit<%d>", w.Preamble.Name, i+1, gp.Id, gp.Name, gp.Bitwidth, wp.Id, wp.Name, wp.Bitwidth)
			}
		}
	}
	diffSet(add, "counter", names(want.Counters), names(got.Counters))
	for _, w := range want.Counters {
		if g := findByName(got.Counters, w.Preamble.Name); g != nil && (g.Size != w.Size || g.GetSpec().GetUnit() != w.GetSpec().GetUnit()) {
			add("counter %s: size %d unit %v, want %d %v", w.Preamble.Name, g.Size, g.GetSpec().GetUnit(), w.Size, w.GetSpec().GetUnit())
		}
	}
	diffSet(add, "register", names(want.Registers), names(got.Registers))
	for _, w := range want.Registers {
		g := findByName(got.Registers, w.Preamble.Name)
		if g == nil {
			continue
		}
		wb := w.GetTypeSpec().GetBitstring().GetBit().GetBitwidth()
		gb := g.GetTypeSpec().GetBitstring().GetBit().GetBitwidth()
		if g.Size != w.Size || wb != gb {
			add("register %s: bit<%d>[%d], want bit<%d>[%d]", w.Preamble.Name, gb, g.Size, wb, w.Size)
		}
	}
	diffSet(add, "controller header", names(want.ControllerPacketMetadata), names(got.ControllerPacketMetadata))
	for _, w := range want.ControllerPacketMetadata {
		g := findByName(got.ControllerPacketMetadata, w.Preamble.Name)
		if g == nil {
			continue
		}
		if len(g.Metadata) != len(w.Metadata) {
			add("controller header %s: %d fields, want %d", w.Preamble.Name, len(g.Metadata), len(w.Metadata))
			continue
		}
		for i, wm := range w.Metadata {
			gm := g.Metadata[i]
			if wm.Id != gm.Id || wm.Name != gm.Name || wm.Bitwidth != gm.Bitwidth {
				add("controller header %s: field %d is %s/bit<%d>, want %s/bit<%d>", w.Preamble.Name, i+1, gm.Name, gm.Bitwidth, wm.Name, wm.Bitwidth)
			}
		}
	}
	return diffs
}

func fieldString(m *p4configv1.MatchField) string {
	return fmt.Sprintf("%d/%s/bit<%d>/%v", m.Id, m.Name, m.Bitwidth, m.GetMatchType())
}

func checkPrefixes(info *p4configv1.P4Info) []string {
	var diffs []string
	check := func(kind string, p *p4configv1.Preamble, prefix p4configv1.P4Ids_Prefix) {
		if p.GetId()>>24 != uint32(prefix) {
			diffs = append(diffs, fmt.Sprintf("%s %s: id %#x lacks prefix %#02x", kind, p.GetName(), p.GetId(), uint32(prefix)))
		}
	}
	for _, t := range info.Tables {
		check("table", t.Preamble, p4configv1.P4Ids_TABLE)
	}
	for _, a := range info.Actions {
		check("action", a.Preamble, p4configv1.P4Ids_ACTION)
	}
	for _, c := range info.Counters {
		check("counter", c.Preamble, p4configv1.P4Ids_COUNTER)
	}
	for _, r := range info.Registers {
		check("register", r.Preamble, p4configv1.P4Ids_REGISTER)
	}
	for _, c := range info.ControllerPacketMetadata {
		check("controller header", c.Preamble, p4configv1.P4Ids_CONTROLLER_HEADER)
	}
	return diffs
}

type named interface{ GetPreamble() *p4configv1.Preamble }

func names[T named](xs []T) []string {
	var n []string
	for _, x := range xs {
		n = append(n, x.GetPreamble().GetName())
	}
	return n
}

func findByName[T named](xs []T, name string) T {
	var zero T
	for _, x := range xs {
		if x.GetPreamble().GetName() == name {
			return x
		}
	}
	return zero
}

func actionsByID(info *p4configv1.P4Info) map[uint32]string {
	m := map[uint32]string{}
	for _, a := range info.Actions {
		m[a.Preamble.Id] = a.Preamble.Name
	}
	return m
}

func diffSet(add func(string, ...any), kind string, want, got []string) {
	w, g := map[string]bool{}, map[string]bool{}
	for _, n := range want {
		w[n] = true
	}
	for _, n := range got {
		g[n] = true
	}
	var missing, extra []string
	for n := range w {
		if !g[n] {
			missing = append(missing, n)
		}
	}
	for n := range g {
		if !w[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	for _, n := range missing {
		add("%s %q missing", kind, n)
	}
	for _, n := range extra {
		add("%s %q unexpected", kind, n)
	}
}
