package datapath

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/netip"
	"slices"
	"testing"

	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

// sent runs one packet through the sender of slot 3 (or the slot given).
func sent(t *testing.T, d *Datapath, in []byte, slot ...uint32) (uint32, []byte, wire.Header) {
	t.Helper()
	s := uint32(3)
	if len(slot) > 0 {
		s = slot[0]
	}
	ret, out := run(t, senderProg(t, d, s), in)
	if ret != tcActRedirect {
		return ret, out, wire.Header{}
	}
	off := 14 + 28
	if out[14+9] == wire.IPProto {
		off = 14 + 20
	}
	h, err := wire.ParseHeader(out[off:])
	if err != nil {
		t.Fatalf("sender output has no valid Plait header: %v\n% x", err, out)
	}
	return ret, out, h
}

func TestSenderEncapsulatesByteForByte(t *testing.T) {
	for _, c := range []struct{ tel, ipEncap bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		tel := c.tel
		d := load(t)
		tun := testTunnel(ModeWRR, 2)
		tun.Telemetry, tun.IPEncap = tel, c.ipEncap
		configure(t, d, tun)
		in := innerPacket(1000, 1200)

		before := monotonicNs()
		ret, out, h := sent(t, d, in)
		after := monotonicNs()
		if ret != tcActRedirect {
			t.Fatalf("telemetry=%v: verdict %d, want redirect", tel, ret)
		}
		if h.TxNs-uint32(before) > uint32(after-before) {
			t.Errorf("tx_ns %d outside the run [%d, %d]", h.TxNs, uint32(before), uint32(after))
		}

		p := tun.Paths[h.PathID]
		wh := wire.Header{Version: 1, PathID: h.PathID, TunnelID: 42, Seq: 0, PathSeq: 0, TxNs: h.TxNs}
		if tel {
			wh.Flags = wire.FlagTelemetry
		}
		body, err := wire.AppendEncap(nil, wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, IPEncap: c.ipEncap}, wh, wire.Telemetry{}, in[14:])
		if err != nil {
			t.Fatal(err)
		}
		want := pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body)
		if !bytes.Equal(out, want) {
			t.Fatalf("%+v: encapsulated packet differs\n got % x\nwant % x", c, out, want)
		}
		if add, wantAdd := len(out)-len(in), map[bool]int{false: wire.EncapLen, true: wire.IPEncapLen}[c.ipEncap]; !tel && add != wantAdd {
			t.Errorf("%+v: encapsulation adds %d bytes, want %d", c, add, wantAdd)
		}
	}
}

func TestSenderNumbersPackets(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeWRR, 3)
	tun.Paths[0].Weight, tun.Paths[1].Weight, tun.Paths[2].Weight = 1, 2, 3
	configure(t, d, tun)

	next := make(map[uint8]uint32)
	for i := uint32(0); i < 600; i++ {
		_, _, h := sent(t, d, innerPacket(i, 64))
		if h.Seq != i {
			t.Fatalf("packet %d: seq %d", i, h.Seq)
		}
		if h.PathSeq != next[h.PathID] {
			t.Fatalf("packet %d on path %d: path_seq %d, want %d", i, h.PathID, h.PathSeq, next[h.PathID])
		}
		next[h.PathID]++
	}
	c, err := d.ReadSender(tun.Slot)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seq != 600 {
		t.Errorf("sender state seq %d, want 600", c.Seq)
	}
	for p := uint8(0); p < 3; p++ {
		if c.PathSeq[p] != next[p] || c.Packets[p] != uint64(next[p]) {
			t.Errorf("path %d: state path_seq %d, counter %d, want %d", p, c.PathSeq[p], c.Packets[p], next[p])
		}
	}
}

