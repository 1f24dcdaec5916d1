package p4info_test

import (
	"bytes"
	"strings"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
)

func TestDefaultResolvesByNameAndAlias(t *testing.T) {
	info := p4info.Default()
	for _, name := range []string{"port_fwd", "PlaitIngress.port_fwd", "ipv4_lpm", "tunnel_split", "split_slots", "path_encap", "port_telemetry"} {
		if _, err := info.Table(name); err != nil {
			t.Errorf("table %s: %v", name, err)
		}
	}
	for _, name := range []string{"forward", "drop", "send_to_cpu", "ipv4_forward", "split", "set_path", "encap", "stamp_telemetry", "NoAction"} {
		if _, err := info.Action(name); err != nil {
			t.Errorf("action %s: %v", name, err)
		}
	}
	if _, err := info.Table("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown table: %v", err)
	}
}

func TestEncodeCanonical(t *testing.T) {
	cases := []struct {
		v    any
		bits int32
		want []byte
		err  bool
	}{
		{0, 9, []byte{0}, false},
		{511, 9, []byte{1, 0xff}, false},
		{512, 9, nil, true},
		{"10.1.2.3", 32, []byte{10, 1, 2, 3}, false},
		{"02:00:00:00:00:09", 48, []byte{2, 0, 0, 0, 0, 9}, false},
		{"0x2a", 8, []byte{42}, false},
		{-1, 8, nil, true},
		{"nonsense", 8, nil, true},
	}
	for _, c := range cases {
		got, err := p4info.Encode(c.v, c.bits)
		if (err != nil) != c.err || !bytes.Equal(got, c.want) {
			t.Errorf("Encode(%v, %d) = %x, %v; want %x (error %v)", c.v, c.bits, got, err, c.want, c.err)
		}
	}
	canon := []struct {
		in   []byte
		bits int32
		want []byte
		err  bool
	}{
		{[]byte{0, 0, 0x63}, 12, []byte{0x63}, false},
		{[]byte{0x10, 0x63}, 12, nil, true},
		{[]byte{0x01, 0x00, 0x63}, 16, nil, true},
		{nil, 8, nil, true},
		{[]byte{0, 0}, 16, []byte{0}, false},
	}
	for _, c := range canon {
		got, err := p4info.Canonical(c.in, c.bits)
		if (err != nil) != c.err || !bytes.Equal(got, c.want) {
			t.Errorf("Canonical(%x, %d) = %x, %v; want %x (error %v)", c.in, c.bits, got, err, c.want, c.err)
		}
	}
}

func TestTableEntryBuilder(t *testing.T) {
	info := p4info.Default()
	e, err := info.TableEntry("ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "10.1.2.3", 16)}, "ipv4_forward",
		p4info.P("dst_mac", "02:00:00:00:00:09"), p4info.P("port", 2))
	if err != nil {
		t.Fatal(err)
	}
	if lpm := e.GetMatch()[0].GetLpm(); !bytes.Equal(lpm.GetValue(), []byte{10, 1, 0, 0}) || lpm.GetPrefixLen() != 16 {
		t.Errorf("lpm match %v: want 10.1.0.0/16 with host bits cleared", lpm)
	}
	bad := []struct {
		name string
		f    func() (*p4v1.TableEntry, error)
		want string
	}{
		{"unknown field", func() (*p4v1.TableEntry, error) {
			return info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("nope", 1)}, "drop")
		}, "no match field"},
		{"foreign action", func() (*p4v1.TableEntry, error) {
			return info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "set_path", p4info.P("path_id", 1))
		}, "cannot use action"},
		{"missing param", func() (*p4v1.TableEntry, error) {
			return info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward")
		}, "missing"},
		{"too wide", func() (*p4v1.TableEntry, error) {
			return info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 512))
		}, "does not fit"},
	}
	for _, c := range bad {
		if _, err := c.f(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want error mentioning %q", c.name, err, c.want)
		}
	}
}

func TestParseRejectsBrokenP4Info(t *testing.T) {
	if _, err := p4info.Parse([]byte("tables { preamble { id: 1 name: \"t\" } action_refs { id: 99 } }")); err == nil {
		t.Error("a table referring to a missing action parsed")
	}
	if _, err := p4info.Parse([]byte("not a p4info {")); err == nil {
		t.Error("garbage parsed")
	}
}
