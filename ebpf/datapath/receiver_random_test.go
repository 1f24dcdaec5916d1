package datapath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

// classify is the receiver's verdict for a frame, from the rules in docs/datapath.md, written
// independently of the C program.
func classify(b []byte, tunnelValid, restores func(uint16) bool) string {
	be := binary.BigEndian
	if len(b) < 14 || be.Uint16(b[12:]) != pkt.EtherTypeIPv4 || len(b) < 34 {
		return "pass_not_ipv4"
	}
	ip := b[14:]
	hl := int(ip[0]&0x0f) * 4
	if hl < 20 || hl > len(ip) {
		return "pass_not_ipv4"
	}
	if ip[9] != pkt.ProtoUDP && ip[9] != wire.IPProto {
		return "pass_not_udp"
	}
	if be.Uint16(ip[6:])&0x3fff != 0 {
		return "pass_fragment"
	}
	ipLen := int(be.Uint16(ip[2:]))
	l4 := 0
	if ip[9] == pkt.ProtoUDP {
		if hl+8 > len(ip) {
			return "pass_not_udp"
		}
		udp := ip[hl:]
		if be.Uint16(udp[2:]) != 7733 {
			return "pass_other_port"
		}
		if int(be.Uint16(udp[4:])) != ipLen-hl {
			return "drop_bad_length"
		}
		l4 = 8
	}
	if ipLen > len(ip) || ipLen < hl+l4+16 {
		return "drop_bad_length"
	}
	ph := ip[hl+l4:]
	if len(ph) < 16 {
		return "drop_truncated"
	}
	if ph[0]>>4 != 1 {
		return "drop_bad_version"
	}
	pathID, repair := int(ph[1]&^wire.PathRepair), ph[1]&wire.PathRepair != 0
	if pathID >= 8 {
		return "drop_bad_path"
	}
	if !tunnelValid(be.Uint16(ph[2:])) {
		return "drop_unknown_tunnel"
	}
	// Every frame arrives on rxIfindex, every test path's interface.
	if reason := peerCheck(netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), pathID); reason != "" {
		return reason
	}
	rest := ph[16:]
	if ph[0]&wire.FlagTelemetry != 0 {
		if len(rest) < 8 {
			return "drop_truncated"
		}
		rest = rest[8:]
	}
	tagged := ph[0]&wire.FlagAuth != 0
	if tagged {
		if len(rest) < wire.TagLen+wire.TagCover {
			return "drop_truncated"
		}
		rest = rest[wire.TagLen:]
	}
	// The test tunnels have no key: a tagged packet is one they cannot check.
	decap := "decap"
	if tagged {
		decap = "drop_bad_tag"
	}
	if ph[0]&(wire.FlagCompact|wire.FlagProbe) == wire.FlagCompact {
		switch {
		case len(rest) < 20:
			return "drop_truncated"
		case hl != 20 || !restores(be.Uint16(ph[2:])):
			return "drop_bad_inner"
		}
		return decap
	}
	if ph[0]&wire.FlagProbe != 0 {
		switch {
		case tagged:
			return decap
		case repair:
			return "drop_repair_probe"
		}
		return "probe"
	}
	if len(rest) < 20 {
		return "drop_truncated"
	}
	innerLen := int(be.Uint16(rest[2:]))
	innerOff := len(b) - len(rest)
	if rest[0]>>4 != 4 || rest[0]&0x0f < 5 || innerLen < int(rest[0]&0x0f)*4 || innerOff+innerLen != 14+ipLen {
		return "drop_bad_inner"
	}
	if netip.AddrFrom4([4]byte(rest[12:16])) != innerSrc {
		return "drop_inner_source"
	}
	return decap
}

// peerCheck is the receiver's peer check against testReceiver's three paths: the outer
// addresses must be those of the path the header names.
func peerCheck(src, dst netip.Addr, pathID int) string {
	for i := range 3 {
		if p := testPath(i); p.SrcIP == src && p.DstIP == dst {
			if i != pathID {
				return "drop_path_mismatch"
			}
			return ""
		}
	}
	return "drop_unknown_peer"
}

