package datapath

import (
	"testing"
	"time"

	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

// repairPacket is the packet of seq and pathSeq lost on its path, resent as a repair on
// path via, tagged under k.
func repairPacket(t *testing.T, k *wire.Key, seq, pathSeq, via uint32) []byte {
	t.Helper()
	p := testPath(int(via))
	h := wire.Header{Version: 1, PathID: uint8(via) | wire.PathRepair, TunnelID: rxTunnel, Seq: seq, PathSeq: pathSeq, TxNs: uint32(monotonicNs())}
	body, err := wire.AppendEncap(nil, wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, Key: k}, h, wire.Telemetry{}, innerPacket(seq, 100)[14:])
	if err != nil {
		t.Fatal(err)
	}
	return pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body)
}

// With repair on, a gap in a path's path_seq reaches the agent as a Gap; the repair of
// the missing packet, resent on another path, is decapsulated once, counted apart from
// every path, and refused as a replay when it comes again.
func TestReceiverRepair(t *testing.T) {
	d := load(t)
	k := wire.Key{1, 2, 3}
	configureReceiver(t, d)
	r := testReceiver(rxTunnel, rxSlot, 3)
	r.Keys, r.Repair = []wire.Key{k}, true
	if err := d.SetReceiver(r); err != nil {
		t.Fatal(err)
	}
	gaps, err := d.Gaps()
	if err != nil {
		t.Fatal(err)
	}
	defer gaps.Close()
	// Path 0 carries seqs 0, 2, 5 as its path_seqs 10, 11, 14: 12 and 13 are lost. The
	// gap carries the delay of the packet that showed it: sent and received in [sent, rcvd].
	var sent, rcvd uint64
	for _, a := range []arrival{{0, 0, 10}, {1, 1, 0}, {2, 0, 11}, {3, 1, 1}, {5, 0, 14}} {
		sent = monotonicNs()
		if ret, _ := run(t, d.rcv.PlaitReceiver, signedPacket(t, &k, a, 0, innerPacket(a.seq, 100)[14:], false)); ret != xdpPass {
			t.Fatalf("%v: verdict %d, want pass", a, ret)
		}
		rcvd = monotonicNs()
	}
	got := make(chan Gap, 1)
	go func() {
		g, err := gaps.Read()
		if err == nil {
			got <- g
		}
	}()
	select {
	case g := <-got:
		owd := g.OwdNs
		g.OwdNs = 0
		if want := (Gap{Slot: rxSlot, Path: 0, First: 12, Count: 2}); g != want {
			t.Errorf("gap %+v, want %+v", g, want)
		}
		if owd <= 0 || owd > int64(rcvd-sent) {
			t.Errorf("gap's delay %d ns, want that of the packet after it, within its %d ns from sending to verdict", owd, rcvd-sent)
		}
	case <-time.After(time.Second):
		t.Fatal("no gap reported")
	}
	before, _ := d.ReadReceiver(rxSlot, 1)
	in := repairPacket(t, &k, 4, 13, 1)
	ret, out := run(t, d.rcv.PlaitReceiver, in)
	if ret != xdpPass || len(out) != 14+len(innerPacket(4, 100))-14 {
		t.Fatalf("repair: verdict %d, %d bytes out, want pass with the inner packet", ret, len(out))
	}
	after, _ := d.ReadReceiver(rxSlot, 1)
	if after.Repairs != 1 || after.Received != before.Received || after.Paths[1] != before.Paths[1] || after.Gaps != 1 || after.GapSeqs != 2 {
		t.Errorf("repairs %d, received %d -> %d, gaps %d of %d seqs; path 1 %+v -> %+v; want 1 repair counted on no path, 1 gap of 2",
			after.Repairs, before.Received, after.Received, after.Gaps, after.GapSeqs, before.Paths[1], after.Paths[1])
	}
	if ret, _ := run(t, d.rcv.PlaitReceiver, in); ret != xdpDrop {
		t.Errorf("the same repair again: verdict %d, want drop (replay)", ret)
	}
	// A seq that did arrive is refused as a repair too.
	if ret, _ := run(t, d.rcv.PlaitReceiver, repairPacket(t, &k, 2, 11, 1)); ret != xdpDrop {
		t.Errorf("a repair of a seq that came: verdict %d, want drop (replay)", ret)
	}
}
