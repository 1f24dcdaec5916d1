package datapath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/plait/plait/internal/pkt"
	"github.com/plait/plait/wire"
)

func randomKey(rng *rand.Rand) *wire.Key {
	var k wire.Key
	for i := range k {
		k[i] = byte(rng.Uint32())
	}
	return &k
}

// authReceiver configures the test receiver to take packets tagged under keys.
func authReceiver(t testing.TB, d *Datapath, keys ...wire.Key) {
	t.Helper()
	configureReceiver(t, d)
	r := testReceiver(rxTunnel, rxSlot, 3)
	r.Keys = keys
	if err := d.SetReceiver(r); err != nil {
		t.Fatal(err)
	}
}

// signedPacket is plaitPacket tagged under k (compact when compact is set).
func signedPacket(t testing.TB, k *wire.Key, a arrival, flags uint8, inner []byte, compact bool) []byte {
	t.Helper()
	p := testPath(int(a.path))
	h := wire.Header{Version: 1, Flags: flags, PathID: uint8(a.path), TunnelID: rxTunnel, Seq: a.seq, PathSeq: a.pathSeq, TxNs: uint32(monotonicNs())}
	o := wire.Outer{Src: p.SrcIP, Dst: p.DstIP, Port: 7733, Key: k}
	build := wire.AppendEncap
	if compact {
		build = wire.AppendCompact
	}
	body, err := build(nil, o, h, wire.Telemetry{}, inner)
	if err != nil {
		t.Fatal(err)
	}
	return pkt.Ethernet(p.DstMAC, p.SrcMAC, pkt.EtherTypeIPv4, body)
}