func TestSenderWRRShares(t *testing.T) {
	cases := [][]float64{{1, 2, 3}, {5, 2, 7}, {1, 1}, {0.1, 0.9}, {1, 0, 3}, {3, 1, 4, 1, 5, 9, 2, 6}}
	const n = 10000
	for _, weights := range cases {
		d := load(t)
		tun := testTunnel(ModeWRR, len(weights))
		var total float64
		for i, w := range weights {
			tun.Paths[i].Weight = w
			total += w
		}
		configure(t, d, tun)
		counts := make([]int, len(weights))
		for i := 0; i < n; i++ {
			ret, _, h := sent(t, d, innerPacket(uint32(i), 64))
			if ret != tcActRedirect {
				t.Fatalf("verdict %d", ret)
			}
			counts[h.PathID]++
		}
		for i, w := range weights {
			share, want := float64(counts[i])/n, w/total
			if math.Abs(share-want) > 0.01 {
				t.Errorf("weights %v: path %d got %.4f of packets, want %.4f ±0.01", weights, i, share, want)
			}
		}
	}
}

// A reweight flips to a fully written table: every packet after it follows the new
// weights, with no mix of old and new slots.
func TestSenderWRRReweightIsAtomic(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeWRR, 2)
	tun.Paths[1].Weight = 0
	configure(t, d, tun)
	for i := 0; i < 50; i++ {
		if _, _, h := sent(t, d, innerPacket(uint32(i), 64)); h.PathID != 0 {
			t.Fatalf("weights 1:0 sent packet %d on path %d", i, h.PathID)
		}
	}
	tun.Paths[0].Weight, tun.Paths[1].Weight = 0, 1
	if err := d.WriteSender(tun); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, _, h := sent(t, d, innerPacket(uint32(i), 64)); h.PathID != 1 {
			t.Fatalf("weights 0:1 sent packet %d on path %d", i, h.PathID)
		}
	}
}

func TestSenderRoundRobin(t *testing.T) {
	d := load(t)
	configure(t, d, testTunnel(ModeRR, 3))
	for i := 0; i < 30; i++ {
		if _, _, h := sent(t, d, innerPacket(uint32(i), 64)); int(h.PathID) != i%3 {
			t.Fatalf("packet %d on path %d, want %d", i, h.PathID, i%3)
		}
	}
}

// Under rr one atomic add numbers a packet and places it in the schedule, so a packet the
// sender drops must be refused before it: one too big for the smallest path MTU (whatever
// path it would take) and one with every path down take no seq, and the receiver sees no
// hole in the sequence. An ACK-sized packet on the ACK path takes a seq but leaves the rr
// order alone.
func TestSenderDropsTakeNoSeq(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeRR, 3)
	tun.Paths[2].MTU = 1400
	tun.Paths[1].ACKs = true
	configure(t, d, tun)
	var seq uint32
	send := func(what string, in []byte, path uint8) {
		t.Helper()
		ret, _, h := sent(t, d, in)
		if ret != tcActRedirect || h.PathID != path || (seq != 0 && h.Seq != seq+1) {
			t.Fatalf("%s: verdict %d, path %d, seq %d; want path %d, seq %d", what, ret, h.PathID, h.Seq, path, seq+1)
		}
		seq = h.Seq
	}
	send("data", innerPacket(0, 500), 0)
	send("ACK", innerPacket(1, 0), 1)
	send("data", innerPacket(2, 500), 1)
	send("data", innerPacket(3, 500), 2)
	// 1401 bytes on the wire: it would fit path 0, next in the rr order, but not path 2.
	if ret, _, _ := sent(t, d, innerPacket(4, 1401-wire.EncapLen-40)); ret != tcActShot {
		t.Fatalf("a packet too big for path 2: verdict %d, want drop", ret)
	}
	down := tun
	down.Paths = slices.Clone(tun.Paths)
	for i := range down.Paths {
		down.Paths[i].Up = false
	}
	if err := d.WriteSender(down); err != nil {
		t.Fatal(err)
	}
	if ret, _, _ := sent(t, d, innerPacket(5, 500)); ret != tcActShot {
		t.Fatalf("every path down: verdict %d, want drop", ret)
	}
	if err := d.WriteSender(tun); err != nil {
		t.Fatal(err)
	}
	send("data after the drops", innerPacket(6, 500), 0)
	snd, _, _ := d.Verdicts([]uint32{3})
	if snd["drop_too_big"] != 1 || snd["drop_no_path"] != 1 {
		t.Errorf("verdicts %v, want one drop_too_big and one drop_no_path", snd)
	}
}

