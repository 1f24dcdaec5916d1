package datapath

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

const rxSlot, rxTunnel = 5, 42

func configureReceiver(t testing.TB, d *Datapath) {
	t.Helper()
	if err := d.SetReceivePorts([]uint16{7733}); err != nil {
		t.Fatal(err)
	}
	if err := d.ResetReceiver(rxSlot); err != nil {
		t.Fatal(err)
	}
	if err := d.SetReceiver(testReceiver(rxTunnel, rxSlot, 3)); err != nil {
		t.Fatal(err)
	}
}

// testReceiver takes n test paths' packets (testPath i, arriving on rxIfindex) from the
// peer's tunnel address.
func testReceiver(id uint16, slot uint32, n int) Receiver {
	r := Receiver{ID: id, Slot: slot, Peer: innerSrc, Local: innerDst, Self: innerDst,
		Allowed: []netip.Prefix{netip.PrefixFrom(innerSrc, 32)}}
	for i := range n {
		p := testPath(i)
		r.Paths = append(r.Paths, RxPathConfig{Src: p.SrcIP, Dst: p.DstIP, Ifindex: rxIfindex})
	}
	return r
}

// arrival is one packet of a crafted receive sequence.
type arrival struct {
	seq, path, pathSeq uint32
}

func plaitPacket(t testing.TB, a arrival, flags uint8, txNs uint32, inner []byte) []byte {
	t.Helper()
	return encapPacket(t, a, flags, txNs, inner, false)
}

// encapPacket is plaitPacket in UDP or, with ipEncap, in IP.
func encapPacket(t testing.TB, a arrival, flags uint8, txNs uint32, inner []byte, ipEncap bool) []byte {
	t.Helper()
	p := testPath(int(a.path))
	h := wire.Header{Version: 1, Flags: flags, PathID: uint8(a.path), TunnelID: rxTunnel, Seq: a.seq, PathSeq: a.pathSeq, TxNs: txNs}
	body, err := wire.AppendEncap(nil, wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, IPEncap: ipEncap}, h, wire.Telemetry{QueueUs: 250, MaxQdepth: 7, Hops: 1}, inner)
	if err != nil {
		t.Fatal(err)
	}
	return pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body)
}

// compactPacket is the compact form of an inner IPv4/TCP packet on path a.path.
func compactPacket(t testing.TB, a arrival, flags uint8, txNs uint32, inner []byte, ipEncap bool) []byte {
	t.Helper()
	p := testPath(int(a.path))
	h := wire.Header{Version: 1, Flags: flags | wire.FlagCompact, PathID: uint8(a.path), TunnelID: rxTunnel, Seq: a.seq, PathSeq: a.pathSeq, TxNs: txNs}
	body, err := wire.AppendCompact(nil, wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, IPEncap: ipEncap}, h, wire.Telemetry{QueueUs: 250, MaxQdepth: 7, Hops: 1}, inner)
	if err != nil {
		t.Fatal(err)
	}
	return pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body)
}

func receive(t testing.TB, d *Datapath, arrivals []arrival) {
	t.Helper()
	for _, a := range arrivals {
		in := plaitPacket(t, a, 0, uint32(monotonicNs()), innerPacket(a.seq, 100)[14:])
		if ret, _ := run(t, d.rcv.PlaitReceiver, in); ret != xdpPass {
			t.Fatalf("seq %d: verdict %d, want pass", a.seq, ret)
		}
	}
}

// rfc4737 computes the reordering metrics of an arrival sequence directly from the RFC's
// definitions, the slow way, as the reference for the program.
type rfc4737 struct {
	reordered, inter, intra, three int
	extents                        []int
}

func reference(arrivals []arrival) rfc4737 {
	var r rfc4737
	pathMax := map[uint32]int64{}
	for i, a := range arrivals {
		inPathOrder := int64(a.pathSeq) > pathMax[a.path]-1 || pathMax[a.path] == 0
		if inPathOrder {
			pathMax[a.path] = int64(a.pathSeq) + 1
		}
		nextExp := uint32(0)
		for _, b := range arrivals[:i] {
			nextExp = max(nextExp, b.seq+1)
		}
		if i == 0 || a.seq >= nextExp {
			continue
		}
		r.reordered++
		if inPathOrder {
			r.inter++
		} else {
			r.intra++
		}
		for j, b := range arrivals[:i] {
			if b.seq > a.seq {
				r.extents = append(r.extents, i-j)
				break
			}
		}
		if i >= 3 && arrivals[i-1].seq > a.seq && arrivals[i-2].seq > a.seq && arrivals[i-3].seq > a.seq {
			r.three++
		}
	}
	return r
}

