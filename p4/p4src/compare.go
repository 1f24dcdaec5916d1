package p4src

import (
	"cmp"

	gocmp "github.com/google/go-cmp/cmp"
	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

// Diff compares two P4Infos as whole messages and returns a readable difference, empty
// when they are equal: IDs, names, aliases, annotations, widths, sizes, default actions
// and type_info all count. The order of a kind's entities (tables, actions, ...) does
// not, since P4Runtime resolves them by ID; it is normalised by sorting on the ID.
func Diff(want, got *p4configv1.P4Info) string {
	return gocmp.Diff(want, got, protocmp.Transform(),
		byID[*p4configv1.Table](), byID[*p4configv1.Action](), byID[*p4configv1.Counter](),
		byID[*p4configv1.Register](), byID[*p4configv1.ControllerPacketMetadata](),
		byID[*p4configv1.DirectCounter](), byID[*p4configv1.Meter](), byID[*p4configv1.DirectMeter](),
		byID[*p4configv1.ActionProfile](), byID[*p4configv1.ValueSet](), byID[*p4configv1.Digest]())
}

type named interface{ GetPreamble() *p4configv1.Preamble }

func byID[T named]() gocmp.Option {
	return protocmp.SortRepeated(func(a, b T) bool {
		return cmp.Less(a.GetPreamble().GetId(), b.GetPreamble().GetId())
	})
}
