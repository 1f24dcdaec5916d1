package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dchest/siphash"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := Header{Version: Version, Flags: FlagTelemetry, PathID: 3, TunnelID: 0x0102,
		Seq: 0x03040506, PathSeq: 0x0708090a, TxNs: 0x0b0c0d0e}
	b := AppendHeader(nil, h)
	want := []byte{0x12, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendHeader = % x, want % x", b, want)
	}
	got, err := ParseHeader(b)
	if err != nil || got != h {
		t.Fatalf("ParseHeader = %+v, %v; want %+v", got, err, h)
	}
	if _, err := ParseHeader(b[:HeaderLen-1]); err == nil {
		t.Fatal("ParseHeader accepted a truncated header")
	}
	b[0] = 0x22
	if _, err := ParseHeader(b); err == nil {
		t.Fatal("ParseHeader accepted version 2")
	}
}

func TestTelemetryRoundTrip(t *testing.T) {
	tel := Telemetry{QueueUs: 70000, MaxQdepth: 513, Hops: 2, Reserved: 5}
	b := AppendTelemetry(nil, tel)
	if len(b) != TelemetryLen {
		t.Fatalf("telemetry is %d bytes, want %d", len(b), TelemetryLen)
	}
	got, err := ParseTelemetry(b)
	if err != nil || got != tel {
		t.Fatalf("ParseTelemetry = %+v, %v; want %+v", got, err, tel)
	}
}

// The layout table is what the C and P4 definitions are checked against, so it must itself
// describe a contiguous structure of the advertised size.
func TestLayoutIsContiguous(t *testing.T) {
	for name, size := range map[string]int{"plait_hdr": HeaderLen, "plait_tel": TelemetryLen} {
		off := 0
		for _, f := range Layout[name] {
			if f.BitOff != off {
				t.Errorf("%s.%s at bit %d, want %d", name, f.Name, f.BitOff, off)
			}
			off += f.Bits
		}
		if off != size*8 {
			t.Errorf("%s is %d bits, want %d", name, off, size*8)
		}
	}
}

// The SipHash-2-4 the tag uses is the paper's: its test vector (key 00..0f, message
// 00..0e) from Aumasson and Bernstein's appendix A.
func TestTagSipHashVector(t *testing.T) {
	var k Key
	for i := range k {
		k[i] = byte(i)
	}
	msg := make([]byte, 15)
	for i := range msg {
		msg[i] = byte(i)
	}
	k0, k1 := binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:])
	if got := siphash.Hash(k0, k1, msg); got != 0xa129ca6149be45e5 {
		t.Fatalf("SipHash-2-4 of the paper's vector: %#x, want 0xa129ca6149be45e5", got)
	}
	// Tag is that function of the header and the bytes it covers.
	hdr, cover := msg[:HeaderLen-1], make([]byte, TagCover)
	hdr = append(hdr, 0xff)
	tag, err := Tag(&k, hdr, cover)
	if want := siphash.Hash(k0, k1, append(append([]byte{}, hdr...), cover...)); err != nil || tag != want {
		t.Fatalf("Tag %#x (%v), want %#x", tag, err, want)
	}
	if _, err := Tag(&k, hdr, cover[:TagCover-1]); err == nil {
		t.Fatal("Tag of a packet too short to cover: no error")
	}
}
