package p4switch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	p4configv1 "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var frame = []byte{
	0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00, // Ethernet to 02::2 from 02::1, IPv4
	0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4 10.0.0.1 -> .2 UDP (bad csum)
	0x30, 0x39, 0x14, 0x51, 0, 8, 0, 0, // UDP 12345 -> 5201
}

func TestForwardAfterInsert(t *testing.T) {
	r := newRig(t, 2)
	r.stream(t, 1)
	if err := r.write(1, p4v1.Update_INSERT, r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2))); err != nil {
		t.Fatal(err)
	}
	r.ports[1].Inject(frame)
	got := r.recvFrame(t, 2)
	want := append([]byte(nil), frame...)
	want[24], want[25] = 0x66, 0xce // the deparser rewrites the IPv4 checksum
	if !bytes.Equal(got, want) {
		t.Errorf("forwarded\n%x\nwant\n%x", got, want)
	}
	r.ports[2].Inject(frame) // no entry for port 2: default drop
	r.noFrame(t)
}

func TestArbitration(t *testing.T) {
	r := newRig(t, 1)
	_, a1 := r.stream(t, 5)
	if a1.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("first controller: status %v, want OK", a1.GetStatus())
	}
	st2, a2 := r.stream(t, 3)
	if a2.GetStatus().GetCode() != int32(codes.AlreadyExists) || a2.GetElectionId().GetLow() != 5 {
		t.Fatalf("lower election id: %v, want ALREADY_EXISTS with election id 5", a2)
	}
	e := r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "drop")
	if err := r.write(3, p4v1.Update_INSERT, e); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("write from backup: %v, want PERMISSION_DENIED", err)
	}
	if err := r.write(5, p4v1.Update_INSERT, e); err != nil {
		t.Fatalf("write from primary: %v", err)
	}
	// A duplicate election id is refused and the stream closed.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dup, _ := r.client.StreamChannel(ctx)
	dup.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 5}}}})
	if _, err := dup.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("duplicate election id: %v, want INVALID_ARGUMENT", err)
	}
	// A higher election id takes over; the old primary hears it is a backup now.
	_, a3 := r.stream(t, 9)
	if a3.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatalf("higher election id: %v, want OK", a3.GetStatus())
	}
	if a := recvArbitration(t, st2); a.GetStatus().GetCode() != int32(codes.AlreadyExists) || a.GetElectionId().GetLow() != 9 {
		t.Fatalf("backup notified with %v, want ALREADY_EXISTS / 9", a)
	}
	if err := r.write(5, p4v1.Update_DELETE, e); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("write from the old primary: %v, want PERMISSION_DENIED", err)
	}
	// Wrong device: the stream is refused.
	bad, _ := r.client.StreamChannel(ctx)
	bad.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 7, ElectionId: &p4v1.Uint128{Low: 1}}}})
	if _, err := bad.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("wrong device: %v, want NOT_FOUND", err)
	}
}

// writeErrors unpacks the per-update errors of a failed batch.
func writeErrors(t *testing.T, err error) []codes.Code {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.Unknown {
		t.Fatalf("batch error %v, want UNKNOWN with details", err)
	}
	var out []codes.Code
	for _, d := range st.Details() {
		pe, ok := d.(*p4v1.Error)
		if !ok {
			t.Fatalf("detail %T, want p4.v1.Error", d)
		}
		out = append(out, codes.Code(pe.GetCanonicalCode()))
	}
	return out
}

