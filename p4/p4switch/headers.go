package p4switch

import (
	"encoding/binary"

	"github.com/plait/plait/wire"
)

// The header instances of plait.p4's headers_t, in deparser order.
const (
	hPacketIn = 1 << iota
	hPacketOut
	hEthernet
	hIPv4
	hUDP
	hPlait
	hPlaitTel
	hInnerIPv4
)

const (
	etherTypeIPv4 = 0x0800
	ipProtoUDP    = 17
	plaitUDPPort  = wire.Port
	ipProtoPlait  = wire.IPProto
	plaitVersion  = wire.Version

	lenCtrlHdr = 2
	lenEth     = 14
	lenIPv4    = 20
	lenUDP     = 8
	lenPlait   = wire.HeaderLen
	lenTel     = wire.TelemetryLen
	// encapLen is what path_encap adds in front of the packet's IPv4 header.
	encapLen = lenIPv4 + lenUDP + lenPlait + lenTel
)

type ethernetHdr struct {
	dst, src  [6]byte
	etherType uint16
}

type ipv4Hdr struct {
	version, ihl, diffserv uint8
	totalLen, id           uint16
	flags                  uint8
	fragOffset             uint16
	ttl, protocol          uint8
	checksum               uint16
	src, dst               uint32
}

type udpHdr struct{ srcPort, dstPort, length, checksum uint16 }

// headers is the parsed representation (P4's hdr) of one packet.
type headers struct {
	valid      uint16
	packetIn   uint16 // ingress_port; _pad is always written as 0
	packetOut  uint16 // egress_port
	packetOutP uint8  // _pad as received
	eth        ethernetHdr
	ipv4       ipv4Hdr
	udp        udpHdr
	plait      wire.Header
	tel        wire.Telemetry
	inner      ipv4Hdr
}

func (h *headers) has(m uint16) bool { return h.valid&m != 0 }

// parse runs plait.p4's parser over frame and returns the offset of the payload: the
// first byte no header holds. Like BMv2 on a parser error (a header that does not fit),
// it stops there and keeps what it extracted.
func parse(frame []byte, ingressPort, cpuPort uint16, h *headers) int {
	*h = headers{}
	off := 0
	if ingressPort == cpuPort {
		if len(frame) < lenCtrlHdr {
			return off
		}
		h.packetOut = uint16(frame[0])<<1 | uint16(frame[1]>>7)
		h.packetOutP = frame[1] & 0x7f
		h.valid |= hPacketOut
		off += lenCtrlHdr
	}
	if len(frame)-off < lenEth {
		return off
	}
	b := frame[off:]
	copy(h.eth.dst[:], b[0:6])
	copy(h.eth.src[:], b[6:12])
	h.eth.etherType = binary.BigEndian.Uint16(b[12:])
	h.valid |= hEthernet
	off += lenEth
	if h.eth.etherType != etherTypeIPv4 || len(frame)-off < lenIPv4 {
		return off
	}
	readIPv4(frame[off:], &h.ipv4)
	h.valid |= hIPv4
	off += lenIPv4
	if h.ipv4.ihl != 5 || h.ipv4.fragOffset != 0 {
		return off
	}
	switch h.ipv4.protocol {
	case ipProtoUDP:
		if len(frame)-off < lenUDP || binary.BigEndian.Uint16(frame[off+2:]) != plaitUDPPort {
			return off
		}
		b = frame[off:]
		h.udp = udpHdr{binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:]), binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:])}
		h.valid |= hUDP
		off += lenUDP
	case ipProtoPlait: // the Plait header follows the IPv4 header directly
	default:
		return off
	}
	if len(frame)-off < lenPlait {
		return off
	}
	// plait.p4's parser takes any version, as the switch must forward what it does not
	// know: ParseHeader's version error is not a parse error here.
	h.plait, _ = wire.ParseHeader(frame[off:])
	h.valid |= hPlait
	off += lenPlait
	if h.plait.Flags&wire.FlagTelemetry != 0 {
		if len(frame)-off < lenTel {
			return off
		}
		h.tel, _ = wire.ParseTelemetry(frame[off:])
		h.valid |= hPlaitTel
		off += lenTel
	}
	// Probes end here; compact packets go on with a TCP segment, not an IPv4 header.
	if h.plait.Flags&(wire.FlagProbe|wire.FlagCompact) != 0 || len(frame)-off < lenIPv4 {
		return off
	}
	readIPv4(frame[off:], &h.inner)
	h.valid |= hInnerIPv4
	return off + lenIPv4
}

