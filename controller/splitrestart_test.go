package controller_test

import (
	"context"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/labnet"
	"github.com/plait/plait/internal/nstest"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/p4/p4info"
)

// nsDial makes a gRPC connection's sockets in ns, where the address is reachable.
func nsDial(ns *nstest.NS) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return err
		})
		return c, err
	})
}

// liveSlots reads a split switch's live slot table for split index 0 and returns each
// path's share of the slots.
func liveSlots(t *testing.T, lab *labnet.Lab, sw, paths int) []float64 {
	t.Helper()
	conn, err := sockrpc.Dial(lab.SwitchAddr(sw), sockrpc.TLS{}, nsDial(lab.Net))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	info := p4info.Default()
	read := func(table string) []*p4v1.TableEntry {
		tb, err := info.Table(table)
		if err != nil {
			t.Fatal(err)
		}
		st, err := p4v1.NewP4RuntimeClient(conn).Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1,
			Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: tb.GetPreamble().GetId()}}}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []*p4v1.TableEntry
		for {
			r, err := st.Recv()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range r.Entities {
				out = append(out, e.GetTableEntry())
			}
		}
	}
	cls := read("tunnel_split")
	if len(cls) != 1 {
		t.Fatalf("s%d has %d classifier entries, want 1", sw, len(cls))
	}
	var gen uint64
	for _, p := range cls[0].GetAction().GetAction().GetParams() {
		if a, _ := info.Action("split"); a != nil {
			if g, _ := a.Param("gen"); g.GetId() == p.ParamId {
				gen, _ = p4info.Uint(p.Value)
			}
		}
	}
	shares := make([]float64, paths)
	n := 0
	for _, e := range read("split_slots") {
		var g uint64
		for _, m := range e.Match {
			if f, _ := mustTable(t, info, "split_slots").Field("meta.gen"); f.GetId() == m.FieldId {
				g, _ = p4info.Uint(m.GetExact().GetValue())
			}
		}
		if g != gen {
			continue
		}
		path, _ := p4info.Uint(e.GetAction().GetAction().GetParams()[0].Value)
		shares[path]++
		n++
	}
	for i := range shares {
		shares[i] /= float64(n)
	}
	return shares
}

func mustTable(t *testing.T, info *p4info.Info, name string) *p4info.Table {
	tb, err := info.Table(name)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// The split switch restarts mid-flow, empty: the controller programs it again with the
// split it had, within 2 s of the switch being back.
func TestSplitSwitchRestartsMidFlow(t *testing.T) {
	if bin == "" {
		t.Skip("needs root")
	}
	lab := labnet.NewSplit(t, bin, a2, labnet.Options{Telemetry: true})
	stop := lab.StartController("auto", nil)
	defer stop()
	ctl, conn, err := controller.Dial(lab.CtlSock, sockrpc.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	wait := flow(t, lab, 10)
	time.Sleep(4 * time.Second)
	s10 := func(st *pb.StatusResponse) *pb.SwitchStatus {
		for _, s := range st.Switches {
			if s.Name == "s10" {
				return s
			}
		}
		return nil
	}
	split := func() []float64 {
		for _, d := range mustPaths(t, ctl).Directions {
			if strings.HasPrefix(d.From, "h1 ") { // "h1 (split switch s10)"
				return weights(d)
			}
		}
		t.Fatal("no direction from h1")
		return nil
	}
	before := s10(waitStatus(t, ctl, time.Second, "status", func(*pb.StatusResponse) bool { return true }))
	t.Logf("before the restart: live slots %.3f, controller's shares %.3f", liveSlots(t, lab, labnet.SplitSwitch, 3), split())
	down := time.Now()
	lab.Restart("s10")
	back := time.Now()
	st := waitStatus(t, ctl, 2*time.Second, "s10 reprogrammed", func(st *pb.StatusResponse) bool { return s10(st).Programmed > before.Programmed })
	restored := time.Since(back)
	// The controller's split may move while the flow runs, and the switch follows it an
	// interval later: the live slots must match the controller's shares at some read
	// within 2 s of the switch being back, not at one chosen instant.
	match := func(slots, want []float64) bool {
		for i := range want {
			if math.Abs(slots[i]-want[i]) > 2.0/256 {
				return false
			}
		}
		return true
	}
	slots, want := liveSlots(t, lab, labnet.SplitSwitch, 3), split()
	for !match(slots, want) && time.Since(back) < 2*time.Second {
		time.Sleep(20 * time.Millisecond)
		slots, want = liveSlots(t, lab, labnet.SplitSwitch, 3), split()
	}
	t.Logf("s10 down %v, programmed %v after it was back: live slots %.3f, controller's shares %.3f; %d Write RPCs in all",
		back.Sub(down), restored, slots, want, s10(st).WriteRpcs)
	if !match(slots, want) {
		t.Errorf("2 s after it was back, restarted s10 splits %.3f, want the controller's %.3f", slots, want)
	}
	stall := wait(time.Time{})
	t.Logf("longest stall %v", stall)
	if stall > maxStall {
		t.Errorf("the flow stalled for %v", stall)
	}
}