func checkReordering(t *testing.T, d *Datapath, arrivals []arrival) RxTunnel {
	t.Helper()
	want := reference(arrivals)
	got, err := d.ReadReceiver(rxSlot, 1)
	if err != nil {
		t.Fatal(err)
	}
	var hist [len(RxTunnel{}.ExtentHist)]uint64
	for _, e := range want.extents {
		hist[log2(e)]++
	}
	if got.Received != uint64(len(arrivals)) || got.Reordered != uint64(want.reordered) ||
		got.InterPath != uint64(want.inter) || got.IntraPath != uint64(want.intra) ||
		got.ThreeReordered != uint64(want.three) || got.ExtentHist != hist || got.UnknownExtent != 0 {
		t.Fatalf("receiver: received %d reordered %d inter %d intra %d 3-reordered %d extents %v unknown %d\n"+
			"reference: received %d reordered %d inter %d intra %d 3-reordered %d extents %v",
			got.Received, got.Reordered, got.InterPath, got.IntraPath, got.ThreeReordered, got.ExtentHist, got.UnknownExtent,
			len(arrivals), want.reordered, want.inter, want.intra, want.three, hist)
	}
	return got
}

func log2(v int) int {
	b := 0
	for v > 1 {
		v >>= 1
		b++
	}
	return min(b, 15)
}

// Packets 1-7 on path A and 8-14 on path B, arriving interleaved: B's packets overtake A's
// because of delay skew, each path is in order, so every gap is inter-path.
func TestReceiverInterleavedPathsAreInterPath(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	var arrivals []arrival
	for i := uint32(0); i < 7; i++ {
		arrivals = append(arrivals, arrival{seq: 1 + i, path: 0, pathSeq: i}, arrival{seq: 8 + i, path: 1, pathSeq: i})
	}
	receive(t, d, arrivals)
	got := checkReordering(t, d, arrivals)
	if got.Reordered != 6 || got.InterPath != 6 || got.IntraPath != 0 {
		t.Fatalf("interleaved paths: reordered %d inter %d intra %d, want 6/6/0", got.Reordered, got.InterPath, got.IntraPath)
	}
	for p := 0; p < 2; p++ {
		if got.Paths[p].Lost() != 0 || got.Paths[p].Late != 0 || got.Paths[p].Packets != 7 {
			t.Errorf("path %d: %+v", p, got.Paths[p])
		}
	}
}

// A packet lost on one path is an intra-path gap: a path_seq hole, not reordering.
func TestReceiverLossIsIntraPath(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	var arrivals []arrival
	for i := uint32(0); i < 10; i++ {
		if i != 4 { // lost on path 0
			arrivals = append(arrivals, arrival{seq: 2 * i, path: 0, pathSeq: i})
		}
		arrivals = append(arrivals, arrival{seq: 2*i + 1, path: 1, pathSeq: i})
	}
	receive(t, d, arrivals)
	got := checkReordering(t, d, arrivals)
	if got.Paths[0].Lost() != 1 || got.Paths[1].Lost() != 0 || got.Reordered != 0 {
		t.Fatalf("lost on path 0: path losses %d/%d, reordered %d; want 1/0/0",
			got.Paths[0].Lost(), got.Paths[1].Lost(), got.Reordered)
	}
}

// Reordering within one path (jitter) is intra-path, and a 3-reordered packet is counted.
func TestReceiverReorderingWithinPath(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	arrivals := []arrival{{0, 0, 0}, {1, 0, 1}, {3, 0, 3}, {4, 0, 4}, {5, 0, 5}, {2, 0, 2}, {6, 0, 6}}
	receive(t, d, arrivals)
	got := checkReordering(t, d, arrivals)
	if got.IntraPath != 1 || got.InterPath != 0 || got.ThreeReordered != 1 || got.Paths[0].Late != 1 {
		t.Fatalf("jitter within a path: intra %d inter %d 3-reordered %d late %d; want 1/0/1/1",
			got.IntraPath, got.InterPath, got.ThreeReordered, got.Paths[0].Late)
	}
}

// Random arrival orders of striped packets against the reference.
func TestReceiverReorderingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 20; trial++ {
		d := load(t)
		configureReceiver(t, d)
		// Stripe 200 packets over 3 paths, then deliver each path in order but interleave
		// the paths randomly, with an occasional swap inside a path.
		var perPath [3][]arrival
		for s := uint32(0); s < 200; s++ {
			p := rng.Uint32N(3)
			perPath[p] = append(perPath[p], arrival{seq: s, path: p, pathSeq: uint32(len(perPath[p]))})
		}
		for p := range perPath {
			for i := 1; i < len(perPath[p]); i++ {
				if rng.IntN(20) == 0 {
					perPath[p][i-1], perPath[p][i] = perPath[p][i], perPath[p][i-1]
				}
			}
		}
		var arrivals []arrival
		for len(perPath[0])+len(perPath[1])+len(perPath[2]) > 0 {
			p := rng.IntN(3)
			if len(perPath[p]) == 0 {
				continue
			}
			arrivals = append(arrivals, perPath[p][0])
			perPath[p] = perPath[p][1:]
		}
		receive(t, d, arrivals)
		checkReordering(t, d, arrivals)
	}
}

