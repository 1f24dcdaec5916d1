package p4switch_test

import (
	"context"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
	"google.golang.org/protobuf/proto"
)

// FuzzWrite feeds arbitrary WriteRequests to the switch core: it must answer each with a
// status, never panic, and keep serving (a read afterwards still works). The seeds are
// valid writes of every table and of registers and counters, and some broken ones.
func FuzzWrite(f *testing.F) {
	info := p4info.Default()
	seed := func(typ p4v1.Update_Type, e *p4v1.Entity) {
		b, err := proto.Marshal(&p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Updates: []*p4v1.Update{{Type: typ, Entity: e}}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	te := func(table string, m []p4info.Match, action string, params ...p4info.Param) *p4v1.Entity {
		e, err := info.TableEntry(table, m, action, params...)
		if err != nil {
			f.Fatal(err)
		}
		return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}
	}
	seed(p4v1.Update_INSERT, te("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2)))
	seed(p4v1.Update_INSERT, te("ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "10.0.0.0", 8)}, "ipv4_forward", p4info.P("dst_mac", 1), p4info.P("port", 2)))
	seed(p4v1.Update_INSERT, te("tunnel_split", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1), p4info.LPM("hdr.ipv4.dst_addr", "10.9.0.0", 16)}, "split", p4info.P("tunnel_id", 1), p4info.P("tunnel_index", 2), p4info.P("gen", 1)))
	seed(p4v1.Update_INSERT, te("split_slots", []p4info.Match{p4info.Exact("meta.tunnel_index", 2), p4info.Exact("meta.gen", 1), p4info.Exact("meta.slot", 9)}, "set_path", p4info.P("path_id", 3)))
	seed(p4v1.Update_INSERT, te("path_encap", []p4info.Match{p4info.Exact("meta.tunnel_index", 2), p4info.Exact("meta.path_id", 3)}, "encap", p4info.P("src_mac", 1), p4info.P("dst_mac", 2), p4info.P("src_ip", 3), p4info.P("dst_ip", 4), p4info.P("port", 5)))
	seed(p4v1.Update_MODIFY, te("port_telemetry", []p4info.Match{p4info.Exact("standard_metadata.egress_port", 1)}, "NoAction"))
	seed(p4v1.Update_DELETE, te("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, ""))
	re, _ := info.RegisterEntry("split_cursor", -1, 5)
	seed(p4v1.Update_MODIFY, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: re}})
	ce, _ := info.CounterEntry("port_rx_counter", 3)
	seed(p4v1.Update_MODIFY, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: ce}})
	seed(p4v1.Update_INSERT, &p4v1.Entity{})
	f.Add([]byte{0x08, 0x01, 0x1a, 0x02, 0x08, 0x01})

	r := newRig(f, 2)
	r.stream(f, 1)
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &p4v1.WriteRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		r.sw.Write(context.Background(), req)
		if _, err := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}}); err != nil {
			t.Fatalf("read after fuzzed write: %v", err)
		}
	})
}
