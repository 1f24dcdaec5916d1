package p4switch

import (
	"errors"
	"sync"
)

// MemPort is a port that exchanges frames with Go code instead of an interface: tests
// and conformance vectors drive the whole switch through it.
type MemPort struct {
	name   string
	in     chan []byte
	out    chan []byte
	once   sync.Once
	closed chan struct{}
}

// NewMemPort returns a port whose received frames come from Inject and whose sent
// frames appear on Output.
func NewMemPort(name string) *MemPort {
	return &MemPort{name: name, in: make(chan []byte, 1024), out: make(chan []byte, 4096), closed: make(chan struct{})}
}

// Inject delivers a frame to the switch as if received on the port.
func (m *MemPort) Inject(frame []byte) { m.in <- append([]byte(nil), frame...) }

// Output carries the frames the switch sends on the port.
func (m *MemPort) Output() <-chan []byte { return m.out }

func (m *MemPort) Name() string  { return m.name }
func (m *MemPort) maxFrame() int { return 9216 }

func (m *MemPort) Close() error {
	m.once.Do(func() { close(m.closed) })
	return nil
}

var errClosed = errors.New("port closed")

func (m *MemPort) recv(pkts []*packet) (int, error) {
	var f []byte
	select {
	case f = <-m.in:
	case <-m.closed:
		return 0, errClosed
	}
	n := 0
	for {
		pk := pkts[n]
		if len(f) > len(pk.buf)-headroom {
			pk.end = -1
		} else {
			pk.off, pk.end = headroom, headroom+copy(pk.buf[headroom:], f)
		}
		n++
		if n == len(pkts) {
			return n, nil
		}
		select {
		case f = <-m.in:
		default:
			return n, nil
		}
	}
}

func (m *MemPort) send(pkts []*packet) (int, error) {
	for _, pk := range pkts {
		select {
		case m.out <- append([]byte(nil), pk.frame()...):
		case <-m.closed:
			return 0, errClosed
		}
	}
	return 0, nil
}