func TestWriteErrors(t *testing.T) {
	r := newRig(t, 2)
	r.stream(t, 1)
	good := func() *p4v1.Entity {
		return r.entry(t, "ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "10.0.0.0", 8)}, "ipv4_forward", p4info.P("dst_mac", "02:00:00:00:00:09"), p4info.P("port", 2))
	}
	mutate := func(f func(*p4v1.TableEntry)) *p4v1.Entity {
		e := proto.Clone(good()).(*p4v1.Entity)
		f(e.GetTableEntry())
		return e
	}
	cases := []struct {
		name string
		typ  p4v1.Update_Type
		ent  *p4v1.Entity
		want codes.Code
	}{
		{"unknown table", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.TableId = 0x02000001 }), codes.NotFound},
		{"unknown action", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.GetAction().GetAction().ActionId = 0x01000001 }), codes.InvalidArgument},
		{"action of another table", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) {
			a, _ := r.info.Action("set_path")
			te.GetAction().GetAction().ActionId = a.GetPreamble().GetId()
		}), codes.InvalidArgument},
		{"unknown field", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.Match[0].FieldId = 9 }), codes.InvalidArgument},
		{"value too wide", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.GetAction().GetAction().Params[1].Value = []byte{0x02, 0x00} }), codes.OutOfRange},
		{"empty value", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.GetAction().GetAction().Params[1].Value = nil }), codes.OutOfRange},
		{"missing param", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.GetAction().GetAction().Params = te.GetAction().GetAction().Params[:1] }), codes.InvalidArgument},
		{"prefix too long", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.Match[0].GetLpm().PrefixLen = 33 }), codes.InvalidArgument},
		{"bits beyond prefix", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.Match[0].GetLpm().Value = []byte{10, 0, 0, 1} }), codes.InvalidArgument},
		{"priority on lpm table", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.Priority = 10 }), codes.InvalidArgument},
		{"modify missing", p4v1.Update_MODIFY, good(), codes.NotFound},
		{"delete missing", p4v1.Update_DELETE, good(), codes.NotFound},
		{"insert default", p4v1.Update_INSERT, mutate(func(te *p4v1.TableEntry) { te.Match = nil; te.IsDefaultAction = true }), codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := r.write(1, c.typ, c.ent)
			if got := writeErrors(t, err); len(got) != 1 || got[0] != c.want {
				t.Errorf("errors %v (%v), want [%v]", got, err, c.want)
			}
			if ents, err := r.read(t, tableEntity(&p4v1.TableEntry{})); err != nil || len(ents) != 0 {
				t.Errorf("after a failed write the tables hold %d entries (%v), want none", len(ents), err)
			}
		})
	}

	// Duplicate insert in one batch: first OK, second ALREADY_EXISTS, first stays.
	err := r.write(1, p4v1.Update_INSERT, good(), good())
	if got := writeErrors(t, err); len(got) != 2 || got[0] != codes.OK || got[1] != codes.AlreadyExists {
		t.Fatalf("duplicate insert: %v, want [OK ALREADY_EXISTS]", got)
	}
	ents, _ := r.read(t, tableEntity(&p4v1.TableEntry{}))
	if len(ents) != 1 {
		t.Fatalf("%d entries after a partly failed CONTINUE_ON_ERROR batch, want 1", len(ents))
	}
	// ROLLBACK_ON_ERROR: nothing of a failing batch stays.
	other := r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2))
	_, err = r.client.Write(context.Background(), &p4v1.WriteRequest{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Atomicity: p4v1.WriteRequest_ROLLBACK_ON_ERROR,
		Updates: []*p4v1.Update{{Type: p4v1.Update_INSERT, Entity: other}, {Type: p4v1.Update_INSERT, Entity: good()}},
	})
	if got := writeErrors(t, err); len(got) != 2 || got[1] != codes.AlreadyExists {
		t.Fatalf("rollback batch: %v", got)
	}
	if ents, _ := r.read(t, tableEntity(&p4v1.TableEntry{})); len(ents) != 1 {
		t.Fatalf("%d entries after a rolled back batch, want 1", len(ents))
	}
	// Request-level errors.
	if _, err := r.client.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 2, ElectionId: &p4v1.Uint128{Low: 1}}); status.Code(err) != codes.NotFound {
		t.Errorf("wrong device: %v, want NOT_FOUND", err)
	}
	if _, err := r.client.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("no election id: %v, want PERMISSION_DENIED", err)
	}
}

