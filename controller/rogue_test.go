package controller_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/p4/p4info"
)

// A client with a certificate from the CA takes switch s1 with a higher election id in
// the middle of a flow and breaks path a (it deletes s1's forwarding from h1): the
// controller reports it (status, the holder's id, the reason writes fail), yields by its
// policy, and takes the switch back when the client leaves, restoring the entry. The
// flow never stalls for a second: the broken path is taken out of the split meanwhile.
func TestRogueTakesPrimaryMidFlow(t *testing.T) {
	lab, ctl, stop := deployed(t)
	defer stop()
	wait := flow(t, lab, 10)
	time.Sleep(3 * time.Second)

	// The rogue dials from the controller's namespace, where the switches are reachable.
	dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := lab.Ctl.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	})
	conn, err := sockrpc.Dial(lab.SwitchAddr(1), lab.TLS("operator"), dial)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := p4v1.NewP4RuntimeClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := rt.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eid := &p4v1.Uint128{Low: 100}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: 1, ElectionId: eid}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(); err != nil || m.GetArbitration().GetStatus().GetCode() != 0 {
		t.Fatalf("rogue did not become primary: %v %v", m, err)
	}
	took := time.Now()
	s1 := func(st *pb.StatusResponse) *pb.SwitchStatus {
		for _, s := range st.Switches {
			if s.Name == "s1" {
				return s
			}
		}
		return nil
	}
	status := waitStatus(t, ctl, time.Second, "loss of s1 reported", func(st *pb.StatusResponse) bool { return !s1(st).Primary })
	if s := s1(status); s.PrimaryLost != 1 || s.PrimaryElectionId != "100" || !strings.Contains(s.LastError, "election id 100 holds it") {
		t.Fatalf("after a rogue took s1: %v; want 1 loss, holder 100 and the reason", s)
	}
	t.Logf("reported %v after the rogue took s1: %s", time.Since(took), s1(status).LastError)
	fwd, err := p4info.Default().TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", 1)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Write(context.Background(), &p4v1.WriteRequest{DeviceId: 1, ElectionId: eid, Updates: []*p4v1.Update{
		{Type: p4v1.Update_DELETE, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: fwd}}}}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if s := s1(waitStatus(t, ctl, time.Second, "status", func(*pb.StatusResponse) bool { return true })); s.Primary {
		t.Fatal("under yield the controller took s1 back while the rogue is connected")
	}
	cancel()
	conn.Close()
	left := time.Now()
	status = waitStatus(t, ctl, time.Second, "s1 taken back", func(st *pb.StatusResponse) bool { return s1(st).Primary })
	s := s1(status)
	t.Logf("took s1 back %v after the rogue left, election id %d; repair: %d inserts", time.Since(left), s.ElectionId, s.Inserts)
	if s.Inserts != 3 { // 2 at the start, 1 restored
		t.Errorf("s1 inserted %d entries in all, want 3: its 2 and the one the rogue deleted", s.Inserts)
	}
	stall := wait(time.Time{})
	t.Logf("longest stall %v", stall)
	if stall > maxStall {
		t.Errorf("the flow stalled for %v", stall)
	}
}
