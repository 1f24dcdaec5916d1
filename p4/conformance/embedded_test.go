package p4_test

import (
	"context"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// embedded is the Go switch with memory ports, served over gRPC on loopback.
type embedded struct {
	ports map[int]*p4switch.MemPort
	c     p4v1.P4RuntimeClient
	pins  chan *p4v1.PacketIn
}

func newEmbedded(t *testing.T) *embedded {
	t.Helper()
	e := &embedded{ports: map[int]*p4switch.MemPort{}, pins: make(chan *p4v1.PacketIn, 16)}
	ports, opts := p4test.MemPorts(4)
	for i, mp := range ports {
		e.ports[int(i)] = mp
	}
	_, addr := p4test.Serve(t, opts...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		conn.Close()
	})
	e.c = p4v1.NewP4RuntimeClient(conn)
	arbitrate(t, ctx, e.c, e.pins)
	return e
}

// arbitrate becomes primary (election id 1) and forwards PacketIns to pins.
func arbitrate(t *testing.T, ctx context.Context, c p4v1.P4RuntimeClient, pins chan<- *p4v1.PacketIn) {
	t.Helper()
	st, err := c.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1},
	}}}); err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil || m.GetArbitration().GetStatus().GetCode() != 0 {
		t.Fatalf("arbitration: %v %v", m, err)
	}
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			if p := m.GetPacket(); p != nil {
				pins <- p
			}
		}
	}()
}

func (e *embedded) name() string                  { return "embedded" }
func (e *embedded) info() *p4info.Info            { return p4info.Default() }
func (e *embedded) client() p4v1.P4RuntimeClient  { return e.c }
func (e *embedded) inject(port int, frame []byte) { e.ports[port].Inject(frame) }

func (e *embedded) collect() (map[int][][]byte, []*p4v1.PacketIn) {
	outs := map[int][][]byte{}
	var pins []*p4v1.PacketIn
	for {
		got := false
		for n, p := range e.ports {
			select {
			case f := <-p.Output():
				outs[n] = append(outs[n], f)
				got = true
			default:
			}
		}
		select {
		case p := <-e.pins:
			pins = append(pins, p)
			got = true
		default:
		}
		if !got {
			time.Sleep(quiet)
			if len(outs)+len(pins) > 0 || !e.pending() {
				return outs, pins
			}
		}
	}
}

// pending reports whether anything is still waiting to be collected.
func (e *embedded) pending() bool {
	for _, p := range e.ports {
		if len(p.Output()) > 0 {
			return true
		}
	}
	return len(e.pins) > 0
}
