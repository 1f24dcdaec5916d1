package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Outer is what a sender or split switch puts in front of the Plait header.
type Outer struct {
	Src, Dst netip.Addr // path endpoints
	Port     uint16     // UDP source and destination port
	IPEncap  bool       // no UDP: the header follows IPv4 of protocol IPProto
	Key      *Key       // when set, the packet carries a tag (FlagAuth) under this key
}

// extra is what the header's options add after it: telemetry and the tag.
func (o Outer) extra(h Header) int {
	n := 0
	if h.Flags&FlagTelemetry != 0 {
		n += TelemetryLen
	}
	if o.Key != nil {
		n += TagLen
	}
	return n
}

// AppendEncap appends a complete Plait packet without its Ethernet header: outer IPv4
// (DF, TTL 64, ID 0) + UDP (checksum 0; none under IP encapsulation) + h + tel (when h
// carries FlagTelemetry) + the tag (when o has a key) + inner.
// It is the reference the datapath's encapsulation is tested against.
func AppendEncap(b []byte, o Outer, h Header, tel Telemetry, inner []byte) ([]byte, error) {
	if !o.Src.Is4() || !o.Dst.Is4() {
		return nil, fmt.Errorf("wire: outer addresses %s -> %s are not IPv4", o.Src, o.Dst)
	}
	n := Overhead(o.IPEncap, false) + o.extra(h) + len(inner)
	if n > 0xffff {
		return nil, fmt.Errorf("wire: %d-byte packet does not fit IPv4", n)
	}
	start := len(b)
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(n))
	b = append(b, 0, 0, 0x40, 0, 64, OuterProto(o.IPEncap), 0, 0)
	src, dst := o.Src.As4(), o.Dst.As4()
	b = append(append(b, src[:]...), dst[:]...)
	binary.BigEndian.PutUint16(b[start+10:], Checksum(b[start:start+20]))
	b, hdr := appendPlait(b, o, n-20, h, tel)
	return finish(append(b, inner...), o, hdr)
}

// finish signs the packet when o has a key.
func finish(b []byte, o Outer, hdr int) ([]byte, error) {
	if o.Key == nil {
		return b, nil
	}
	return b, sign(o.Key, b, hdr)
}

// appendPlait appends the UDP header (checksum 0) for udpLen bytes unless o is IP
// encapsulation, h, tel when h asks for it and room for the tag when o has a key; it
// returns where h starts.
func appendPlait(b []byte, o Outer, udpLen int, h Header, tel Telemetry) ([]byte, int) {
	if !o.IPEncap {
		b = binary.BigEndian.AppendUint16(b, o.Port)
		b = binary.BigEndian.AppendUint16(b, o.Port)
		b = binary.BigEndian.AppendUint16(b, uint16(udpLen))
		b = append(b, 0, 0)
	}
	hdr := len(b)
	if o.Key != nil {
		h.Flags |= FlagAuth
	}
	b = AppendHeader(b, h)
	if h.Flags&FlagTelemetry != 0 {
		b = AppendTelemetry(b, tel)
	}
	if o.Key != nil {
		b = append(b, make([]byte, TagLen)...)
	}
	return b, hdr
}

// Checksum is the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	var sum uint32
	for ; len(b) >= 2; b = b[2:] {
		sum += uint32(binary.BigEndian.Uint16(b))
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// AppendCompact appends the compact form of an IPv4/TCP packet (ip: its header without
// options, then the segment): the same header with the path's addresses, protocol UDP
// (IPProto), the length grown by CompactLen (IPCompactLen) + TelemetryLen and the
// checksum recomputed; then UDP (checksum 0; none under IP encapsulation), h (with
// FlagCompact), tel when h asks for it, the tag when o has a key, and the TCP segment.
func AppendCompact(b []byte, o Outer, h Header, tel Telemetry, packet []byte) ([]byte, error) {
	if len(packet) < 20 || packet[0] != 0x45 || packet[9] != 6 {
		return nil, fmt.Errorf("wire: compact form needs IPv4 without options carrying TCP")
	}
	if !o.Src.Is4() || !o.Dst.Is4() {
		return nil, fmt.Errorf("wire: outer addresses %s -> %s are not IPv4", o.Src, o.Dst)
	}
	h.Flags |= FlagCompact
	n := len(packet) + Overhead(o.IPEncap, true) + o.extra(h)
	if n > 0xffff {
		return nil, fmt.Errorf("wire: %d-byte packet does not fit IPv4", n)
	}
	start := len(b)
	b = append(b, packet[:20]...)
	ip := b[start:]
	binary.BigEndian.PutUint16(ip[2:], uint16(n))
	ip[9] = OuterProto(o.IPEncap)
	src, dst := o.Src.As4(), o.Dst.As4()
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip[:20]))
	b, hdr := appendPlait(b, o, n-20, h, tel)
	return finish(append(b, packet[20:]...), o, hdr)
}
