package controller

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plait/plait/internal/p4test"
	"github.com/plait/plait/p4/p4switch"
)

// liveSwitch is an embedded switch on a loopback address that can be restarted there,
// as a switch process is: it comes back empty.
type liveSwitch struct {
	rig  *splitRig
	g    *grpc.Server
	sw   *p4switch.Switch
	addr string
}

func startSwitch(t testing.TB, addr string, paths int) *liveSwitch {
	t.Helper()
	ports, opts := p4test.MemPorts(paths + 1)
	sw, err := p4switch.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.Start(); err != nil {
		t.Fatal(err)
	}
	var lis net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if lis, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	l := &liveSwitch{rig: &splitRig{ports: map[uint32]*p4switch.MemPort{}, addr: lis.Addr().String()}, g: grpc.NewServer(), sw: sw, addr: lis.Addr().String()}
	for p, mp := range ports {
		l.rig.ports[uint32(p)] = mp
	}
	l.sw.Register(l.g)
	go l.g.Serve(lis)
	t.Cleanup(l.stop)
	return l
}

func (l *liveSwitch) stop() {
	l.g.Stop()
	l.sw.Close()
}

// runConn runs a controller's connection to cfg's switch until stop; it waits until the
// switch is programmed.
func runConn(t testing.TB, cfg *Switch) (sc *switchConn, stop func()) {
	t.Helper()
	if cfg.ElectionID == 0 {
		cfg.ElectionID = 10
	}
	if cfg.OnLost == "" {
		cfg.OnLost = Yield
	}
	cfg.DeviceID = 1
	sc, err := newSwitchConn(cfg, func() {})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { sc.run(ctx, slog.New(slog.DiscardHandler)); close(done) }()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	waitFor(t, 5*time.Second, "switch programmed", func() bool { return sc.ready() }, func() string { return sc.status().LastError })
	return sc, stop
}