func TestReceiverDecapsulatesExactly(t *testing.T) {
	d := load(t)
	configure(t, d, testTunnel(ModeWRR, 2))
	configureReceiver(t, d)
	for _, c := range []struct{ tel, ipEncap bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		tel := c.tel
		tun := testTunnel(ModeWRR, 2)
		tun.Slot, tun.ID, tun.Telemetry, tun.IPEncap = 3, rxTunnel, tel, c.ipEncap
		if err := d.WriteSender(tun); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 1, 100, 1400} {
			in := innerPacket(uint32(size), size)
			if ret, _, _ := sent(t, d, in); ret != tcActRedirect {
				t.Fatalf("sender verdict %d", ret)
			}
			_, encapped, _ := sent(t, d, in)
			ret, out := run(t, d.rcv.PlaitReceiver, encapped)
			if ret != xdpPass {
				t.Fatalf("receiver verdict %d", ret)
			}
			want := pkt.Ethernet(encapped[0:6], encapped[6:12], pkt.EtherTypeIPv4, in[14:])
			if !bytes.Equal(out, want) {
				t.Fatalf("%+v size %d: decapsulated packet differs\n got % x\nwant % x", c, size, out, want)
			}
		}
	}
}

func TestReceiverMeasuresDelayAndTelemetry(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	for i := uint32(0); i < 10; i++ {
		// Sent 5 ms ago on path 0, 30 ms ago on path 1, with a telemetry block.
		now := uint32(monotonicNs())
		for p, ago := range []uint32{5e6, 30e6} {
			in := plaitPacket(t, arrival{seq: 2*i + uint32(p), path: uint32(p), pathSeq: i}, wire.FlagTelemetry, now-ago, innerPacket(i, 10)[14:])
			if ret, _ := run(t, d.rcv.PlaitReceiver, in); ret != xdpPass {
				t.Fatalf("verdict %d", ret)
			}
		}
	}
	// A probe is measured and consumed.
	probe := plaitPacket(t, arrival{path: 1}, wire.FlagProbe, uint32(monotonicNs())-30e6, nil)
	if ret, _ := run(t, d.rcv.PlaitReceiver, probe); ret != xdpDrop {
		t.Fatalf("probe verdict %d, want drop", ret)
	}
	got, err := d.ReadReceiver(rxSlot, 1)
	if err != nil {
		t.Fatal(err)
	}
	for p, ago := range []float64{5e6, 30e6} {
		pp := got.Paths[p]
		mean := float64(pp.OwdSumNs) / float64(pp.OwdCnt)
		if mean < ago || mean > ago+1e6 || !pp.HasMin || float64(pp.OwdMinNs) < ago || pp.OwdEwmaNs < ago || pp.OwdEwmaNs > ago+1e6 {
			t.Errorf("path %d: mean %.0f min %d ewma %.0f ns, want about %.0f", p, mean, pp.OwdMinNs, pp.OwdEwmaNs, ago)
		}
		if pp.TelPackets != 10 || pp.QueueUsSum != 250*pp.TelPackets || pp.QdepthMax != 7 || pp.Hops != 1 {
			t.Errorf("path %d telemetry: %+v", p, pp)
		}
	}
	if got.Paths[1].Probes != 1 || got.Paths[1].Packets != 10 {
		t.Errorf("path 1: probes %d packets %d, want 1 and 10", got.Paths[1].Probes, got.Paths[1].Packets)
	}
}

// Two packets sent back to back that arrive 1 ms apart are a packet pair: the path
// delivered the second packet's bytes in 1 ms. Data packets pair by path_seq, probes of
// a train by their own sequence, and the two never pair with each other.
func TestReceiverPacketPairDispersion(t *testing.T) {
	for _, flags := range []uint8{0, wire.FlagProbe} {
		d := load(t)
		configureReceiver(t, d)
		tx := uint32(monotonicNs())
		var inner []byte
		if flags == 0 {
			inner = innerPacket(0, 1000-40)[14:]
		} else {
			inner = make([]byte, 1000)
		}
		in := plaitPacket(t, arrival{seq: 0, path: 0, pathSeq: 7}, flags, tx, inner)
		run(t, d.rcv.PlaitReceiver, in)
		// A packet of the other kind in between must not break the pair.
		run(t, d.rcv.PlaitReceiver, plaitPacket(t, arrival{seq: 9, path: 0, pathSeq: 8}, flags^wire.FlagProbe, tx, innerPacket(0, 10)[14:]))
		start := monotonicNs()
		for monotonicNs()-start < 1e6 {
		}
		in = plaitPacket(t, arrival{seq: 1, path: 0, pathSeq: 8}, flags, tx+1000, inner)
		run(t, d.rcv.PlaitReceiver, in)
		got, _ := d.ReadReceiver(rxSlot, 1)
		p := got.Paths[0]
		if p.DispSamples != 1 || p.DispBytes != uint64(len(in)) || p.DispNs < 1e6 || p.DispNs > 3e6 {
			t.Fatalf("flags %#x: %d samples, %d bytes in %d ns; want 1 sample of %d bytes in about 1 ms", flags, p.DispSamples, p.DispBytes, p.DispNs, len(in))
		}
	}
}

