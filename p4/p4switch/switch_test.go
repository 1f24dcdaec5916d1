package p4switch_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"github.com/plait/plait/wire"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// encaps are the two ways a Plait header follows the outer IPv4 header.
var encaps = []struct {
	name string
	udp  bool
}{{"udp", true}, {"ip", false}}

// plaitFrame is a Plait packet with a correct IPv4 checksum, a UDP checksum the switch
// must clear when it stamps (UDP only), the telemetry block flags ask for, and a patterned
// rest (the inner packet) up to size bytes, so that a byte the switch should not touch
// cannot come out right by chance.
func plaitFrame(size int, udp bool, flags uint8) []byte {
	f := []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00}
	ipLen := size - 14
	proto := byte(wire.IPProto)
	if udp {
		proto = 17
	}
	f = append(f, 0x45, 0, byte(ipLen>>8), byte(ipLen), 0, 0, 0x40, 0, 64, proto, 0, 0, 172, 16, 0, 1, 172, 16, 1, 1)
	binary.BigEndian.PutUint16(f[24:], wire.Checksum(f[14:34]))
	if udp {
		f = binary.BigEndian.AppendUint16(f, wire.Port)
		f = binary.BigEndian.AppendUint16(f, wire.Port)
		f = binary.BigEndian.AppendUint16(f, uint16(ipLen-20))
		f = append(f, 0xbe, 0xef)
	}
	f = wire.AppendHeader(f, wire.Header{Version: wire.Version, Flags: flags, PathID: 1, TunnelID: 7})
	if flags&wire.FlagTelemetry != 0 {
		f = wire.AppendTelemetry(f, wire.Telemetry{})
	}
	for len(f) < size {
		f = append(f, byte(len(f)))
	}
	return f
}

// Frames queued behind a slow link carry the queueing they met in their telemetry, and
// come out as they went in but for the telemetry block and the cleared UDP checksum.
func TestTelemetryThroughQueue(t *testing.T) {
	for _, e := range encaps {
		t.Run(e.name, func(t *testing.T) {
			r := newRig(t, 2)
			r.stream(t, 1)
			if err := r.write(1, p4v1.Update_INSERT, r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2))); err != nil {
				t.Fatal(err)
			}
			// 1000 B take 10 ms: the frames are injected microseconds apart, and a stall of
			// a loaded machine would have to last most of a frame to change what they meet.
			const per = 10_000 // µs
			if err := r.sw.SetLinkParams(2, p4switch.LinkParams{RateBps: 8e5}); err != nil {
				t.Fatal(err)
			}
			const n = 5
			in := plaitFrame(1000, e.udp, wire.FlagTelemetry)
			for i := 0; i < n; i++ {
				r.ports[1].Inject(in)
			}
			off := 14 + 20 + wire.HeaderLen // the telemetry block
			if e.udp {
				off += 8
			}
			for i := 0; i < n; i++ {
				f := r.recvFrame(t, 2)
				tel, err := wire.ParseTelemetry(f[off:])
				if err != nil {
					t.Fatal(err)
				}
				wantQ := uint16(max(i-1, 0))
				if tel.Hops != 1 || tel.MaxQdepth != wantQ || int(tel.QueueUs) > i*per || int(tel.QueueUs) < i*per-per*9/10 {
					t.Errorf("frame %d: telemetry %+v, want hops 1, max_qdepth %d, queue_us about %d", i, tel, wantQ, i*per)
				}
				want := append([]byte(nil), in...)
				copy(want[off:], f[off:off+wire.TelemetryLen])
				if e.udp {
					want[40], want[41] = 0, 0
				}
				if !bytes.Equal(f, want) {
					t.Errorf("frame %d:\n%x\nwant\n%x", i, f, want)
				}
			}
		})
	}
}

// A Plait packet without telemetry is routed like any IPv4 packet (MACs, TTL, checksum),
// skips the split as a tagged packet, is counted on its path and is otherwise unchanged.
func TestPlaitWithoutTelemetry(t *testing.T) {
	for _, e := range encaps {
		t.Run(e.name, func(t *testing.T) {
			r := newRig(t, 2)
			r.stream(t, 1)
			if err := r.write(1, p4v1.Update_INSERT,
				r.entry(t, "tunnel_split", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1), p4info.LPM("hdr.ipv4.dst_addr", "172.16.0.0", 16)}, "split", p4info.P("tunnel_id", 1), p4info.P("tunnel_index", 1), p4info.P("gen", 0)),
				r.entry(t, "ipv4_lpm", []p4info.Match{p4info.LPM("hdr.ipv4.dst_addr", "172.16.1.0", 24)}, "ipv4_forward", p4info.P("dst_mac", "02:00:00:00:00:09"), p4info.P("port", 2)),
			); err != nil {
				t.Fatal(err)
			}
			in := plaitFrame(200, e.udp, 0)
			r.ports[1].Inject(in)
			got := r.recvFrame(t, 2)
			want := append([]byte(nil), in...)
			copy(want[6:12], in[0:6])
			copy(want[0:6], []byte{2, 0, 0, 0, 0, 9})
			want[22]--
			want[24], want[25] = 0, 0
			binary.BigEndian.PutUint16(want[24:], wire.Checksum(want[14:34]))
			if !bytes.Equal(got, want) {
				t.Errorf("routed\n%x\nwant\n%x", got, want)
			}
			q, _ := r.info.CounterEntry("path_counter", 7*8+1)
			cs, err := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: q}})
			if err != nil || len(cs) != 1 || cs[0].GetCounterEntry().GetData().GetPacketCount() != 1 {
				t.Errorf("path_counter[57]: %v %v, want 1 packet", cs, err)
			}
		})
	}
}

