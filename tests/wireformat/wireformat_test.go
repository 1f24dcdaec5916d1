package wireformat

import (
	"bytes"
	"testing"

	"github.com/plait/plait/controller"
	"github.com/plait/plait/ebpf/datapath"
	"github.com/plait/plait/p4"
	"github.com/plait/plait/p4/p4src"
	"github.com/plait/plait/wire"
)

// p4Headers maps the wire structures to their P4 header types.
var p4Headers = map[string]string{"plait_hdr": "plait_t", "plait_tel": "plait_tel_t"}

func TestP4Layout(t *testing.T) {
	prog, err := p4src.ParseFile("../../p4/plait.p4")
	if err != nil {
		t.Fatal(err)
	}
	for st, fields := range wire.Layout {
		h := prog.Headers[p4Headers[st]]
		if h == nil {
			t.Errorf("%s: no P4 header %s", st, p4Headers[st])
			continue
		}
		if len(h.Fields) != len(fields) {
			t.Errorf("%s: P4 %s has %d fields, wire.Layout %d", st, h.Name, len(h.Fields), len(fields))
			continue
		}
		off := 0
		for i, f := range fields {
			p := h.Fields[i]
			if p.Name != f.Name || p.Bits != f.Bits || off != f.BitOff {
				t.Errorf("%s field %d: P4 %s bit<%d> at bit %d, wire.Layout %s bit<%d> at bit %d", st, i, p.Name, p.Bits, off, f.Name, f.Bits, f.BitOff)
			}
			off += p.Bits
		}
	}
	if c := prog.Consts["PLAIT_UDP_PORT"]; c != wire.Port {
		t.Errorf("P4 PLAIT_UDP_PORT %d, wire.Port %d", c, wire.Port)
	}
	if c := prog.Consts["PLAIT_IPPROTO"]; c != wire.IPProto {
		t.Errorf("P4 PLAIT_IPPROTO %d, wire.IPProto %d", c, wire.IPProto)
	}
	if c := prog.Consts["PLAIT_VERSION"]; c != wire.Version {
		t.Errorf("P4 PLAIT_VERSION %d, wire.Version %d", c, wire.Version)
	}
	checkP4Limits(t, prog)
	if c := prog.Consts["PLAIT_PATH_REPAIR"]; c != wire.PathRepair {
		t.Errorf("P4 PLAIT_PATH_REPAIR %d, wire.PathRepair %d", c, wire.PathRepair)
	}
	if prog.Consts["PLAIT_F_PROBE"] != wire.FlagProbe || prog.Consts["PLAIT_F_TELEMETRY"] != wire.FlagTelemetry || prog.Consts["PLAIT_F_COMPACT"] != wire.FlagCompact {
		t.Errorf("P4 flags %d/%d/%d, wire %d/%d/%d", prog.Consts["PLAIT_F_PROBE"], prog.Consts["PLAIT_F_TELEMETRY"], prog.Consts["PLAIT_F_COMPACT"], wire.FlagProbe, wire.FlagTelemetry, wire.FlagCompact)
	}
}

// checkP4Limits holds plait.p4's #defines to the Go definitions that must agree with them:
// package p4's mirror (the embedded switch's tables), the paths a tunnel may have (wire,
// and through it the C PLAIT_MAX_PATHS), the hosts' tunnel slots (the datapath, and
// through it the C MAX_TUNNELS, see TestCLayout) and the controller's slot tables.
func checkP4Limits(t *testing.T, prog *p4src.Program) {
	for _, c := range []struct {
		define string
		goName string
		goVal  int64
	}{
		{"MAX_PATHS", "p4.MaxPaths", p4.MaxPaths},
		{"MAX_PATHS", "wire.MaxPaths", wire.MaxPaths},
		{"MAX_TUNNELS", "p4.MaxTunnels", p4.MaxTunnels},
		{"MAX_TUNNELS", "datapath.MaxTunnels", datapath.MaxTunnels},
		{"SPLIT_SLOTS", "p4.SplitSlots", p4.SplitSlots},
		{"SPLIT_SLOTS", "controller.SplitSlots", controller.SplitSlots},
		{"PORTS", "p4.Ports", p4.Ports},
		{"CPU_PORT", "p4.CPUPort", p4.CPUPort},
	} {
		v, ok := prog.Defines[c.define]
		if !ok {
			t.Errorf("plait.p4 defines no %s", c.define)
		} else if v != c.goVal {
			t.Errorf("plait.p4 %s = %d, %s = %d", c.define, v, c.goName, c.goVal)
		}
	}
}

// Each field written alone must land at the layout's bits, big-endian.
func TestGoEncoderMatchesLayout(t *testing.T) {
	set := map[string]func(v uint64) []byte{
		"version":    func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{Version: uint8(v)}) },
		"flags":      func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{Flags: uint8(v)}) },
		"path_id":    func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{PathID: uint8(v)}) },
		"tunnel_id":  func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{TunnelID: uint16(v)}) },
		"seq":        func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{Seq: uint32(v)}) },
		"path_seq":   func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{PathSeq: uint32(v)}) },
		"tx_ns":      func(v uint64) []byte { return wire.AppendHeader(nil, wire.Header{TxNs: uint32(v)}) },
		"queue_us":   func(v uint64) []byte { return wire.AppendTelemetry(nil, wire.Telemetry{QueueUs: uint32(v)}) },
		"max_qdepth": func(v uint64) []byte { return wire.AppendTelemetry(nil, wire.Telemetry{MaxQdepth: uint16(v)}) },
		"hops":       func(v uint64) []byte { return wire.AppendTelemetry(nil, wire.Telemetry{Hops: uint8(v)}) },
		"reserved":   func(v uint64) []byte { return wire.AppendTelemetry(nil, wire.Telemetry{Reserved: uint8(v)}) },
	}
	for st, fields := range wire.Layout {
		for _, f := range fields {
			enc, ok := set[f.Name]
			if !ok {
				t.Errorf("%s.%s: no encoder for the field", st, f.Name)
				continue
			}
			v := uint64(1)<<(f.Bits-1) | 1 // top and bottom bit of the field
			got := enc(v)
			want := make([]byte, len(got))
			for b := 0; b < f.Bits; b++ {
				if v>>(f.Bits-1-b)&1 == 1 {
					bit := f.BitOff + b
					want[bit/8] |= 0x80 >> (bit % 8)
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s.%s: encoder wrote %x, layout says %x", st, f.Name, got, want)
			}
		}
	}
}