// At least 100 000 random and mutated frames: every verdict matches the reference, the
// verdict counters add up exactly, and decapsulated frames are exactly the inner packet.
func TestReceiverRandomAndMutatedPackets(t *testing.T) {
	const n = 100000
	d := load(t)
	configureReceiver(t, d)
	// A second tunnel, from the same peer, that takes no compact packets.
	other := testReceiver(7, rxSlot+1, 3)
	other.Peer, other.Local = netip.Addr{}, netip.Addr{}
	if err := d.ResetReceiver(other.Slot); err != nil {
		t.Fatal(err)
	}
	if err := d.SetReceiver(other); err != nil {
		t.Fatal(err)
	}
	valid := func(id uint16) bool { return id == rxTunnel || id == 7 }
	restores := func(id uint16) bool { return id == rxTunnel }
	rng := rand.New(rand.NewPCG(7, 7))
	want := map[string]uint64{}
	var decapped, probes uint64
	for i := 0; i < n; i++ {
		in := randomFrame(t, rng, uint32(i))
		verdict := classify(in, valid, restores)
		want[verdict]++
		ret, out := run(t, d.rcv.PlaitReceiver, in)
		wantRet := uint32(xdpPass)
		if verdict == "probe" || verdict[:4] == "drop" {
			wantRet = xdpDrop
		}
		if ret != wantRet {
			t.Fatalf("frame %d (%s): verdict %d, want %d\n% x", i, verdict, ret, wantRet, in)
		}
		switch verdict {
		case "decap":
			decapped++
			ph := 14 + 28
			if in[14+9] == wire.IPProto {
				ph = 14 + 20
			}
			if in[ph]&wire.FlagCompact != 0 {
				// Restored: the tunnel's addresses, TCP, and a header that checks out.
				if out[14+9] != pkt.ProtoTCP || !bytes.Equal(out[14+12:14+20], append(innerSrc.AsSlice(), innerDst.AsSlice()...)) || wire.Checksum(out[14:34]) != 0 {
					t.Fatalf("frame %d: compact frame not restored\n% x\n% x", i, in, out)
				}
				break
			}
			inner := in[len(in)-len(out)+14:]
			if !bytes.Equal(out[14:], inner) || !bytes.Equal(out[:12], in[:12]) {
				t.Fatalf("frame %d: decapsulated frame is not the inner packet\n% x\n% x", i, in, out)
			}
		case "probe":
			probes++
		default:
			if !bytes.Equal(out, in) {
				t.Fatalf("frame %d (%s) was modified", i, verdict)
			}
		}
	}
	_, got, err := d.Verdicts([]uint32{3, rxSlot, rxSlot + 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ReceiverVerdicts {
		if got[name] != want[name] {
			t.Errorf("verdict %s: counted %d, reference %d", name, got[name], want[name])
		}
	}
	// Mutated seq and path_seq fields jump: those packets pass unmeasured (held); a
	// mutated path id may mark a packet as a repair, counted on no path.
	var pkts, prb, held, received, repairs uint64
	for _, slot := range []uint32{rxSlot, rxSlot + 1} {
		rx, err := d.ReadReceiver(slot, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range rx.Paths {
			pkts += p.Packets
			prb += p.Probes
			held += p.Held
		}
		received += rx.Received
		repairs += rx.Repairs
	}
	if pkts+prb+held+repairs != decapped+probes || received != pkts || held > (decapped+probes)/50 {
		t.Errorf("measurements: %d packets %d probes %d held %d received %d repairs; verdicts say %d decapsulated, %d probes", pkts, prb, held, received, repairs, decapped, probes)
	}
	t.Logf("%d frames: %v", n, want)
}

// randomFrame is a valid Plait frame with one or more mutations, or random bytes.
func randomFrame(t testing.TB, rng *rand.Rand, i uint32) []byte {
	if rng.IntN(10) == 0 {
		b := make([]byte, 14+rng.IntN(200))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if len(b) > 14 && rng.IntN(2) == 0 {
			binary.BigEndian.PutUint16(b[12:], pkt.EtherTypeIPv4)
		}
		return b
	}
	var flags uint8
	if rng.IntN(4) == 0 {
		flags |= wire.FlagTelemetry
	}
	var inner []byte
	var b []byte
	ipEncap := rng.IntN(3) == 0
	ph := 14 + 28 // the Plait header
	if ipEncap {
		ph = 14 + 20
	}
	switch rng.IntN(10) {
	case 0:
		flags |= wire.FlagProbe
	case 1, 2:
		b = compactPacket(t, arrival{seq: i, path: rng.Uint32N(3), pathSeq: i}, flags, uint32(monotonicNs()), innerPacket(i, rng.IntN(300))[14:], ipEncap)
	default:
		inner = innerPacket(i, rng.IntN(300))[14:]
	}
	if b == nil {
		b = encapPacket(t, arrival{seq: i, path: rng.Uint32N(3), pathSeq: i}, flags, uint32(monotonicNs()), inner, ipEncap)
	}
	for m := rng.IntN(4); m > 0; m-- {
		switch rng.IntN(5) {
		case 0: // flip a byte in the headers
			b[rng.IntN(min(len(b), ph+16+8+24))] ^= byte(1 + rng.IntN(255))
		case 1: // truncate (XDP never sees less than an Ethernet header)
			b = b[:14+rng.IntN(len(b)-13)]
		case 2: // extra trailing bytes (Ethernet padding)
			b = append(b, make([]byte, rng.IntN(20))...)
		case 3: // another tunnel id
			if len(b) > ph+4 {
				binary.BigEndian.PutUint16(b[ph+2:], uint16(rng.IntN(10)))
			}
		case 4: // cut inside the Plait headers, with outer lengths that agree
			if len(b) > ph+40 {
				b = b[:ph+rng.IntN(40)]
				binary.BigEndian.PutUint16(b[14+2:], uint16(len(b)-14))
				if !ipEncap {
					binary.BigEndian.PutUint16(b[14+20+4:], uint16(len(b)-14-20))
				}
			}
		}
	}
	return b
}