func TestSetLinkErrors(t *testing.T) {
	r := newRig(t, 2)
	ctx := context.Background()
	before, _ := r.sw.GetLinks(ctx, &plaitv1.GetLinksRequest{})
	loss, rate := 200.0, uint64(5e6)
	cases := []struct {
		name string
		req  *plaitv1.SetLinkRequest
		want codes.Code
	}{
		{"unknown port", &plaitv1.SetLinkRequest{Port: 9, Params: &plaitv1.LinkParams{RateBps: &rate}}, codes.NotFound},
		{"bad loss", &plaitv1.SetLinkRequest{Port: 2, Params: &plaitv1.LinkParams{RateBps: &rate, LossPercent: &loss}}, codes.InvalidArgument},
		{"bad ge", &plaitv1.SetLinkRequest{Port: 2, Params: &plaitv1.LinkParams{GilbertElliott: &plaitv1.GilbertElliott{PBadToGood: -1}}}, codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := r.sw.SetLink(ctx, c.req); status.Code(err) != c.want {
				t.Errorf("SetLink: %v, want %v", err, c.want)
			}
			after, _ := r.sw.GetLinks(ctx, &plaitv1.GetLinksRequest{})
			if !proto.Equal(before, after) {
				t.Errorf("a refused SetLink changed the links:\n%v\n%v", before, after)
			}
		})
	}
	delay := uint64(20000)
	l, err := r.sw.SetLink(ctx, &plaitv1.SetLinkRequest{Port: 2, Params: &plaitv1.LinkParams{DelayUs: &delay}})
	if err != nil || l.GetParams().GetDelayUs() != 20000 || l.GetParams().GetQueuePackets() != p4switch.DefaultQueuePackets {
		t.Errorf("SetLink delay: %v %v", l, err)
	}
	l, err = r.sw.SetLink(ctx, &plaitv1.SetLinkRequest{Port: 2, Params: &plaitv1.LinkParams{RateBps: &rate}})
	if err != nil || l.GetParams().GetDelayUs() != 20000 || l.GetParams().GetRateBps() != rate {
		t.Errorf("SetLink rate kept the delay? %v %v", l, err)
	}
}

func TestNewRejectsBadPorts(t *testing.T) {
	mp := func() p4switch.Port { return p4switch.NewMemPort("m") }
	cases := []struct {
		name string
		opts []p4switch.Option
		want string
	}{
		{"cpu port", []p4switch.Option{p4switch.WithPort(255, mp(), p4switch.LinkParams{})}, "CPU port"},
		{"drop port", []p4switch.Option{p4switch.WithPort(511, mp(), p4switch.LinkParams{})}, "0 to 510"},
		{"twice", []p4switch.Option{p4switch.WithPort(1, mp(), p4switch.LinkParams{}), p4switch.WithPort(1, mp(), p4switch.LinkParams{})}, "twice"},
		{"bad link", []p4switch.Option{p4switch.WithPort(1, mp(), p4switch.LinkParams{LossPercent: -1})}, "loss"},
		{"bad cpu port", []p4switch.Option{p4switch.WithCPUPort(600)}, "cpu port"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := p4switch.New(c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v, want error mentioning %q", err, c.want)
			}
		})
	}
}

// With a tick, a link sends what fell due since it last woke in one go, never before a
// packet's time: frames due every 100 µs leave in a few bursts a tick apart.
func TestTickBatchesDepartures(t *testing.T) {
	r := newRig(t, 2, p4switch.WithTick(time.Millisecond))
	r.stream(t, 1)
	if err := r.write(1, p4v1.Update_INSERT, r.entry(t, "port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "forward", p4info.P("port", 2))); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.SetLinkParams(2, p4switch.LinkParams{RateBps: 8e6}); err != nil { // 100 B: 100 µs
		t.Fatal(err)
	}
	const n, per = 40, 100 * time.Microsecond
	in := plaitFrame(100, true, 0)
	start := time.Now()
	for i := 0; i < n; i++ {
		r.ports[1].Inject(in)
	}
	bursts, last := 0, time.Time{}
	for i := 0; i < n; i++ {
		r.recvFrame(t, 2)
		now := time.Now()
		if due := start.Add(time.Duration(i+1) * per); now.Before(due) {
			t.Errorf("frame %d left %v before its serialisation ended", i, due.Sub(now))
		}
		if now.Sub(last) > per/2 {
			bursts++
		}
		last = now
	}
	// 4 ms of frames: a burst per tick and one when the first frame woke the link, and
	// room for this goroutine being descheduled within a burst (one frame a wake: 40).
	if bursts > 12 {
		t.Errorf("%d frames due %v apart left in %d bursts, want at most 12 with a 1 ms tick", n, per, bursts)
	}
}
