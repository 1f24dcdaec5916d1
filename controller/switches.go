package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/split"
)

// SplitSlots is the size of plait.p4's slot table (SPLIT_SLOTS).
const SplitSlots = 256

// switchConn keeps one switch programmed: it holds the P4Runtime stream as primary,
// pushes the pipeline and the entries the network file asks for, rewrites split slot
// tables, and starts over whenever the switch or the connection restarts.
type switchConn struct {
	cfg          *Switch
	info         *p4info.Info
	deviceConfig []byte
	kick         func()

	mu         sync.Mutex
	rt         p4v1.P4RuntimeClient // set while primary and programmed
	conn       *grpc.ClientConn
	gen        map[uint32]uint32 // split index -> live slot-table generation
	shares     map[uint32][]float64
	entries    uint32
	programmed uint64
	lastErr    string
	paths      map[string]uint64
}

func newSwitchConn(s *Switch, kick func()) (*switchConn, error) {
	info := p4info.Default()
	if s.P4Info != "" {
		b, err := os.ReadFile(s.P4Info)
		if err != nil {
			return nil, fmt.Errorf("switch %s: %w", s.Name, err)
		}
		if info, err = p4info.Parse(b); err != nil {
			return nil, fmt.Errorf("switch %s: %w", s.Name, err)
		}
	}
	sc := &switchConn{cfg: s, info: info, kick: kick, gen: map[uint32]uint32{}, shares: map[uint32][]float64{}}
	if s.DeviceConfig != "" {
		b, err := os.ReadFile(s.DeviceConfig)
		if err != nil {
			return nil, fmt.Errorf("switch %s: %w", s.Name, err)
		}
		sc.deviceConfig = b
	}
	return sc, nil
}

func (s *switchConn) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rt != nil
}

func (s *switchConn) status() *pb.SwitchStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &pb.SwitchStatus{Name: s.cfg.Name, Address: s.cfg.Address, Connected: s.rt != nil, Primary: s.rt != nil,
		ElectionId: s.cfg.ElectionID, Entries: s.entries, Programmed: s.programmed, LastError: s.lastErr, PathPackets: map[string]uint64{}}
	for k, v := range s.paths {
		st.PathPackets[k] = v
	}
	return st
}

func (s *switchConn) run(ctx context.Context, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.session(ctx)
		s.mu.Lock()
		s.rt = nil
		if s.conn != nil {
			s.conn.Close()
			s.conn = nil
		}
		if err != nil && ctx.Err() == nil {
			if s.lastErr != err.Error() {
				log.Warn("switch", "name", s.cfg.Name, "err", err)
			}
			s.lastErr = err.Error()
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// session is one connection: become primary, program, then watch the stream (and read
// counters) until it breaks.
func (s *switchConn) session(ctx context.Context) error {
	conn, err := grpc.NewClient(s.cfg.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.cfg.Address, err)
	}
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	rt := p4v1.NewP4RuntimeClient(conn)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := rt.StreamChannel(sctx)
	if err != nil {
		return fmt.Errorf("stream to %s: %w", s.cfg.Address, err)
	}
	eid := &p4v1.Uint128{Low: s.cfg.ElectionID}
	if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{
		Arbitration: &p4v1.MasterArbitrationUpdate{DeviceId: s.cfg.DeviceID, ElectionId: eid}}}); err != nil {
		return fmt.Errorf("arbitration: %w", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("arbitration: %w", err)
	}
	arb := resp.GetArbitration()
	if arb == nil {
		return fmt.Errorf("arbitration: switch answered %v", resp)
	}
	if code := codes.Code(arb.GetStatus().GetCode()); code != codes.OK {
		return fmt.Errorf("not primary on %s (election id %d, primary holds %v): %s", s.cfg.Address, s.cfg.ElectionID, arb.GetElectionId(), arb.GetStatus().GetMessage())
	}
	if err := s.program(sctx, rt, eid); err != nil {
		return err
	}
	s.mu.Lock()
	s.rt = rt
	s.programmed++
	s.lastErr = ""
	s.mu.Unlock()
	s.kick()

	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				errc <- err
				return
			}
		}
	}()
	counters := time.NewTicker(time.Second)
	defer counters.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return fmt.Errorf("stream from %s: %w", s.cfg.Address, err)
		case <-counters.C:
			s.readCounters(sctx, rt)
		}
	}
}

