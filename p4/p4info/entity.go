package p4info

import (
	"encoding/binary"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
)

// Encode is the canonical P4Runtime binary string of v (shortest big-endian form, at
// least one byte); it fails when v does not fit in bits.
func Encode(v any, bits int32) ([]byte, error) {
	n, err := toInt(v)
	if err != nil {
		return nil, err
	}
	if n.Sign() < 0 || n.BitLen() > int(bits) {
		return nil, fmt.Errorf("value %v does not fit in bit<%d>", v, bits)
	}
	b := n.Bytes()
	if len(b) == 0 {
		b = []byte{0}
	}
	return b, nil
}

// Canonical strips leading zero bytes (keeping one) and checks that b fits in bits, as a
// P4Runtime receiver must.
func Canonical(b []byte, bits int32) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty binary string for bit<%d>", bits)
	}
	i := 0
	for i < len(b)-1 && b[i] == 0 {
		i++
	}
	c := b[i:]
	if width := (len(c)-1)*8 + bitLen8(c[0]); width > int(bits) {
		return nil, fmt.Errorf("binary string 0x%x is %d bits wide, more than bit<%d>", b, width, bits)
	}
	return c, nil
}

func bitLen8(b byte) int {
	n := 0
	for ; b != 0; b >>= 1 {
		n++
	}
	return n
}

// Uint decodes a binary string of at most 8 significant bytes.
func Uint(b []byte) (uint64, error) {
	i := 0
	for i < len(b) && b[i] == 0 {
		i++
	}
	if len(b)-i > 8 {
		return 0, fmt.Errorf("binary string 0x%x wider than 64 bits", b)
	}
	var v [8]byte
	copy(v[8-(len(b)-i):], b[i:])
	return binary.BigEndian.Uint64(v[:]), nil
}

// toInt accepts unsigned and signed integers, net.IP (v4), net.HardwareAddr, []byte and
// strings holding a decimal or 0x number, an IPv4 address or a MAC address.
func toInt(v any) (*big.Int, error) {
	switch x := v.(type) {
	case int:
		return big.NewInt(int64(x)), nil
	case int64:
		return big.NewInt(x), nil
	case int32:
		return big.NewInt(int64(x)), nil
	case uint:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint64:
		return new(big.Int).SetUint64(x), nil
	case uint32:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint16:
		return new(big.Int).SetUint64(uint64(x)), nil
	case uint8:
		return new(big.Int).SetUint64(uint64(x)), nil
	case float64: // JSON numbers
		if x != float64(int64(x)) {
			return nil, fmt.Errorf("value %v is not an integer", x)
		}
		return big.NewInt(int64(x)), nil
	case net.IP:
		if v4 := x.To4(); v4 != nil {
			return new(big.Int).SetBytes(v4), nil
		}
		return new(big.Int).SetBytes(x), nil
	case net.HardwareAddr:
		return new(big.Int).SetBytes(x), nil
	case []byte:
		return new(big.Int).SetBytes(x), nil
	case string:
		return parseString(x)
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

func parseString(s string) (*big.Int, error) {
	if ip := net.ParseIP(s); ip != nil {
		return toInt(ip)
	}
	if mac, err := net.ParseMAC(s); err == nil && strings.Count(s, ":") == 5 {
		return toInt(mac)
	}
	if n, ok := new(big.Int).SetString(s, 0); ok {
		return n, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return new(big.Int).SetUint64(u), nil
	}
	return nil, fmt.Errorf("cannot read %q as a number, IPv4 or MAC address", s)
}

// Match is one match field of a table entry by name.
type Match struct {
	Field     string
	Value     any
	PrefixLen int // LPM only
	lpm       bool
}

// Exact matches field == v.
func Exact(field string, v any) Match { return Match{Field: field, Value: v} }

// LPM matches the first prefixLen bits of field against v (bits beyond are cleared).
func LPM(field string, v any, prefixLen int) Match {
	return Match{Field: field, Value: v, PrefixLen: prefixLen, lpm: true}
}

// Param is one action argument by name.
type Param struct {
	Name  string
	Value any
}

// P is shorthand for Param{name, v}.
func P(name string, v any) Param { return Param{name, v} }

// TableEntry builds a table entry from names. LPM fields with prefix length 0 are
// omitted, as P4Runtime requires for don't-care matches.
func (i *Info) TableEntry(table string, matches []Match, action string, params ...Param) (*p4v1.TableEntry, error) {
	t, err := i.Table(table)
	if err != nil {
		return nil, err
	}
	e := &p4v1.TableEntry{TableId: t.GetPreamble().GetId()}
	for _, m := range matches {
		f, err := t.Field(m.Field)
		if err != nil {
			return nil, err
		}
		fm := &p4v1.FieldMatch{FieldId: f.GetId()}
		switch {
		case m.lpm:
			if m.PrefixLen < 0 || m.PrefixLen > int(f.GetBitwidth()) {
				return nil, fmt.Errorf("table %s field %s: prefix length %d outside 0..%d", t.Name(), m.Field, m.PrefixLen, f.GetBitwidth())
			}
			if m.PrefixLen == 0 {
				continue
			}
			n, err := toInt(m.Value)
			if err != nil {
				return nil, fmt.Errorf("table %s field %s: %w", t.Name(), m.Field, err)
			}
			bits := uint(f.GetBitwidth())
			mask := new(big.Int).Lsh(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(m.PrefixLen)), big.NewInt(1)), bits-uint(m.PrefixLen))
			v, err := Encode(new(big.Int).And(n, mask).Bytes(), f.GetBitwidth())
			if err != nil {
				return nil, fmt.Errorf("table %s field %s: %w", t.Name(), m.Field, err)
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: v, PrefixLen: int32(m.PrefixLen)}}
		default:
			v, err := Encode(m.Value, f.GetBitwidth())
			if err != nil {
				return nil, fmt.Errorf("table %s field %s: %w", t.Name(), m.Field, err)
			}
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: v}}
		}
		e.Match = append(e.Match, fm)
	}
	if action != "" {
		a, err := i.action(t, action, params)
		if err != nil {
			return nil, err
		}
		e.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: a}}
	}
	return e, nil
}

