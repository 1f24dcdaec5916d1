// Package pkt builds the Ethernet/IPv4/TCP/UDP packets tests feed to the datapath and the
// switch, with correct lengths and checksums unless a test breaks them on purpose.
package pkt

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/plait/plait/wire"
)

const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86dd
	ProtoTCP      = 6
	ProtoUDP      = 17
	ProtoICMP     = 1
)

// MAC parses a MAC address or panics; for test fixtures.
func MAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// Ethernet returns an Ethernet frame around payload.
func Ethernet(dst, src net.HardwareAddr, etherType uint16, payload []byte) []byte {
	b := make([]byte, 0, 14+len(payload))
	b = append(append(b, dst...), src...)
	b = binary.BigEndian.AppendUint16(b, etherType)
	return append(b, payload...)
}

// IPv4 returns an IPv4 packet (no options, TTL 64, DF) around payload.
func IPv4(src, dst netip.Addr, proto uint8, id uint16, payload []byte) []byte {
	b := make([]byte, 20, 20+len(payload))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(20+len(payload)))
	binary.BigEndian.PutUint16(b[4:], id)
	b[6] = 0x40
	b[8] = 64
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	binary.BigEndian.PutUint16(b[10:], wire.Checksum(b[:20]))
	return append(b, payload...)
}

func pseudoSum(src, dst netip.Addr, proto uint8, l4 []byte) uint16 {
	s, d := src.As4(), dst.As4()
	ph := append(append(append([]byte{}, s[:]...), d[:]...), 0, proto)
	ph = binary.BigEndian.AppendUint16(ph, uint16(len(l4)))
	return wire.Checksum(append(ph, l4...))
}

// TCP returns a TCP segment (ACK|PSH) with a valid checksum for the given addresses.
func TCP(src, dst netip.Addr, sport, dport uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint32(b[4:], seq)
	b[12] = 5 << 4
	b[13] = 0x18
	binary.BigEndian.PutUint16(b[14:], 65535)
	b = append(b, payload...)
	binary.BigEndian.PutUint16(b[16:], pseudoSum(src, dst, ProtoTCP, b))
	return b
}

// UDP returns a UDP datagram with a valid checksum for the given addresses.
func UDP(src, dst netip.Addr, sport, dport uint16, payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:], sport)
	binary.BigEndian.PutUint16(b[2:], dport)
	binary.BigEndian.PutUint16(b[4:], uint16(8+len(payload)))
	b = append(b, payload...)
	binary.BigEndian.PutUint16(b[6:], pseudoSum(src, dst, ProtoUDP, b))
	return b
}

// TCPPacket is an Ethernet frame carrying IPv4/TCP with n payload bytes, the common case.
func TCPPacket(dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, seq uint32, n int) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(seq + uint32(i))
	}
	return Ethernet(dstMAC, srcMAC, EtherTypeIPv4, IPv4(src, dst, ProtoTCP, uint16(seq), TCP(src, dst, 40000, 5201, seq, payload)))
}
