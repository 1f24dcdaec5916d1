package p4switch_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/p4/p4switch"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// rig is a switch with memory ports 1..n served over gRPC on a loopback socket.
type rig struct {
	sw     *p4switch.Switch
	ports  map[uint16]*p4switch.MemPort
	conn   *grpc.ClientConn
	client p4v1.P4RuntimeClient
	info   *p4info.Info
	addr   string
}

func newRig(t testing.TB, n int, opts ...p4switch.Option) *rig {
	t.Helper()
	ports, portOpts := p4test.MemPorts(n)
	r := newRigWith(t, append(opts, portOpts...)...)
	r.ports = ports
	return r
}

// newRigWith serves a switch built from opts over gRPC on a loopback socket.
func newRigWith(t testing.TB, opts ...p4switch.Option) *rig {
	t.Helper()
	r := &rig{ports: map[uint16]*p4switch.MemPort{}, info: p4info.Default()}
	r.sw, r.addr = p4test.Serve(t, opts...)
	conn, err := grpc.NewClient(r.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.conn, r.client = conn, p4v1.NewP4RuntimeClient(conn)
	t.Cleanup(func() { conn.Close() })
	return r
}

// stream opens a StreamChannel and arbitrates with election id eid; it returns the
// stream and the first arbitration reply.
func (r *rig) stream(t testing.TB, eid uint64) (p4v1.P4Runtime_StreamChannelClient, *p4v1.MasterArbitrationUpdate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := r.client.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: eid},
	}}}); err != nil {
		t.Fatal(err)
	}
	return st, recvArbitration(t, st)
}

func recvArbitration(t testing.TB, st p4v1.P4Runtime_StreamChannelClient) *p4v1.MasterArbitrationUpdate {
	t.Helper()
	for {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if a := m.GetArbitration(); a != nil {
			return a
		}
	}
}

func (r *rig) write(eid uint64, typ p4v1.Update_Type, ents ...*p4v1.Entity) error {
	req := &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: eid}}
	for _, e := range ents {
		req.Updates = append(req.Updates, &p4v1.Update{Type: typ, Entity: e})
	}
	_, err := r.client.Write(context.Background(), req)
	return err
}

func tableEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

func (r *rig) entry(t testing.TB, table string, m []p4info.Match, action string, params ...p4info.Param) *p4v1.Entity {
	t.Helper()
	te, err := r.info.TableEntry(table, m, action, params...)
	if err != nil {
		t.Fatal(err)
	}
	return tableEntity(te)
}

func (r *rig) read(t testing.TB, ents ...*p4v1.Entity) ([]*p4v1.Entity, error) {
	t.Helper()
	st, err := r.client.Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1, Entities: ents})
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for {
		resp, err := st.Recv()
		if err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return out, err
		}
		out = append(out, resp.GetEntities()...)
	}
}

// recvFrame waits for one frame on port p.
func (r *rig) recvFrame(t testing.TB, p uint16) []byte {
	t.Helper()
	select {
	case f := <-r.ports[p].Output():
		return f
	case <-time.After(2 * time.Second):
		t.Fatalf("no frame on port %d", p)
		return nil
	}
}

// noFrame checks that no frame appears on any port for a while.
func (r *rig) noFrame(t testing.TB) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	for n, p := range r.ports {
		select {
		case f := <-p.Output():
			t.Errorf("unexpected frame on port %d: %x", n, f)
		default:
		}
	}
}

// inNS runs f on a thread inside ns and then moves the thread back. nstest.NS.Do leaves
// the thread in the namespace until it exits, and when that thread is the process's main
// thread, the namespace keeps the test process as a member and nstest's cleanup kills it.
func inNS(t testing.TB, ns *nstest.NS, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := netns.GetFromPath(ns.Path())
		if err != nil {
			errc <- err
			return
		}
		defer target.Close()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			errc <- fmt.Errorf("return to the original namespace: %w", err) // thread stays locked and dies
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	if err := <-errc; err != nil {
		t.Fatalf("in %s: %v", ns.Name, err)
	}
}