// DefaultEntry builds the entry that sets a table's default action.
func (i *Info) DefaultEntry(table, action string, params ...Param) (*p4v1.TableEntry, error) {
	e, err := i.TableEntry(table, nil, action, params...)
	if err != nil {
		return nil, err
	}
	e.IsDefaultAction = true
	return e, nil
}

func (i *Info) action(t *Table, name string, params []Param) (*p4v1.Action, error) {
	a, err := i.Action(name)
	if err != nil {
		return nil, err
	}
	if _, ok := t.ActionRef(a.GetPreamble().GetId()); !ok {
		return nil, fmt.Errorf("table %s cannot use action %s", t.Name(), a.Name())
	}
	pa := &p4v1.Action{ActionId: a.GetPreamble().GetId()}
	seen := map[string]bool{}
	for _, p := range params {
		ap, err := a.Param(p.Name)
		if err != nil {
			return nil, err
		}
		v, err := Encode(p.Value, ap.GetBitwidth())
		if err != nil {
			return nil, fmt.Errorf("action %s param %s: %w", a.Name(), p.Name, err)
		}
		seen[p.Name] = true
		pa.Params = append(pa.Params, &p4v1.Action_Param{ParamId: ap.GetId(), Value: v})
	}
	for _, ap := range a.GetParams() {
		if !seen[ap.GetName()] {
			return nil, fmt.Errorf("action %s: parameter %s missing", a.Name(), ap.GetName())
		}
	}
	return pa, nil
}

// CounterEntry addresses one cell of an indexed counter (index < 0: all cells).
func (i *Info) CounterEntry(name string, index int64) (*p4v1.CounterEntry, error) {
	c, err := i.Counter(name)
	if err != nil {
		return nil, err
	}
	e := &p4v1.CounterEntry{CounterId: c.GetPreamble().GetId()}
	if index >= 0 {
		e.Index = &p4v1.Index{Index: index}
	}
	return e, nil
}

// RegisterEntry addresses one cell of a register (index < 0: all cells), with a value to
// write when value is not nil.
func (i *Info) RegisterEntry(name string, index int64, value any) (*p4v1.RegisterEntry, error) {
	r, err := i.Register(name)
	if err != nil {
		return nil, err
	}
	e := &p4v1.RegisterEntry{RegisterId: r.GetPreamble().GetId()}
	if index >= 0 {
		e.Index = &p4v1.Index{Index: index}
	}
	if value != nil {
		v, err := Encode(value, r.GetTypeSpec().GetBitstring().GetBit().GetBitwidth())
		if err != nil {
			return nil, fmt.Errorf("register %s: %w", name, err)
		}
		e.Data = &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: v}}
	}
	return e, nil
}

// PacketOut builds a PacketOut with packet_out metadata given by field name.
func (i *Info) PacketOut(payload []byte, metadata map[string]any) (*p4v1.PacketOut, error) {
	m, err := i.PacketMetadata("packet_out")
	if err != nil {
		return nil, err
	}
	po := &p4v1.PacketOut{Payload: payload}
	for _, f := range m.GetMetadata() {
		v, ok := metadata[f.GetName()]
		if !ok {
			v = 0
		}
		b, err := Encode(v, f.GetBitwidth())
		if err != nil {
			return nil, fmt.Errorf("packet_out %s: %w", f.GetName(), err)
		}
		po.Metadata = append(po.Metadata, &p4v1.PacketMetadata{MetadataId: f.GetId(), Value: b})
	}
	return po, nil
}

// PacketInMetadata decodes a PacketIn's metadata by field name.
func (i *Info) PacketInMetadata(pin *p4v1.PacketIn) (map[string]uint64, error) {
	m, err := i.PacketMetadata("packet_in")
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, md := range pin.GetMetadata() {
		var f string
		for _, x := range m.GetMetadata() {
			if x.GetId() == md.GetMetadataId() {
				f = x.GetName()
			}
		}
		if f == "" {
			return nil, fmt.Errorf("packet_in has no metadata id %d", md.GetMetadataId())
		}
		v, err := Uint(md.GetValue())
		if err != nil {
			return nil, fmt.Errorf("packet_in %s: %w", f, err)
		}
		out[f] = v
	}
	return out, nil
}
