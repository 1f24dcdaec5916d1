package reseq

import (
	"encoding/binary"
	"math"
	"sync/atomic"
)

// flowEpoch is how long the flows are counted over before the count is read: long
// enough for a flow held back by its window to send, short enough to follow flows that
// come and go.
const flowEpoch = int64(1e9)

// flowSlots bounds the flows told apart in an epoch; more are not counted.
const flowSlots = 64

// flows counts the tunnel's data flows: each random loss cuts only the window of the flow
// it strikes, so n flows under random loss carry n windows, and the controller's model
// needs n. It is the effective number (Σc)²/Σc² over the flows' packet counts c: n
// equal flows count n, and a control connection beside one bulk flow counts nearly
// nothing.
type flows struct {
	port  uint16 // the tunnel's UDP port, which the agents' own messages go to (0: none)
	start int64  // the epoch's first packet, ns
	key   [flowSlots]uint32
	n     [flowSlots]uint32
	last  atomic.Uint64 // the last whole epoch's count, math.Float64bits
}

// add counts a data packet (Ethernet, IPv4; g: its seg) at now.
func (f *flows) add(frame []byte, g seg, now int64) {
	if now-f.start >= flowEpoch {
		f.roll(now)
	}
	k, ok := g.key, g.ok
	if !ok {
		if k, ok = flowKey(frame, f.port); !ok {
			return
		}
	}
	for i := range flowSlots {
		j := (int(k) + i) % flowSlots
		if f.n[j] == 0 {
			f.key[j], f.n[j] = k, 1
			return
		}
		if f.key[j] == k {
			f.n[j]++
			return
		}
	}
}

// roll ends the epoch: a tunnel idle for a whole epoch had no flows in it.
func (f *flows) roll(now int64) {
	var sum, sq float64
	for i, c := range f.n {
		sum += float64(c)
		sq += float64(c) * float64(c)
		f.n[i] = 0
	}
	eff := 0.0
	if sq > 0 && now-f.start < 2*flowEpoch {
		eff = sum * sum / sq
	}
	f.last.Store(math.Float64bits(eff))
	f.start = now
}

// Flows is the effective number of data flows over the last whole epoch (0: none).
func (b *Buffer) Flows() float64 { return math.Float64frombits(b.flows.last.Load()) }

// flowKey hashes an IPv4 frame's addresses, protocol and, for TCP and UDP, ports. The
// agents' own messages (liveness reports, repair requests: UDP to own, the tunnel's
// port) are no flow: on K1 their few a second beside one flow of 85 packets a second
// counted 1.1-1.7 flows.
func flowKey(f []byte, own uint16) (uint32, bool) {
	const eth = 14
	if len(f) < eth+20 || f[eth]>>4 != 4 {
		return 0, false
	}
	ihl := int(f[eth]&0x0f) * 4
	p := f[eth+9]
	var ports uint32
	if (p == 6 || p == 17) && len(f) >= eth+ihl+4 {
		ports = binary.BigEndian.Uint32(f[eth+ihl:])
		if p == 17 && own != 0 && uint16(ports) == own {
			return 0, false
		}
	}
	// Two multiplicative hashes (golden-ratio and xxHash primes) folded: words, not bytes.
	addrs, rest := binary.BigEndian.Uint64(f[eth+12:]), uint64(ports)<<8|uint64(p)
	h := addrs*0x9E3779B97F4A7C15 ^ rest*0xC2B2AE3D27D4EB4F
	return uint32(h>>32 ^ h), true
}