// program pushes the pipeline and every entry the network file asks for.
func (s *switchConn) program(ctx context.Context, rt p4v1.P4RuntimeClient, eid *p4v1.Uint128) error {
	_, err := rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
		DeviceId: s.cfg.DeviceID, ElectionId: eid, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
		Config: &p4v1.ForwardingPipelineConfig{P4Info: s.info.P4Info, P4DeviceConfig: s.deviceConfig},
	})
	if err != nil {
		return fmt.Errorf("push pipeline to %s: %w", s.cfg.Name, err)
	}
	var entries []*p4v1.TableEntry
	for in, out := range s.cfg.Forward {
		e, err := s.info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", in)}, "forward", p4info.P("port", out))
		if err != nil {
			return fmt.Errorf("switch %s: forward %d -> %d: %w", s.cfg.Name, in, out, err)
		}
		entries = append(entries, e)
	}
	for _, sp := range s.cfg.Splits {
		es, err := s.splitEntries(sp)
		if err != nil {
			return err
		}
		entries = append(entries, es...)
	}
	if err := s.writeEntries(ctx, rt, eid, entries); err != nil {
		return err
	}
	s.mu.Lock()
	s.entries = uint32(len(entries))
	for _, sp := range s.cfg.Splits {
		s.gen[sp.Index] = 0
		delete(s.shares, sp.Index)
	}
	s.mu.Unlock()
	return nil
}

// splitEntries are a split's static entries: the classifier on generation 0, the
// encapsulation of every path, and both generations of the slot table spread evenly.
func (s *switchConn) splitEntries(sp *Split) ([]*p4v1.TableEntry, error) {
	cls, err := s.classifier(sp, 0)
	if err != nil {
		return nil, err
	}
	out := []*p4v1.TableEntry{cls}
	for id, p := range sp.Paths {
		e, err := s.info.TableEntry("path_encap",
			[]p4info.Match{p4info.Exact("meta.tunnel_index", sp.Index), p4info.Exact("meta.path_id", id)},
			"encap", p4info.P("src_mac", []byte(p.SrcMAC)), p4info.P("dst_mac", []byte(p.DstMAC)),
			p4info.P("src_ip", p.SrcIP.AsSlice()), p4info.P("dst_ip", p.DstIP.AsSlice()), p4info.P("port", p.Port))
		if err != nil {
			return nil, fmt.Errorf("switch %s: split %d path %s: %w", s.cfg.Name, sp.Index, p.Name, err)
		}
		out = append(out, e)
	}
	even := make([]float64, len(sp.Paths))
	for i := range even {
		even[i] = 1
	}
	for gen := uint32(0); gen < 2; gen++ {
		slots, err := s.slotEntries(sp, gen, even)
		if err != nil {
			return nil, err
		}
		out = append(out, slots...)
	}
	return out, nil
}

func (s *switchConn) classifier(sp *Split, gen uint32) (*p4v1.TableEntry, error) {
	e, err := s.info.TableEntry("tunnel_split",
		[]p4info.Match{p4info.Exact("standard_metadata.ingress_port", sp.InPort), p4info.LPM("hdr.ipv4.dst_addr", sp.Prefix.Addr().AsSlice(), sp.Prefix.Bits())},
		"split", p4info.P("tunnel_id", sp.Tunnel), p4info.P("tunnel_index", sp.Index), p4info.P("gen", gen))
	if err != nil {
		return nil, fmt.Errorf("switch %s: split %d: %w", s.cfg.Name, sp.Index, err)
	}
	return e, nil
}

func (s *switchConn) slotEntries(sp *Split, gen uint32, shares []float64) ([]*p4v1.TableEntry, error) {
	slots, err := split.Smooth(shares, SplitSlots)
	if err != nil {
		return nil, fmt.Errorf("switch %s: split %d: %w", s.cfg.Name, sp.Index, err)
	}
	out := make([]*p4v1.TableEntry, SplitSlots)
	for i, path := range slots {
		if out[i], err = s.info.TableEntry("split_slots",
			[]p4info.Match{p4info.Exact("meta.tunnel_index", sp.Index), p4info.Exact("meta.gen", gen), p4info.Exact("meta.slot", i)},
			"set_path", p4info.P("path_id", path)); err != nil {
			return nil, fmt.Errorf("switch %s: split %d: %w", s.cfg.Name, sp.Index, err)
		}
	}
	return out, nil
}