// The C tag (sender) is the Go one (wire.Tag) for random keys, sizes and layouts, and the
// receiver takes what the sender tags and wire builds, decapsulated exactly.
func TestTagAgreesWithGo(t *testing.T) {
	d := load(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 64 {
		k := randomKey(rng)
		tun := testTunnel(ModeWRR, 2)
		tun.ID, tun.Key = rxTunnel, k
		tun.Telemetry, tun.IPEncap = i&1 != 0, i&2 != 0
		if i&4 != 0 {
			tun.Compact, tun.Local, tun.Peer = true, innerSrc, innerDst
		}
		configure(t, d, tun)
		authReceiver(t, d, *k)
		in := innerPacket(uint32(i), rng.IntN(1400))
		ret, out, h := sent(t, d, in)
		if ret != tcActRedirect || h.Flags&wire.FlagAuth == 0 {
			t.Fatalf("case %d: sender verdict %d flags %#x, want a tagged packet", i, ret, h.Flags)
		}
		off := 14 + 28
		if tun.IPEncap {
			off = 14 + 20
		}
		at := off + wire.HeaderLen
		if tun.Telemetry {
			at += wire.TelemetryLen
		}
		want, err := wire.Tag(k, out[off:], out[at+wire.TagLen:])
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint64(out[at:]); got != want {
			t.Fatalf("case %d: C tag %#016x, Go tag %#016x", i, got, want)
		}
		ret, dec := run(t, d.rcv.PlaitReceiver, out)
		if ret != xdpPass || !bytes.Equal(dec, pkt.Ethernet(out[0:6], out[6:12], pkt.EtherTypeIPv4, in[14:])) {
			t.Fatalf("case %d: receiver verdict %d; decapsulated\n% x\nwant\n% x", i, ret, dec, in)
		}
	}
}

// Each way an adversary can touch an authenticated tunnel's packet is a counted drop.
func TestReceiverAuthenticates(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	k, other := randomKey(rng), randomKey(rng)
	inner := innerPacket(0, 100)[14:]
	for _, c := range []struct {
		name   string
		keys   []wire.Key
		frames func(t *testing.T) [][]byte
		want   []string // verdict of each frame
	}{
		{"tagged", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, k, arrival{seq: 0, path: 0, pathSeq: 0}, 0, inner, false)}
		}, []string{"decap"}},
		{"untagged", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{plaitPacket(t, arrival{}, 0, uint32(monotonicNs()), inner)}
		}, []string{"drop_no_tag"}},
		{"another key", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, other, arrival{}, 0, inner, false)}
		}, []string{"drop_bad_tag"}},
		{"tagged, this end has no key", nil, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, k, arrival{}, 0, inner, false)}
		}, []string{"drop_bad_tag"}},
		{"rollover: either key", []wire.Key{*other, *k}, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, k, arrival{seq: 0}, 0, inner, false), signedPacket(t, other, arrival{seq: 1, pathSeq: 1}, 0, inner, false)}
		}, []string{"decap", "decap"}},
		{"replayed", []wire.Key{*k}, func(t *testing.T) [][]byte {
			f := signedPacket(t, k, arrival{seq: 5, pathSeq: 5}, 0, inner, false)
			return [][]byte{f, f, signedPacket(t, k, arrival{seq: 4, pathSeq: 4}, 0, inner, false), f}
		}, []string{"decap", "drop_replay", "decap", "drop_replay"}},
		// Behind the window, a packet is held like any jump: dropped unless the path's next
		// packet confirms it (see "sender started over").
		{"behind the window", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{
				signedPacket(t, k, arrival{seq: 9000, path: 1, pathSeq: 0}, 0, inner, false),
				signedPacket(t, k, arrival{seq: 9000 - 8128, path: 0, pathSeq: 0}, 0, inner, false),
				signedPacket(t, k, arrival{seq: 9000 - 8127, path: 2, pathSeq: 0}, 0, inner, false),
			}
		}, []string{"decap", "held", "decap"}},
		{"sender started over", []wire.Key{*k}, func(t *testing.T) [][]byte {
			f := func(seq, pathSeq uint32) []byte {
				return signedPacket(t, k, arrival{seq: seq, pathSeq: pathSeq}, 0, inner, false)
			}
			// Far behind the window, the restarted sender's first packet is held; its next
			// confirms the new start, and the window starts over there.
			return [][]byte{f(0, 0), f(20000, 1), f(0, 0), f(1, 1), f(2, 2), f(1, 1)}
		}, []string{"decap", "decap", "held", "decap", "decap", "drop_replay"}},
		{"a tunnel's first packets, numbered from anywhere", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, k, arrival{seq: 3e9, pathSeq: 3e9}, 0, inner, false),
				signedPacket(t, k, arrival{seq: 3e9 + 1, pathSeq: 3e9 + 1}, 0, inner, false)}
		}, []string{"decap", "decap"}},
		{"probe replayed", []wire.Key{*k}, func(t *testing.T) [][]byte {
			p := signedPacket(t, k, arrival{pathSeq: 3}, wire.FlagProbe, make([]byte, 64), false)
			return [][]byte{p, p}
		}, []string{"probe", "drop_replay"}},
		{"compact", []wire.Key{*k}, func(t *testing.T) [][]byte {
			return [][]byte{signedPacket(t, k, arrival{}, 0, inner, true)}
		}, []string{"decap"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := load(t)
			authReceiver(t, d, c.keys...)
			for i, f := range c.frames(t) {
				_, before, _ := d.Verdicts([]uint32{rxSlot})
				ret, _ := run(t, d.rcv.PlaitReceiver, f)
				_, after, _ := d.Verdicts([]uint32{rxSlot})
				var moved []string
				for name, n := range after {
					if n != before[name] {
						moved = append(moved, name)
					}
				}
				wantRet := uint32(xdpDrop)
				if c.want[i] == "decap" || c.want[i] == "held" && c.keys == nil {
					wantRet = xdpPass
				}
				if ret != wantRet || len(moved) != 1 || moved[0] != c.want[i] {
					t.Errorf("frame %d: verdict %d, counters moved %v; want %d and %s", i, ret, moved, wantRet, c.want[i])
				}
			}
		})
	}
}