func TestReadBack(t *testing.T) {
	r := newRig(t, 2)
	r.stream(t, 1)
	ents := []*p4v1.Entity{
		r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2)),
		r.entry(t, "ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "10.1.0.0", 16)}, "ipv4_forward", p4info.P("dst_mac", "02:00:00:00:00:09"), p4info.P("port", 2)),
		r.entry(t, "split_slots", []p4info.Match{p4info.Exact("meta.tunnel_index", 3), p4info.Exact("meta.gen", 1), p4info.Exact("meta.slot", 200)}, "set_path", p4info.P("path_id", 2)),
	}
	if err := r.write(1, p4v1.Update_INSERT, ents...); err != nil {
		t.Fatal(err)
	}
	got, err := r.read(t, tableEntity(&p4v1.TableEntry{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ents) {
		t.Fatalf("read %d entries, want %d", len(got), len(ents))
	}
	for i := range ents {
		if !proto.Equal(got[i], ents[i]) {
			t.Errorf("entry %d read back as\n%v\nwant\n%v", i, got[i], ents[i])
		}
	}
	// One entry by key; the default entry; modify then read.
	lpm, _ := r.info.Table("ipv4_lpm")
	one, _ := r.read(t, tableEntity(&p4v1.TableEntry{TableId: lpm.GetPreamble().GetId(), Match: ents[1].GetTableEntry().GetMatch()}))
	if len(one) != 1 || !proto.Equal(one[0], ents[1]) {
		t.Errorf("read by key: %v", one)
	}
	def, _ := r.read(t, tableEntity(&p4v1.TableEntry{TableId: lpm.GetPreamble().GetId(), IsDefaultAction: true}))
	noAction, _ := r.info.Action("NoAction")
	if len(def) != 1 || def[0].GetTableEntry().GetAction().GetAction().GetActionId() != noAction.GetPreamble().GetId() {
		t.Errorf("default entry of ipv4_lpm: %v, want NoAction", def)
	}
	mod := r.entry(t, "ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "10.1.0.0", 16)}, "drop")
	if err := r.write(1, p4v1.Update_MODIFY, mod); err != nil {
		t.Fatal(err)
	}
	one, _ = r.read(t, mod)
	if len(one) != 1 || !proto.Equal(one[0], mod) {
		t.Errorf("after modify: %v", one)
	}
	// Registers and counters by name, one cell and all.
	reg, _ := r.info.RegisterEntry("tunnel_seq", 3, 41)
	if err := r.write(1, p4v1.Update_MODIFY, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: reg}}); err != nil {
		t.Fatal(err)
	}
	q, _ := r.info.RegisterEntry("tunnel_seq", 3, nil)
	rs, err := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: q}})
	if err != nil || len(rs) != 1 || !bytes.Equal(rs[0].GetRegisterEntry().GetData().GetBitstring(), []byte{41}) {
		t.Errorf("register read %v %v, want 41", rs, err)
	}
	all, _ := r.info.CounterEntry("path_counter", -1)
	cs, err := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: all}})
	if err != nil || len(cs) != 512 {
		t.Errorf("path_counter wildcard read: %d cells, %v; want 512", len(cs), err)
	}
	oob, _ := r.info.CounterEntry("path_counter", 512)
	if _, err := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: oob}}); status.Code(err) != codes.OutOfRange {
		t.Errorf("counter index 512: %v, want OUT_OF_RANGE", err)
	}
}

func TestPipelineConfig(t *testing.T) {
	r := newRig(t, 1, p4switch.WithoutPipeline())
	e := r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "drop")
	r.stream(t, 1)
	if err := r.write(1, p4v1.Update_INSERT, e); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("write before a pipeline: %v, want FAILED_PRECONDITION", err)
	}
	set := func(info *p4configv1.P4Info, dc []byte) error {
		_, err := r.client.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
			Config: &p4v1.ForwardingPipelineConfig{P4Info: info, P4DeviceConfig: dc, Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 7}},
		})
		return err
	}
	foreign := proto.Clone(r.info.P4Info).(*p4configv1.P4Info)
	foreign.Tables[0].MatchFields[0].Bitwidth = 16
	if err := set(foreign, nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("foreign p4info: %v, want INVALID_ARGUMENT", err)
	}
	if err := set(r.info.P4Info, []byte("not json")); status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad device config: %v, want INVALID_ARGUMENT", err)
	}
	if err := set(r.info.P4Info, []byte(`{"program": "plait.p4"}`)); err != nil {
		t.Fatalf("plait p4info: %v", err)
	}
	got, err := r.client.GetForwardingPipelineConfig(context.Background(), &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 1})
	if err != nil || got.GetConfig().GetCookie().GetCookie() != 7 || !proto.Equal(got.GetConfig().GetP4Info(), r.info.P4Info) {
		t.Errorf("get config: %v %v", got, err)
	}
	if err := r.write(1, p4v1.Update_INSERT, e); err != nil {
		t.Errorf("write after commit: %v", err)
	}
}

// PacketOut goes through the pipeline from the CPU port; send_to_cpu reaches the primary.
func TestPacketIO(t *testing.T) {
	r := newRig(t, 2)
	st, _ := r.stream(t, 1)
	if err := r.write(1, p4v1.Update_INSERT, r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "send_to_cpu")); err != nil {
		t.Fatal(err)
	}
	r.ports[1].Inject(frame)
	var pin *p4v1.PacketIn
	for pin == nil {
		m, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		pin = m.GetPacket()
	}
	md, err := r.info.PacketInMetadata(pin)
	if err != nil || md["ingress_port"] != 1 {
		t.Errorf("packet-in metadata %v %v, want ingress_port 1", md, err)
	}
	if len(pin.GetPayload()) != len(frame) {
		t.Errorf("packet-in payload %x", pin.GetPayload())
	}
	po, _ := r.info.PacketOut(frame, map[string]any{"egress_port": 2})
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: po}}); err != nil {
		t.Fatal(err)
	}
	if got := r.recvFrame(t, 2); len(got) != len(frame) {
		t.Errorf("packet-out frame %x", got)
	}
	st.CloseSend()
	for {
		if _, err := st.Recv(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Errorf("stream closed with %v", err)
			}
			break
		}
	}
}