func TestSenderDownPathsGetNothing(t *testing.T) {
	for _, mode := range []Mode{ModeRR, ModeWRR, ModeEDPF} {
		d := load(t)
		tun := testTunnel(mode, 3)
		for i := range tun.Paths {
			tun.Paths[i].RateBps = 10e6
		}
		tun.Paths[1].Up = false
		configure(t, d, tun)
		for i := 0; i < 300; i++ {
			ret, _, h := sent(t, d, innerPacket(uint32(i), 500))
			if ret != tcActRedirect || h.PathID == 1 {
				t.Fatalf("%v: packet %d verdict %d path %d; path 1 is down", mode, i, ret, h.PathID)
			}
		}
		// With every path down, packets are dropped rather than sent anywhere.
		for i := range tun.Paths {
			tun.Paths[i].Up = false
		}
		if err := d.WriteSender(tun); err != nil {
			t.Fatal(err)
		}
		if ret, _, _ := sent(t, d, innerPacket(0, 64)); ret != tcActShot {
			t.Fatalf("%v: all paths down: verdict %d, want drop", mode, ret)
		}
	}
}

// The weighted paths being down fails over evenly to the rest.
func TestSenderWRRFailsOver(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeWRR, 3)
	tun.Paths[0].Weight, tun.Paths[1].Weight, tun.Paths[2].Weight = 0, 0, 1
	tun.Paths[2].Up = false
	configure(t, d, tun)
	counts := map[uint8]int{}
	for i := 0; i < 1000; i++ {
		_, _, h := sent(t, d, innerPacket(uint32(i), 64))
		counts[h.PathID]++
	}
	if counts[2] != 0 || counts[0] < 450 || counts[1] < 450 {
		t.Fatalf("fail-over shares %v, want paths 0 and 1 evenly", counts)
	}
}

// edpf against a hand computation: path A 0.5 Mbit/s 1 s, path B 0.1 Mbit/s 200 ms.
// A 1000-byte packet (1044 on the wire) takes 16.7 ms on A and 83.5 ms on B; B delivers at
// 283.5 ms, A at 1016.7 ms, so B is chosen until its queue pushes arrival past A's: the
// k-th packet on B arrives at 200 ms + k·83.5 ms, beyond 1016.7 ms from k = 10, so packets
// 1-9 go to B and the 10th to A. The paths are slow so that a stall of the test between
// two packets (up to 18 ms) cannot change a decision.
func TestSenderEDPFMatchesHandComputation(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeEDPF, 2)
	tun.Paths[0].RateBps, tun.Paths[0].DelayNs = 0.5e6, 1000e6
	tun.Paths[1].RateBps, tun.Paths[1].DelayNs = 0.1e6, 200e6
	configure(t, d, tun)

	in := innerPacket(0, 1000-14-40)
	wireLen := float64(len(in) + wire.EncapLen)
	// The hand computation, packet by packet, in a model where all packets are sent at
	// once (the test sends them within milliseconds of each other).
	busy := []float64{0, 0}
	rate := []float64{0.5e6, 0.1e6}
	delay := []float64{1, 0.2}
	var want []uint8
	for i := 0; i < 40; i++ {
		best, bestT := 0, math.Inf(1)
		for p := range busy {
			if arr := busy[p] + wireLen*8/rate[p] + delay[p]; arr < bestT {
				best, bestT = p, arr
			}
		}
		busy[best] += wireLen * 8 / rate[best]
		want = append(want, uint8(best))
	}
	if want[0] != 1 || want[8] != 1 || want[9] != 0 {
		t.Fatalf("hand computation is off: %v", want)
	}
	for i, w := range want {
		if _, _, h := sent(t, d, in); h.PathID != w {
			t.Fatalf("packet %d on path %d, hand computation says %d (sequence %v)", i, h.PathID, w, want)
		}
	}
}

