// Package wire is the Go definition of the Plait wire format: the 16-byte header every
// striped packet carries from sender to receiver, the optional telemetry block, and the
// plain, compact, UDP and IP encapsulations. The C (ebpf/include/plait.h) and P4
// (p4/include/headers.p4) definitions must agree with Layout; tests/wireformat checks
// it. Docs: docs/wire-format.md.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

const (
	Version = 1
	// Port is the default UDP port of Plait traffic (both source and destination).
	Port = 7733
	// IPProto is the IPv4 protocol of IP-encapsulated Plait packets: RFC 3692's value
	// for experimentation.
	IPProto = 253
	// MaxPaths bounds the paths of one tunnel; path IDs are 0..MaxPaths-1.
	MaxPaths = 8

	HeaderLen    = 16
	TelemetryLen = 8
	// EncapLen is what a sender adds in front of the inner IPv4 packet without telemetry.
	EncapLen = 20 + 8 + HeaderLen
	// CompactLen is what a compact packet adds after its own (rewritten) IPv4 header.
	CompactLen = 8 + HeaderLen
	// IPEncapLen and IPCompactLen are the same under IP encapsulation: no UDP header.
	IPEncapLen   = 20 + HeaderLen
	IPCompactLen = HeaderLen
)

// Overhead is what a tunnel adds to a packet, telemetry aside: EncapLen, CompactLen,
// IPEncapLen or IPCompactLen.
func Overhead(ipEncap, compact bool) int {
	switch {
	case ipEncap && compact:
		return IPCompactLen
	case ipEncap:
		return IPEncapLen
	case compact:
		return CompactLen
	}
	return EncapLen
}

// OuterProto is the protocol of the outer IPv4 header: UDP, or IPProto under IP
// encapsulation.
func OuterProto(ipEncap bool) byte {
	if ipEncap {
		return IPProto
	}
	return 17
}

// Flags, in the low nibble of the first byte.
const (
	FlagProbe     = 0x1 // measurement probe: no inner packet follows
	FlagTelemetry = 0x2 // a Telemetry block follows the header
	FlagCompact   = 0x4 // a TCP segment follows; its IPv4 header is the outer one
)

// PathRepair is the top bit of the path id: the packet is a repair, the sender's copy of
// a packet lost on its path, resent on the path the low bits name with its original seq
// and path_seq. Path ids are below MaxPaths, and the flags nibble is full.
const PathRepair = 0x80

// Field describes one field of a wire structure; Layout lists them in wire order so the
// C and P4 definitions can be checked against the same table. All fields are big-endian.
type Field struct {
	Name   string
	BitOff int // bits from the start of the structure
	Bits   int
}

// Layout is the field layout of Header and Telemetry, by structure name (as in plait.h).
// C cannot name a nibble portably, so plait.h packs version and flags into ver_flags.
var Layout = map[string][]Field{
	"plait_hdr": {
		{"version", 0, 4},
		{"flags", 4, 4},
		{"path_id", 8, 8},
		{"tunnel_id", 16, 16},
		{"seq", 32, 32},
		{"path_seq", 64, 32},
		{"tx_ns", 96, 32},
	},
	"plait_tel": {
		{"queue_us", 0, 32},
		{"max_qdepth", 32, 16},
		{"hops", 48, 8},
		{"reserved", 56, 8},
	},
}

// Header is the fixed Plait header. All multi-byte fields are big-endian on the wire.
type Header struct {
	Version  uint8
	Flags    uint8
	PathID   uint8
	TunnelID uint16
	Seq      uint32
	PathSeq  uint32
	TxNs     uint32 // low 32 bits of the sender's monotonic clock, ns
}

// Telemetry is the optional block switches stamp on the way.
type Telemetry struct {
	QueueUs   uint32
	MaxQdepth uint16
	Hops      uint8
	Reserved  uint8 // 0 from senders; a switch passes on what it received, as P4 does
}

var ErrShort = errors.New("wire: packet too short for a Plait header")

// AppendHeader appends h in wire order.
func AppendHeader(b []byte, h Header) []byte {
	b = append(b, h.Version<<4|h.Flags&0x0f, h.PathID)
	b = binary.BigEndian.AppendUint16(b, h.TunnelID)
	b = binary.BigEndian.AppendUint32(b, h.Seq)
	b = binary.BigEndian.AppendUint32(b, h.PathSeq)
	return binary.BigEndian.AppendUint32(b, h.TxNs)
}

// ParseHeader reads a header from the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, ErrShort
	}
	h := Header{
		Version:  b[0] >> 4,
		Flags:    b[0] & 0x0f,
		PathID:   b[1],
		TunnelID: binary.BigEndian.Uint16(b[2:]),
		Seq:      binary.BigEndian.Uint32(b[4:]),
		PathSeq:  binary.BigEndian.Uint32(b[8:]),
		TxNs:     binary.BigEndian.Uint32(b[12:]),
	}
	if h.Version != Version {
		return h, fmt.Errorf("wire: version %d, want %d", h.Version, Version)
	}
	return h, nil
}

// AppendTelemetry appends t in wire order.
func AppendTelemetry(b []byte, t Telemetry) []byte {
	b = binary.BigEndian.AppendUint32(b, t.QueueUs)
	b = binary.BigEndian.AppendUint16(b, t.MaxQdepth)
	return append(b, t.Hops, t.Reserved)
}

// ParseTelemetry reads a telemetry block from the start of b.
func ParseTelemetry(b []byte) (Telemetry, error) {
	if len(b) < TelemetryLen {
		return Telemetry{}, errors.New("wire: packet too short for a telemetry block")
	}
	return Telemetry{
		QueueUs:   binary.BigEndian.Uint32(b),
		MaxQdepth: binary.BigEndian.Uint16(b[4:]),
		Hops:      b[6],
		Reserved:  b[7],
	}, nil
}
