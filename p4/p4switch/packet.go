package p4switch

import "sync"

// headroom in front of every received frame lets the deparser grow it in place: the
// split's encapsulation adds 52 bytes and a packet_in header 2.
const headroom = 128

// packet is a frame in a buffer with headroom, with its pipeline state and link timing.
type packet struct {
	buf      []byte
	off, end int // frame is buf[off:end]
	payload  int // first byte of buf not held by st.hdr
	st       packetState

	qdepth           uint32
	arrival, deliver int64
	seq              uint64
}

func (pk *packet) frame() []byte { return pk.buf[pk.off:pk.end] }

type packetPool struct {
	size int
	pool sync.Pool
}

func newPacketPool(maxFrame int) *packetPool {
	p := &packetPool{size: headroom + maxFrame}
	p.pool.New = func() any { return &packet{buf: make([]byte, p.size)} }
	return p
}

func (p *packetPool) get() *packet   { return p.pool.Get().(*packet) }
func (p *packetPool) put(pk *packet) { p.pool.Put(pk) }
