package datapath

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/plait/plait/wire"
)

// fromPort is a UDP-encapsulated frame as it arrives when a NAT on the way rewrote the
// peer's source port (the UDP checksum is zero: nothing else changes).
func fromPort(f []byte, port uint16) []byte {
	binary.BigEndian.PutUint16(f[14+20:], port)
	return f
}

// replyTunnel is the sender of the test receiver's host, on its slot: its path i goes
// back to where the receiver's path i comes from (the peer's 10.0.i.1).
func replyTunnel(k *wire.Key) Tunnel {
	tun := testTunnel(ModeRR, 3)
	tun.Slot, tun.ID, tun.Key = rxSlot, rxTunnel, k
	for i := range tun.Paths {
		tun.Paths[i].SrcIP, tun.Paths[i].DstIP = tun.Paths[i].DstIP, tun.Paths[i].SrcIP
	}
	return tun
}

// replyPorts sends one packet on each path (rr) and returns the UDP destination port of
// each, by path id.
func replyPorts(t *testing.T, d *Datapath) [3]uint16 {
	t.Helper()
	var ports [3]uint16
	for i := range 3 {
		ret, out, h := sent(t, d, innerPacket(uint32(i), 100), rxSlot)
		if ret != tcActRedirect || h.PathID > 2 {
			t.Fatalf("sender verdict %d, path %d", ret, h.PathID)
		}
		ports[h.PathID] = binary.BigEndian.Uint16(out[14+20+2:])
	}
	return ports
}

// The receiver learns the port the peer's authenticated packets on a path come from, and
// the sender sends that path's packets there: a NAT that rewrites the peer's port, and
// later rewrites it again, is followed after one packet. Nothing without a valid, new tag
// moves it: not an untagged packet, a packet tagged under another key, nor a replay.
func TestReceiverLearnsThePeersPort(t *testing.T) {
	d := load(t)
	rng := rand.New(rand.NewPCG(32, 1))
	k, other := randomKey(rng), randomKey(rng)
	authReceiver(t, d, *k)
	tun := replyTunnel(k)
	configure(t, d, tun)
	inner := innerPacket(0, 100)[14:]
	want := func(step string, ports [3]uint16) {
		t.Helper()
		if got := replyPorts(t, d); got != ports {
			t.Fatalf("%s: the sender sends to ports %v, want %v", step, got, ports)
		}
	}
	receive := func(step string, f []byte, verdict string) {
		t.Helper()
		_, before, _ := d.Verdicts([]uint32{rxSlot})
		run(t, d.rcv.PlaitReceiver, f)
		_, after, _ := d.Verdicts([]uint32{rxSlot})
		if after[verdict] != before[verdict]+1 {
			t.Fatalf("%s: not counted as %s (%v)", step, verdict, after)
		}
	}
	want("nothing arrived yet", [3]uint16{7733, 7733, 7733})

	first := signedPacket(t, k, arrival{seq: 0, path: 1, pathSeq: 0}, 0, inner, false)
	receive("first packet on path 1, from port 40017", fromPort(first, 40017), "decap")
	sc, err := d.ReadSender(rxSlot)
	if err != nil {
		t.Fatal(err)
	}
	if p := sc.Peers[1]; p.Addr != tun.Paths[1].DstIP || p.Port != 40017 || sc.Peers[0].Port != 0 {
		t.Fatalf("learned %+v on path 1 (and %+v on path 0), want 40017 from %s", p, sc.Peers[0], tun.Paths[1].DstIP)
	}
	want("learned", [3]uint16{7733, 40017, 7733})

	receive("untagged from port 40099", fromPort(plaitPacket(t, arrival{seq: 1, path: 1, pathSeq: 1}, 0, 0, inner), 40099), "drop_no_tag")
	receive("tagged under another key", fromPort(signedPacket(t, other, arrival{seq: 1, path: 1, pathSeq: 1}, 0, inner, false), 40099), "drop_bad_tag")
	receive("the first packet replayed from port 40099", fromPort(first, 40099), "drop_replay")
	want("after forgeries", [3]uint16{7733, 40017, 7733})

	probe := signedPacket(t, k, arrival{path: 1, pathSeq: 5}, wire.FlagProbe, make([]byte, 64), false)
	receive("a probe after the NAT's mapping changed", fromPort(probe, 40050), "probe")
	want("a probe moves it", [3]uint16{7733, 40050, 7733})
	receive("data from the new port", fromPort(signedPacket(t, k, arrival{seq: 1, path: 1, pathSeq: 1}, 0, inner, false), 40050), "decap")
	receive("and more", fromPort(signedPacket(t, k, arrival{seq: 3, path: 1, pathSeq: 3}, 0, inner, false), 40050), "decap")
	receive("a packet the path held back, from the old port", fromPort(signedPacket(t, k, arrival{seq: 2, path: 1, pathSeq: 2}, 0, inner, false), 40017), "decap")
	want("a late packet does not move it back", [3]uint16{7733, 40050, 7733})

	// The path now goes to another address: the port learned from the old one is not used.
	moved := tun
	moved.Paths = append([]Path(nil), tun.Paths...)
	moved.Paths[1].DstIP = netip.MustParseAddr("10.0.1.9")
	if err := d.WriteSender(moved); err != nil {
		t.Fatal(err)
	}
	want("path 1 moved", [3]uint16{7733, 7733, 7733})
	// Without a key the sender keeps the tunnel's port.
	plain := tun
	plain.Key = nil
	if err := d.WriteSender(plain); err != nil {
		t.Fatal(err)
	}
	want("no key", [3]uint16{7733, 7733, 7733})
}

// Without authentication nothing is learned: anyone can put the peer's address on a
// packet, and the sender keeps the tunnel's port.
func TestReceiverLearnsNoPortWithoutAuth(t *testing.T) {
	d := load(t)
	configureReceiver(t, d)
	configure(t, d, replyTunnel(nil))
	inner := innerPacket(0, 100)[14:]
	f := fromPort(plaitPacket(t, arrival{seq: 0, path: 1, pathSeq: 0}, 0, uint32(monotonicNs()), inner), 40017)
	if ret, _ := run(t, d.rcv.PlaitReceiver, f); ret != xdpPass {
		t.Fatalf("verdict %d, want pass", ret)
	}
	sc, err := d.ReadSender(rxSlot)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Peers != [wire.MaxPaths]PeerPort{} {
		t.Fatalf("learned %+v from unauthenticated packets", sc.Peers)
	}
	if got := replyPorts(t, d); got != [3]uint16{7733, 7733, 7733} {
		t.Fatalf("the sender sends to ports %v", got)
	}
}