func waitFor(t testing.TB, d time.Duration, what string, ok func() bool, why func() string) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > d {
			t.Fatalf("%s: not within %v: %s", what, d, why())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func splitSwitch(addr string) *Switch {
	return &Switch{Name: "s10", Address: addr, Forward: map[uint32]uint32{2: 1, 3: 1}, Splits: []*Split{twoPathSplit()}}
}

// A fresh switch gets the pipeline once and its entries in a few batched Writes; a
// controller that reconnects to a switch that kept its state (here a new controller
// process after the first stopped) pushes no pipeline, deletes nothing and writes
// nothing, and the split the switch carries stays.
func TestReconnectWritesOnlyTheDifference(t *testing.T) {
	ls := startSwitch(t, "127.0.0.1:0", 2)
	sc, stop := runConn(t, splitSwitch(ls.addr))
	st := sc.status()
	t.Logf("fresh switch: %d entries in %d Write RPCs, %d pipeline pushes, %.1f ms", st.Inserts, st.WriteRpcs, st.PipelinePushes, st.LastReconcileMs)
	if st.PipelinePushes != 1 || st.Inserts != uint64(st.Entries) || st.Deletes != 0 || st.WriteRpcs > 3 {
		t.Fatalf("fresh switch: %d pushes, %d inserts of %d entries, %d deletes in %d Write RPCs; want 1 push, every entry inserted in at most 3 RPCs",
			st.PipelinePushes, st.Inserts, st.Entries, st.Deletes, st.WriteRpcs)
	}
	if err := sc.setSplit(context.Background(), sc.cfg.Splits[0], []float64{0.25, 0.75}); err != nil {
		t.Fatal(err)
	}
	stop()
	if got := ls.rig.spread(t, 256); got[2] != 64 || got[3] != 192 {
		t.Fatalf("with the controller gone the split sent %v, want 64 and 192", got)
	}
	sc2, _ := runConn(t, splitSwitch(ls.addr))
	st = sc2.status()
	t.Logf("reconnect: %d Write RPCs, %d pipeline pushes, %d inserts, %d modifies, %d deletes, %.1f ms",
		st.WriteRpcs, st.PipelinePushes, st.Inserts, st.Modifies, st.Deletes, st.LastReconcileMs)
	if st.PipelinePushes != 0 || st.Deletes != 0 || st.Inserts != 0 || st.Modifies != 0 || st.WriteRpcs != 0 {
		t.Fatalf("reconnecting to a switch that kept its state: %d pushes, %d inserts, %d modifies, %d deletes, %d Write RPCs; want none",
			st.PipelinePushes, st.Inserts, st.Modifies, st.Deletes, st.WriteRpcs)
	}
	if got := ls.rig.spread(t, 256); got[2] != 64 || got[3] != 192 {
		t.Fatalf("after the new controller reconciled the split sent %v, want the one the switch kept (64, 192)", got)
	}
	// The adopted split is the controller's: a new one is written to the other generation.
	if err := sc2.setSplit(context.Background(), sc2.cfg.Splits[0], []float64{0.5, 0.5}); err != nil {
		t.Fatal(err)
	}
	if got := ls.rig.spread(t, 256); got[2] != 128 || got[3] != 128 {
		t.Fatalf("new split after adoption sent %v, want 128 each", got)
	}
}

// A split switch that restarts empty gets the controller's current split back, not the
// even one, within 2 s of coming back.
func TestRestartedSplitSwitchGetsItsSplitBack(t *testing.T) {
	ls := startSwitch(t, "127.0.0.1:0", 2)
	sc, _ := runConn(t, splitSwitch(ls.addr))
	if err := sc.setSplit(context.Background(), sc.cfg.Splits[0], []float64{0.25, 0.75}); err != nil {
		t.Fatal(err)
	}
	programmed := sc.status().Programmed
	ls.stop()
	time.Sleep(300 * time.Millisecond) // down for a while: the controller's retries back off
	ls = startSwitch(t, ls.addr, 2)
	took := waitFor(t, 2*time.Second, "split restored", func() bool { return sc.status().Programmed > programmed }, func() string { return sc.status().LastError })
	if got := ls.rig.spread(t, 256); got[2] != 64 || got[3] != 192 {
		t.Fatalf("restarted switch sent %v, want the split it had (64, 192)", got)
	}
	st := sc.status()
	t.Logf("split restored %v after the switch came back; %d Write RPCs in all", took, st.WriteRpcs)
	if st.PipelinePushes != 2 || st.Deletes != 0 {
		t.Fatalf("%d pipeline pushes, %d deletes; want 2 (one per fresh switch) and none", st.PipelinePushes, st.Deletes)
	}
}

// rogue opens a P4Runtime stream with election id eid and returns the arbitration
// updates it receives, and a function that closes it.
func rogue(t *testing.T, addr string, eid uint64) (<-chan *p4v1.MasterArbitrationUpdate, p4v1.P4RuntimeClient, func()) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rt := p4v1.NewP4RuntimeClient(conn)
	st, err := rt.StreamChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: eid}}}}); err != nil {
		t.Fatal(err)
	}
	out := make(chan *p4v1.MasterArbitrationUpdate, 16)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				return
			}
			if a := m.GetArbitration(); a != nil {
				select {
				case out <- a:
				default:
				}
			}
		}
	}()
	closed := false
	done := func() {
		if !closed {
			closed = true
			cancel()
			conn.Close()
		}
	}
	t.Cleanup(done)
	return out, rt, done
}