// Any change to the header, the tag or the bytes the tag covers is a bad tag; telemetry,
// which switches stamp on the way, is outside it.
func TestReceiverRefusesTamperedBits(t *testing.T) {
	d := load(t)
	k := randomKey(rand.New(rand.NewPCG(8, 9)))
	authReceiver(t, d, *k)
	inner := innerPacket(0, 100)[14:]
	const ph = 14 + 28
	seq := uint32(0)
	for bit := 0; bit < 8*(wire.HeaderLen+wire.TelemetryLen+wire.TagLen+wire.TagCover); bit++ {
		byteAt := ph + bit/8
		f := signedPacket(t, k, arrival{seq: seq, pathSeq: seq}, wire.FlagTelemetry, inner, false)
		seq++
		f[byteAt] ^= 1 << (bit % 8)
		// Telemetry is outside the tag; anything else changed is refused, by the tag or
		// by a check before it (version, path, tunnel id, inner header and source).
		stamped := bit/8 >= wire.HeaderLen && bit/8 < wire.HeaderLen+wire.TelemetryLen
		_, before, _ := d.Verdicts([]uint32{rxSlot})
		ret, _ := run(t, d.rcv.PlaitReceiver, f)
		_, after, _ := d.Verdicts([]uint32{rxSlot})
		if decapped := after["decap"] - before["decap"]; stamped != (decapped == 1) || stamped != (ret == xdpPass) {
			t.Errorf("bit %d of byte %d after the header's start: verdict %d, %d decapsulated", bit%8, bit/8, ret, decapped)
		}
	}
}

// 10^5 random and mutated frames against a tunnel that authenticates: a frame passes only
// when what the tag covers is exactly what the key holder signed, and the inner packet
// it hands on is the one signed.
func TestReceiverRandomFramesWithAuth(t *testing.T) {
	const n = 100000
	d := load(t)
	rng := rand.New(rand.NewPCG(11, 12))
	k := randomKey(rng)
	authReceiver(t, d, *k)
	var passed, intact uint64
	for i := range n {
		inner := innerPacket(uint32(i), rng.IntN(300))[14:]
		a := arrival{seq: uint32(i), path: rng.Uint32N(3), pathSeq: uint32(i)}
		var orig []byte
		switch rng.IntN(10) {
		case 0: // a forger without the key
			orig = signedPacket(t, randomKey(rng), a, 0, inner, false)
		case 1:
			orig = plaitPacket(t, a, 0, uint32(monotonicNs()), inner)
		default:
			orig = signedPacket(t, k, a, 0, inner, rng.IntN(4) == 0)
		}
		f := bytes.Clone(orig)
		for m := rng.IntN(3); m > 0; m-- {
			switch rng.IntN(3) {
			case 0:
				f[rng.IntN(min(len(f), 14+28+16+8+20+8))] ^= byte(1 + rng.IntN(255))
			case 1:
				f = f[:14+rng.IntN(len(f)-13)]
			case 2:
				f = append(f, make([]byte, rng.IntN(20))...)
			}
		}
		ret, out := run(t, d.rcv.PlaitReceiver, f)
		if ret != xdpPass || bytes.Equal(out, f) {
			continue // dropped, or no longer a Plait frame at all: passed untouched
		}
		passed++
		// What passed was signed with k and reaches the stack as the signed inner packet.
		cover := 14 + 28 + wire.HeaderLen + wire.TagLen
		if !bytes.Equal(f[14+28:cover+wire.TagCover], orig[14+28:cover+wire.TagCover]) {
			t.Fatalf("frame %d passed with a header, tag or covered bytes the key holder did not sign\n% x\n% x", i, f, orig)
		}
		if bytes.Equal(f, orig) {
			intact++
		}
		if out[14+9] != pkt.ProtoTCP && !bytes.Equal(out[14:14+wire.TagCover], inner[:wire.TagCover]) {
			t.Fatalf("frame %d: inner packet handed on is not the one signed\n% x\n% x\n% x", i, f, out, inner)
		}
	}
	rx, err := d.ReadReceiver(rxSlot, 1)
	if err != nil {
		t.Fatal(err)
	}
	var pkts uint64
	for _, p := range rx.Paths {
		pkts += p.Packets
	}
	if pkts != passed || passed == 0 {
		t.Errorf("%d frames passed, the receiver measured %d", passed, pkts)
	}
	t.Logf("%d frames: %d passed (%d unmodified, the rest modified only outside the tag's cover)", n, passed, intact)
}