// setSplit fills the slot table generation that is not live with shares, then switches
// the classifier to it: packets see the old split or the new one, never a mix.
func (s *switchConn) setSplit(ctx context.Context, sp *Split, shares []float64) error {
	s.mu.Lock()
	rt, live := s.rt, s.gen[sp.Index]
	same := equalWeights(s.shares[sp.Index], shares)
	s.mu.Unlock()
	if rt == nil {
		return fmt.Errorf("switch %s is not programmed", s.cfg.Name)
	}
	// With every path down there is nothing better to write, and a slot table cannot be
	// emptied: the last split stays, so the first packets after the outage find a path.
	// A split switch's direction starts so too, as nothing probes its paths before its
	// first packets: the even split it was programmed with carries them.
	if same || !slices.ContainsFunc(shares, func(v float64) bool { return v > 0 }) {
		return nil
	}
	if err := split.Check(shares, len(sp.Paths)); err != nil {
		return fmt.Errorf("switch %s: split %d: %w", s.cfg.Name, sp.Index, err)
	}
	next := 1 - live
	slots, err := s.slotEntries(sp, next, shares)
	if err != nil {
		return err
	}
	eid := &p4v1.Uint128{Low: s.cfg.ElectionID}
	if err := s.modify(ctx, rt, eid, slots); err != nil {
		return err
	}
	cls, err := s.classifier(sp, next)
	if err != nil {
		return err
	}
	if err := s.modify(ctx, rt, eid, []*p4v1.TableEntry{cls}); err != nil {
		return err
	}
	s.mu.Lock()
	s.gen[sp.Index] = next
	s.shares[sp.Index] = append([]float64(nil), shares...)
	s.mu.Unlock()
	return nil
}

// writeEntries inserts entries, modifying those a previous controller left in place.
func (s *switchConn) writeEntries(ctx context.Context, rt p4v1.P4RuntimeClient, eid *p4v1.Uint128, entries []*p4v1.TableEntry) error {
	for _, e := range entries {
		err := s.update(ctx, rt, eid, p4v1.Update_INSERT, e)
		if status.Code(err) == codes.AlreadyExists || isBatchCode(err, codes.AlreadyExists) {
			err = s.update(ctx, rt, eid, p4v1.Update_MODIFY, e)
		}
		if err != nil {
			return fmt.Errorf("switch %s: write %s: %w", s.cfg.Name, tableName(s.info, e), err)
		}
	}
	return nil
}

func (s *switchConn) modify(ctx context.Context, rt p4v1.P4RuntimeClient, eid *p4v1.Uint128, entries []*p4v1.TableEntry) error {
	req := &p4v1.WriteRequest{DeviceId: s.cfg.DeviceID, ElectionId: eid, Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR}
	for _, e := range entries {
		req.Updates = append(req.Updates, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}})
	}
	if _, err := rt.Write(ctx, req); err != nil {
		return fmt.Errorf("switch %s: %w", s.cfg.Name, err)
	}
	return nil
}

func (s *switchConn) update(ctx context.Context, rt p4v1.P4RuntimeClient, eid *p4v1.Uint128, typ p4v1.Update_Type, e *p4v1.TableEntry) error {
	_, err := rt.Write(ctx, &p4v1.WriteRequest{DeviceId: s.cfg.DeviceID, ElectionId: eid,
		Updates: []*p4v1.Update{{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}}}})
	return err
}

// isBatchCode reports whether a P4Runtime batch error carries code for its update.
func isBatchCode(err error, code codes.Code) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if e, ok := d.(*p4v1.Error); ok && codes.Code(e.CanonicalCode) == code {
			return true
		}
	}
	return false
}

func tableName(info *p4info.Info, e *p4v1.TableEntry) string {
	if t, ok := info.TableByID(e.TableId); ok {
		return t.Preamble.Name
	}
	return fmt.Sprint(e.TableId)
}

// readCounters reads path_counter, the switch's view of each path's packets.
func (s *switchConn) readCounters(ctx context.Context, rt p4v1.P4RuntimeClient) {
	ce, err := s.info.CounterEntry("path_counter", -1)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stream, err := rt.Read(ctx, &p4v1.ReadRequest{DeviceId: s.cfg.DeviceID, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_CounterEntry{CounterEntry: ce}}}})
	if err != nil {
		return
	}
	paths := map[string]uint64{}
	for {
		r, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				break
			}
			return
		}
		for _, ent := range r.Entities {
			c := ent.GetCounterEntry()
			if c == nil || c.GetData().GetPacketCount() == 0 {
				continue
			}
			i := c.GetIndex().GetIndex()
			paths[fmt.Sprintf("%d/%d", i/8, i%8)] = uint64(c.GetData().GetPacketCount())
		}
	}
	s.mu.Lock()
	s.paths = paths
	s.mu.Unlock()
}
