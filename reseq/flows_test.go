package reseq

import (
	"math"
	"testing"

	"github.com/plait/plait/wire"
)

// tcpFrame is an Ethernet frame of a TCP segment with payload from sport to port 5201.
func tcpFrame(sport uint16) []byte {
	f := make([]byte, 14+20+20+1000)
	ip := f[14:]
	ip[0], ip[9] = 0x45, 6
	n := 20 + 20 + 1000
	ip[2], ip[3] = byte(n>>8), byte(n)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	tcp := ip[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = byte(sport>>8), byte(sport), 5201>>8, 5201&0xff
	tcp[12], tcp[13] = 5<<4, 0x18
	return f
}

// udpFrame is an Ethernet frame of a UDP datagram to the tunnel's port: an agent's
// liveness report or repair request.
func udpFrame() []byte {
	f := make([]byte, 14+20+8+70)
	ip := f[14:]
	ip[0], ip[9] = 0x45, 17
	copy(ip[12:], []byte{10, 99, 0, 1, 10, 99, 0, 2})
	ip[20], ip[21], ip[22], ip[23] = wire.Port>>8, wire.Port&0xff, wire.Port>>8, wire.Port&0xff
	return f
}

// Three equal bulk flows count three; a control connection beside them adds nearly
// nothing; pure ACKs (the reverse flows' clock) and the agents' own messages are not
// flows; an idle second counts none.
func TestFlowsCountsEffectiveFlows(t *testing.T) {
	b := New(50e6, func([]byte) {})
	b.flows.port = wire.Port
	seq := uint32(0)
	push := func(f []byte, at int64) { seq++; b.Push(f, seq, 0, at) }
	ack := tcpFrame(9)[:14+40]
	ack[14+3], ack[14+33] = 40, 0x10
	for k := range int64(3000) {
		at := 1e9 + k*300e3 // one second of it
		push(tcpFrame(40000+uint16(k%3)), at)
		if k%300 == 0 {
			push(tcpFrame(39999), at) // iperf3's control connection
		}
		push(ack, at)
		if k%3 == 0 {
			push(udpFrame(), at)
		}
		b.Expire(at)
	}
	push(tcpFrame(40000), 2e9+1)
	if got := b.Flows(); math.Abs(got-3) > 0.1 {
		t.Fatalf("flows %.2f, want 3 bulk flows", got)
	}
	push(tcpFrame(40000), 5e9)
	if got := b.Flows(); got != 0 {
		t.Fatalf("flows %.2f after an idle second, want 0", got)
	}
}
