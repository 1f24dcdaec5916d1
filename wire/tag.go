package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/dchest/siphash"
)

// Per-packet authentication (FlagAuth): a tag of TagLen bytes follows the header and the
// telemetry block. It is SipHash-2-4 under the tunnel's Key over the header and the first
// TagCover bytes after the tag (the inner IPv4 header up to its source address, checksum
// included; a compact packet's TCP header up to its checksum, which a path interface may
// still fill in), stored little-endian. Telemetry is outside it: switches stamp that on the way. The C
// definition is ebpf/include/siphash.h.
const (
	FlagAuth = 0x8
	TagLen   = 8
	TagCover = 16
)

// Key is a tunnel's authentication key.
type Key [16]byte

// Tag is the tag of a packet whose header is hdr and whose bytes after the tag are cover.
func Tag(k *Key, hdr, cover []byte) (uint64, error) {
	if len(hdr) < HeaderLen || len(cover) < TagCover {
		return 0, fmt.Errorf("wire: an authenticated packet needs %d bytes after its tag, has %d", TagCover, len(cover))
	}
	var msg [HeaderLen + TagCover]byte
	copy(msg[copy(msg[:], hdr[:HeaderLen]):], cover[:TagCover])
	return siphash.Hash(binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:]), msg[:]), nil
}

// sign fills the tag of the authenticated Plait packet whose header starts at b[hdr].
func sign(k *Key, b []byte, hdr int) error {
	at := hdr + HeaderLen
	if b[hdr]&FlagTelemetry != 0 {
		at += TelemetryLen
	}
	tag, err := Tag(k, b[hdr:], b[at+TagLen:])
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b[at:], tag)
	return nil
}