func TestSenderPassesOtherTraffic(t *testing.T) {
	d := load(t)
	configure(t, d, testTunnel(ModeWRR, 2))
	other := netip.MustParseAddr("192.168.1.1")
	arp := pkt.Ethernet(tunPeer, tunMAC, pkt.EtherTypeARP, make([]byte, 28))
	ipv6 := pkt.Ethernet(tunPeer, tunMAC, pkt.EtherTypeIPv6, make([]byte, 60))
	outside := pkt.Ethernet(tunPeer, tunMAC, pkt.EtherTypeIPv4, pkt.IPv4(innerSrc, other, pkt.ProtoUDP, 1, pkt.UDP(innerSrc, other, 1, 2, []byte("hello"))))
	for name, in := range map[string][]byte{"arp": arp, "ipv6": ipv6, "outside prefix": outside} {
		ret, out := run(t, senderProg(t, d, 3), in)
		if ret != tcActOK || !bytes.Equal(out, in) {
			t.Errorf("%s: verdict %d, changed=%v; want untouched pass", name, ret, !bytes.Equal(out, in))
		}
	}
	// A removed tunnel stops striping: its traffic passes untouched too.
	if err := d.RemoveSender(3); err != nil {
		t.Fatal(err)
	}
	in := innerPacket(1, 100)
	if ret, out := run(t, senderProg(t, d, 3), in); ret != tcActOK || !bytes.Equal(out, in) {
		t.Errorf("removed tunnel: verdict %d; want untouched pass", ret)
	}
	snd, _, err := d.Verdicts([]uint32{3})
	if err != nil {
		t.Fatal(err)
	}
	if snd["pass_not_ipv4"] != 2 || snd["pass_not_tunnel"] != 1 || snd["pass_no_tunnel"] != 1 || snd["redirect"] != 0 {
		t.Errorf("sender verdicts %v", snd)
	}
}