func readIPv4(b []byte, ip *ipv4Hdr) {
	*ip = ipv4Hdr{
		version: b[0] >> 4, ihl: b[0] & 0xf, diffserv: b[1],
		totalLen: binary.BigEndian.Uint16(b[2:]), id: binary.BigEndian.Uint16(b[4:]),
		flags: b[6] >> 5, fragOffset: binary.BigEndian.Uint16(b[6:]) & 0x1fff,
		ttl: b[8], protocol: b[9], checksum: binary.BigEndian.Uint16(b[10:]),
		src: binary.BigEndian.Uint32(b[12:]), dst: binary.BigEndian.Uint32(b[16:]),
	}
}

func writeIPv4(b []byte, ip *ipv4Hdr) {
	b[0] = ip.version<<4 | ip.ihl&0xf
	b[1] = ip.diffserv
	binary.BigEndian.PutUint16(b[2:], ip.totalLen)
	binary.BigEndian.PutUint16(b[4:], ip.id)
	binary.BigEndian.PutUint16(b[6:], uint16(ip.flags&7)<<13|ip.fragOffset&0x1fff)
	b[8] = ip.ttl
	b[9] = ip.protocol
	binary.BigEndian.PutUint16(b[10:], ip.checksum)
	binary.BigEndian.PutUint32(b[12:], ip.src)
	binary.BigEndian.PutUint32(b[16:], ip.dst)
}

// headerLen is the number of bytes the deparser emits for the valid headers.
func (h *headers) headerLen() int {
	n := 0
	for _, x := range [...]struct {
		m uint16
		n int
	}{{hPacketIn, lenCtrlHdr}, {hPacketOut, lenCtrlHdr}, {hEthernet, lenEth}, {hIPv4, lenIPv4}, {hUDP, lenUDP}, {hPlait, lenPlait}, {hPlaitTel, lenTel}, {hInnerIPv4, lenIPv4}} {
		if h.valid&x.m != 0 {
			n += x.n
		}
	}
	return n
}

// deparse writes the valid headers, in plait.p4's emit order, into b, which must be
// headerLen() long. The IPv4 checksum is recomputed, as PlaitComputeChecksum does.
func (h *headers) deparse(b []byte) {
	off := 0
	if h.has(hPacketIn) {
		b[0] = byte(h.packetIn >> 1)
		b[1] = byte(h.packetIn&1) << 7
		off += lenCtrlHdr
	}
	if h.has(hPacketOut) {
		b[off] = byte(h.packetOut >> 1)
		b[off+1] = byte(h.packetOut&1)<<7 | h.packetOutP&0x7f
		off += lenCtrlHdr
	}
	if h.has(hEthernet) {
		copy(b[off:], h.eth.dst[:])
		copy(b[off+6:], h.eth.src[:])
		binary.BigEndian.PutUint16(b[off+12:], h.eth.etherType)
		off += lenEth
	}
	if h.has(hIPv4) {
		if h.ipv4.ihl == 5 {
			h.ipv4.checksum = 0
			writeIPv4(b[off:], &h.ipv4)
			h.ipv4.checksum = wire.Checksum(b[off : off+lenIPv4])
		}
		writeIPv4(b[off:], &h.ipv4)
		off += lenIPv4
	}
	if h.has(hUDP) {
		binary.BigEndian.PutUint16(b[off:], h.udp.srcPort)
		binary.BigEndian.PutUint16(b[off+2:], h.udp.dstPort)
		binary.BigEndian.PutUint16(b[off+4:], h.udp.length)
		binary.BigEndian.PutUint16(b[off+6:], h.udp.checksum)
		off += lenUDP
	}
	// Appending to an empty slice of b writes in place: b has room for every header.
	if h.has(hPlait) {
		wire.AppendHeader(b[off:off], h.plait)
		off += lenPlait
	}
	if h.has(hPlaitTel) {
		wire.AppendTelemetry(b[off:off], h.tel)
		off += lenTel
	}
	if h.has(hInnerIPv4) {
		writeIPv4(b[off:], &h.inner)
	}
}