func TestReceiverPassesOtherTraffic(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	mac1, mac2 := pkt.MAC("02:00:00:00:00:0a"), pkt.MAC("02:00:00:00:00:0b")
	cases := map[string][]byte{
		"arp":        pkt.Ethernet(mac1, mac2, pkt.EtherTypeARP, make([]byte, 28)),
		"tcp":        pkt.TCPPacket(mac1, mac2, a, b, 1, 100),
		"icmp":       pkt.Ethernet(mac1, mac2, pkt.EtherTypeIPv4, pkt.IPv4(a, b, pkt.ProtoICMP, 1, make([]byte, 64))),
		"other port": pkt.Ethernet(mac1, mac2, pkt.EtherTypeIPv4, pkt.IPv4(a, b, pkt.ProtoUDP, 1, pkt.UDP(a, b, 7733, 53, make([]byte, 40)))),
	}
	for name, in := range cases {
		ret, out := run(t, d.rcv.PlaitReceiver, in)
		if ret != xdpPass || !bytes.Equal(out, in) {
			t.Errorf("%s: verdict %d, changed=%v; want untouched pass", name, ret, !bytes.Equal(out, in))
		}
	}
}

// A compact packet is restored to exactly the packet the sender was given.
func TestReceiverRestoresCompactExactly(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	for _, c := range []struct{ tel, ipEncap bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		tel := c.tel
		tun := testTunnel(ModeWRR, 2)
		tun.ID, tun.Telemetry, tun.Compact, tun.Local, tun.Peer, tun.IPEncap = rxTunnel, tel, true, innerSrc, innerDst, c.ipEncap
		configure(t, d, tun)
		for _, size := range []int{0, 1, 100, 1400} {
			in := innerPacket(uint32(size), size)
			ret, encapped, h := sent(t, d, in)
			if ret != tcActRedirect || h.Flags&wire.FlagCompact == 0 {
				t.Fatalf("sender: verdict %d flags %#x, want a compact packet", ret, h.Flags)
			}
			ret, out := run(t, d.rcv.PlaitReceiver, encapped)
			if ret != xdpPass {
				t.Fatalf("receiver verdict %d", ret)
			}
			want := pkt.Ethernet(encapped[0:6], encapped[6:12], pkt.EtherTypeIPv4, in[14:])
			if !bytes.Equal(out, want) {
				t.Fatalf("%+v size %d: restored packet differs\n got % x\nwant % x", c, size, out, want)
			}
		}
	}
}

// With a tunnel device, decapsulated and restored packets are redirected into its veth
// peer, addressed to the device; probes and drops are not.
func TestReceiverDeliversToTunnelDevice(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	r := testReceiver(rxTunnel, rxSlot, 3)
	r.PeerIfindex, r.DeviceMAC = 77, pkt.MAC("02:00:00:00:00:77")
	if err := d.SetReceiver(r); err != nil {
		t.Fatal(err)
	}
	const xdpRedirect = 4
	inner := innerPacket(0, 100)[14:]
	for name, f := range map[string][]byte{
		"decapsulated": plaitPacket(t, arrival{seq: 0}, 0, uint32(monotonicNs()), inner),
		"restored":     compactPacket(t, arrival{seq: 1, pathSeq: 1}, 0, uint32(monotonicNs()), inner, false),
	} {
		ret, out := run(t, d.rcv.PlaitReceiver, f)
		if ret != xdpRedirect || !bytes.Equal(out[:6], r.DeviceMAC) || !bytes.Equal(out[6:12], f[6:12]) {
			t.Errorf("%s: verdict %d, to %x from %x; want a redirect to %s", name, ret, out[:6], out[6:12], r.DeviceMAC)
		}
	}
	if ret, _ := run(t, d.rcv.PlaitReceiver, plaitPacket(t, arrival{path: 1}, wire.FlagProbe, uint32(monotonicNs()), nil)); ret != xdpDrop {
		t.Errorf("probe: verdict %d, want drop", ret)
	}
}
