package wireformat

import (
	"bytes"
	"testing"

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
	if prog.Consts["PLAIT_F_PROBE"] != wire.FlagProbe || prog.Consts["PLAIT_F_TELEMETRY"] != wire.FlagTelemetry || prog.Consts["PLAIT_F_COMPACT"] != wire.FlagCompact {
		t.Errorf("P4 flags %d/%d/%d, wire %d/%d/%d", prog.Consts["PLAIT_F_PROBE"], prog.Consts["PLAIT_F_TELEMETRY"], prog.Consts["PLAIT_F_COMPACT"], wire.FlagProbe, wire.FlagTelemetry, wire.FlagCompact)
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
	}
	for st, fields := range wire.Layout {
		for _, f := range fields {
			enc, ok := set[f.Name]
			if !ok {
				continue // reserved
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