func TestSenderRejectsBadConfig(t *testing.T) {
	d := load(t)
	good := testTunnel(ModeWRR, 2)
	configure(t, d, good)
	bad := map[string]func(*Tunnel){
		"no paths":     func(t *Tunnel) { t.Paths = nil },
		"nine paths":   func(t *Tunnel) { t.Paths = append(t.Paths, make([]Path, 7)...) },
		"all zero":     func(t *Tunnel) { t.Paths[0].Weight, t.Paths[1].Weight = 0, 0 },
		"negative":     func(t *Tunnel) { t.Paths[0].Weight = -1 },
		"NaN":          func(t *Tunnel) { t.Paths[1].Weight = math.NaN() },
		"slot":         func(t *Tunnel) { t.Slot = MaxTunnels },
		"ipv6 prefix":  func(t *Tunnel) { t.Prefix = netip.MustParsePrefix("fd00::/64") },
		"no interface": func(t *Tunnel) { t.Paths[0].Ifindex = 0 },
	}
	for name, mutate := range bad {
		tun := testTunnel(ModeWRR, 2)
		mutate(&tun)
		if err := d.WriteSender(tun); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Nothing was half-applied: the good configuration still runs, both paths in use.
	seen := map[uint8]bool{}
	for i := 0; i < 10; i++ {
		ret, out, h := sent(t, d, innerPacket(uint32(i), 64))
		if ret != tcActRedirect || binary.BigEndian.Uint16(out[12:]) != pkt.EtherTypeIPv4 {
			t.Fatalf("after rejected configs: verdict %d", ret)
		}
		seen[h.PathID] = true
	}
	if len(seen) != 2 {
		t.Fatalf("after rejected configs the split changed: paths %v", seen)
	}
}

// TCP between the tunnel's own addresses goes compact; anything else is encapsulated whole,
// and what no longer fits the path MTU then is refused by name.
func TestSenderCompact(t *testing.T) {
	// Under IP encapsulation too, with telemetry: what it adds is still one block.
	for _, ipEncap := range []bool{true, false} {
		d := load(t)
		tun := testTunnel(ModeWRR, 1)
		tun.Compact, tun.Local, tun.Peer, tun.IPEncap, tun.Telemetry = true, innerSrc, innerDst, ipEncap, true
		configure(t, d, tun)
		in := innerPacket(77, 1000)
		ret, out, h := sent(t, d, in)
		p := tun.Paths[0]
		wh := wire.Header{Version: 1, Flags: wire.FlagCompact | wire.FlagTelemetry, TunnelID: 42, TxNs: h.TxNs}
		body, err := wire.AppendCompact(nil, wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, IPEncap: ipEncap}, wh, wire.Telemetry{}, in[14:])
		if err != nil {
			t.Fatal(err)
		}
		if want := pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body); ret != tcActRedirect || !bytes.Equal(out, want) {
			t.Fatalf("ip encap %v: compact packet differs (verdict %d)\n got % x\nwant % x", ipEncap, ret, out, want)
		}
		if add := map[bool]int{false: wire.CompactLen, true: wire.IPCompactLen}[ipEncap] + wire.TelemetryLen; len(out) != len(in)+add {
			t.Fatalf("ip encap %v: compact adds %d bytes, want %d", ipEncap, len(out)-len(in), add)
		}
	}

	d := load(t)
	tun := testTunnel(ModeWRR, 1)
	tun.Compact, tun.Local, tun.Peer = true, innerSrc, innerDst
	configure(t, d, tun)

	other := netip.MustParseAddr("10.99.0.5")
	udp := pkt.Ethernet(tunPeer, tunMAC, pkt.EtherTypeIPv4, pkt.IPv4(innerSrc, innerDst, pkt.ProtoUDP, 1, pkt.UDP(innerSrc, innerDst, 1, 2, make([]byte, 100))))
	toOther := pkt.TCPPacket(tunPeer, tunMAC, innerSrc, other, 1, 100)
	for name, in := range map[string][]byte{"udp": udp, "tcp to another host": toOther} {
		if _, _, h := sent(t, d, in); h.Flags&wire.FlagCompact != 0 {
			t.Errorf("%s went compact", name)
		}
	}
	// A 1476-byte TCP packet fits the path compact; a 1476-byte UDP packet does not fit
	// encapsulated whole.
	if ret, _, _ := sent(t, d, innerPacket(1, 1476-40)); ret != tcActRedirect {
		t.Errorf("full-size compact TCP packet: verdict %d", ret)
	}
	big := pkt.Ethernet(tunPeer, tunMAC, pkt.EtherTypeIPv4, pkt.IPv4(innerSrc, innerDst, pkt.ProtoUDP, 1, pkt.UDP(innerSrc, innerDst, 1, 2, make([]byte, 1476-28))))
	if ret, _, _ := sent(t, d, big); ret != tcActShot {
		t.Errorf("oversized UDP packet: verdict %d, want drop", ret)
	}
	snd, _, _ := d.Verdicts([]uint32{3})
	if snd["drop_too_big"] != 1 {
		t.Errorf("verdicts %v, want one drop_too_big", snd)
	}
}

