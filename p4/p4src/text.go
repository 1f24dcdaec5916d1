package p4src

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TextFormat prints m as p4c writes --p4runtime-files *.txtpb: two comment lines naming
// the proto file and message, then protobuf's C++ TextFormat (fields in field-number
// order, two-space indentation, enums by name). Go's prototext deliberately varies its
// whitespace, which would make the checked-in file churn.
func TextFormat(m proto.Message) string {
	var b strings.Builder
	d := m.ProtoReflect().Descriptor()
	fmt.Fprintf(&b, "# proto-file: %s\n# proto-message: %s\n\n", d.ParentFile().Path(), d.FullName())
	writeMessage(&b, m.ProtoReflect(), 0)
	return b.String()
}

func writeMessage(b *strings.Builder, m protoreflect.Message, depth int) {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	sort.Slice(fields, func(i, j int) bool { return fields[i].Number() < fields[j].Number() })
	indent := strings.Repeat("  ", depth)
	for _, fd := range fields {
		v := m.Get(fd)
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				writeValue(b, indent, fd, l.Get(i), depth)
			}
			continue
		}
		writeValue(b, indent, fd, v, depth)
	}
}

func writeValue(b *strings.Builder, indent string, fd protoreflect.FieldDescriptor, v protoreflect.Value, depth int) {
	name := string(fd.Name())
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		fmt.Fprintf(b, "%s%s {\n", indent, name)
		writeMessage(b, v.Message(), depth+1)
		fmt.Fprintf(b, "%s}\n", indent)
	case protoreflect.EnumKind:
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			fmt.Fprintf(b, "%s%s: %d\n", indent, name, v.Enum())
		} else {
			fmt.Fprintf(b, "%s%s: %s\n", indent, name, ev.Name())
		}
	case protoreflect.StringKind:
		fmt.Fprintf(b, "%s%s: %s\n", indent, name, cQuote(v.String()))
	case protoreflect.BytesKind:
		fmt.Fprintf(b, "%s%s: %s\n", indent, name, cQuote(string(v.Bytes())))
	default:
		fmt.Fprintf(b, "%s%s: %v\n", indent, name, v.Interface())
	}
}

func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\` + strconv.FormatInt(int64(c), 8))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