// A client with a higher election id takes the switch: the controller reports it
// (status, count, the reason writes fail), does not fight under yield, and takes the
// switch back when the other leaves, repairing what the other changed.
func TestRogueTakesPrimaryYield(t *testing.T) {
	ls := startSwitch(t, "127.0.0.1:0", 2)
	sc, _ := runConn(t, splitSwitch(ls.addr))
	_, rrt, leave := rogue(t, ls.addr, 100)
	waitFor(t, time.Second, "loss of primary reported", func() bool { return !sc.status().Primary }, func() string { return sc.status().String() })
	st := sc.status()
	if st.PrimaryLost != 1 || st.PrimaryElectionId != "100" || !strings.Contains(st.LastError, "election id 100 holds it") {
		t.Fatalf("after a rogue took the switch: lost %d, primary %q, error %q; want 1, 100 and a reason naming it", st.PrimaryLost, st.PrimaryElectionId, st.LastError)
	}
	err := sc.setSplit(context.Background(), sc.cfg.Splits[0], []float64{0.25, 0.75})
	if err == nil || !strings.Contains(err.Error(), "not primary") {
		t.Fatalf("write while another client is primary: %v, want a refusal saying why", err)
	}
	// The rogue, as primary, sends every packet to path b.
	slots, err := sc.slotEntries(sc.cfg.Splits[0], 0, []float64{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	req := &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 100}}
	for _, e := range slots {
		req.Updates = append(req.Updates, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}})
	}
	if _, err := rrt.Write(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if sc.status().Primary {
		t.Fatal("under yield the controller took the switch back while the other client is connected")
	}
	leave()
	took := waitFor(t, time.Second, "primary regained", func() bool { return sc.ready() }, func() string { return sc.status().LastError })
	st = sc.status()
	t.Logf("regained %v after the rogue left, election id %d; repair: %d modifies, %d Write RPCs", took, st.ElectionId, st.Modifies, st.WriteRpcs)
	if got := ls.rig.spread(t, 256); got[2] != 128 || got[3] != 128 {
		t.Fatalf("after regaining the switch the split sent %v, want the controller's even split back", got)
	}
	// The even split already had half the slots on b: the rogue changed the other half.
	if st.Modifies != 128 || st.Deletes != 0 || st.PipelinePushes != 1 {
		t.Fatalf("repair took %d modifies, %d deletes, %d pipeline pushes; want the 128 changed slots, no delete, no new push", st.Modifies, st.Deletes, st.PipelinePushes)
	}
}

// Under reclaim the controller takes the switch back at once with a higher election id,
// and from a client that raises its id in turn, once a second.
func TestRogueTakesPrimaryReclaim(t *testing.T) {
	ls := startSwitch(t, "127.0.0.1:0", 2)
	cfg := splitSwitch(ls.addr)
	cfg.OnLost = Reclaim
	sc, _ := runConn(t, cfg)
	updates, _, _ := rogue(t, ls.addr, 100)
	waitFor(t, time.Second, "loss of primary counted", func() bool { return sc.status().PrimaryLost == 1 }, func() string { return sc.status().String() })
	took := waitFor(t, time.Second, "primary reclaimed", func() bool { return sc.ready() }, func() string { return sc.status().LastError })
	if st := sc.status(); st.ElectionId != 101 {
		t.Fatalf("reclaimed with election id %d, want 101", st.ElectionId)
	}
	t.Logf("reclaimed %v after losing the switch", took)
	var last *p4v1.MasterArbitrationUpdate
	waitFor(t, time.Second, "rogue told it is a backup", func() bool {
		for {
			select {
			case last = <-updates:
				continue
			default:
			}
			return last != nil && last.GetElectionId().GetLow() == 101
		}
	}, func() string { return last.String() })
	// A second client that takes the switch again above the controller's 101.
	_, _, leave := rogue(t, ls.addr, 102)
	defer leave()
	start := time.Now()
	waitFor(t, time.Second, "loss counted", func() bool { return sc.status().PrimaryLost == 2 }, func() string { return sc.status().String() })
	waitFor(t, 2*time.Second, "reclaimed again", func() bool { return sc.ready() && sc.status().ElectionId == 103 }, func() string { return sc.status().String() })
	again := time.Since(start)
	t.Logf("reclaimed from the second client %v after it took the switch", again)
	if again < reclaimEvery-100*time.Millisecond {
		t.Errorf("reclaimed again after %v, want no sooner than %v after the first reclaim", again, reclaimEvery)
	}
}