// A path that carries the ACKs takes every ACK-sized packet; larger packets keep to the
// mode, and a down ACK path hands its packets to the next path up.
func TestSenderACKPath(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeWRR, 3)
	tun.Paths[0].Weight, tun.Paths[1].Weight, tun.Paths[2].Weight = 0, 0, 1
	tun.Paths[1].ACKs = true
	configure(t, d, tun)
	ack := 80 - 40 // payload of the largest ACK-sized packet: 80 bytes of IPv4 and TCP
	for i, n := range []int{0, ack} {
		if _, _, h := sent(t, d, innerPacket(uint32(i), n), tun.Slot); h.PathID != 1 {
			t.Fatalf("a %d-byte packet went on path %d, want the ACK path 1", 40+n, h.PathID)
		}
	}
	if _, _, h := sent(t, d, innerPacket(2, ack+1), tun.Slot); h.PathID != 2 {
		t.Fatalf("a %d-byte packet went on path %d: only ACK-sized ones take the ACK path, the rest keep to wrr (path 2)", 40+ack+1, h.PathID)
	}
	tun.Paths[1].Up = false
	if err := d.WriteSender(tun); err != nil {
		t.Fatal(err)
	}
	if _, _, h := sent(t, d, innerPacket(3, 0), tun.Slot); h.PathID != 2 {
		t.Fatalf("ACK path down: an ACK went on path %d, want the next one up (2)", h.PathID)
	}
	tun.Paths[0].ACKs = true
	if err := d.WriteSender(tun); err == nil {
		t.Fatal("two ACK paths were accepted")
	}
}

// A congestion signal goes to the next full-sized TCP segment, once per request: dropped
// when the flow is not ECN-capable, marked CE (checksum intact) when it is; ACK-sized
// packets and other traffic never carry it, and a request already given does nothing.
func TestSenderCongestionSignal(t *testing.T) {
	d := load(t)
	tun := testTunnel(ModeRR, 2)
	configure(t, d, tun)
	signal := func(n uint32) {
		t.Helper()
		tun.Signal = n
		if err := d.WriteSender(tun); err != nil {
			t.Fatal(err)
		}
	}
	signaled := func() uint32 {
		t.Helper()
		c, err := d.ReadSender(tun.Slot)
		if err != nil {
			t.Fatal(err)
		}
		return c.Signaled
	}
	if ret, _, _ := sent(t, d, innerPacket(0, 1200), tun.Slot); ret != tcActRedirect {
		t.Fatalf("no signal asked for: verdict %d, want redirect", ret)
	}
	signal(1)
	if ret, _, _ := sent(t, d, innerPacket(1, 0), tun.Slot); ret != tcActRedirect {
		t.Fatalf("an ACK-sized packet took the signal: verdict %d", ret)
	}
	if ret, _, _ := sent(t, d, innerPacket(2, 1200), tun.Slot); ret != tcActShot {
		t.Fatalf("signal for a flow without ECN: verdict %d, want the segment dropped", ret)
	}
	if got := signaled(); got != 1 {
		t.Fatalf("signals given %d, want 1", got)
	}
	for i := range 3 {
		if ret, _, _ := sent(t, d, innerPacket(uint32(3+i), 1200), tun.Slot); ret != tcActRedirect {
			t.Fatalf("segment %d after the signal was given: verdict %d, want redirect", i, ret)
		}
	}

	signal(2)
	in := innerPacket(6, 1200)
	in[14+1] = 0x02 // ECT(0)
	binary.BigEndian.PutUint16(in[14+10:], 0)
	binary.BigEndian.PutUint16(in[14+10:], wire.Checksum(in[14:34]))
	ret, out, _ := sent(t, d, in, tun.Slot)
	if ret != tcActRedirect {
		t.Fatalf("signal for an ECN-capable flow: verdict %d, want the segment sent", ret)
	}
	inner := out[14+wire.EncapLen:]
	if inner[1]&3 != 3 {
		t.Fatalf("inner ECN bits %02b, want CE (11)", inner[1]&3)
	}
	if wire.Checksum(inner[:20]) != 0 {
		t.Fatalf("inner IPv4 checksum wrong after marking: % x", inner[:20])
	}
	if got := signaled(); got != 2 {
		t.Fatalf("signals given %d, want 2", got)
	}
	if v, _, err := d.Verdicts([]uint32{tun.Slot}); err != nil || v["drop_signal"] != 1 || v["mark_signal"] != 1 {
		t.Fatalf("verdicts %v (%v): want one drop_signal and one mark_signal", v, err)
	}
}
