package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/p4/p4info"
	"github.com/plait/plait/split"
)

// SplitSlots is the size of plait.p4's slot table (SPLIT_SLOTS).
const SplitSlots = 256

// switchConn keeps one switch programmed as a correct P4Runtime client: it arbitrates
// with the election id and role of the network file, follows every arbitration update
// on the stream, and when primary reconciles the switch with what the network file asks
// (reconcile.go) instead of wiping it. When another client takes the switch it says so
// (status, metric, log), refuses the writes it would have made with that reason, and
// takes the switch back by the network file's policy (Yield or Reclaim).
type switchConn struct {
	cfg          *Switch
	info         *p4info.Info
	deviceConfig []byte
	cookie       uint64 // identifies info and deviceConfig on the switch
	kick         func()

	mu         sync.Mutex
	rt         p4v1.P4RuntimeClient // set while primary and programmed
	conn       *grpc.ClientConn
	eid        *p4v1.Uint128     // what the controller last arbitrated with
	holder     *p4v1.Uint128     // the primary's, as the switch last announced
	gen        map[uint32]uint32 // split index -> live slot-table generation
	shares     map[uint32][]float64
	entries    uint32
	programmed uint64
	lastErr    string
	paths      map[string]uint64
	cost       reconcileCost
	lost       uint64
}

// reconcileCost counts what reprogramming took, over the controller's life.
type reconcileCost struct {
	pushes, writes, inserts, modifies, deletes uint64
	last                                       time.Duration
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
	sc := &switchConn{cfg: s, info: info, kick: kick, gen: map[uint32]uint32{}, shares: map[uint32][]float64{},
		eid: &p4v1.Uint128{Low: s.ElectionID}}
	if s.DeviceConfig != "" {
		b, err := os.ReadFile(s.DeviceConfig)
		if err != nil {
			return nil, fmt.Errorf("switch %s: %w", s.Name, err)
		}
		sc.deviceConfig = b
	}
	sc.cookie = pipelineCookie(info.P4Info, sc.deviceConfig)
	return sc, nil
}

// liveShares is the split the switch carries for sp, as the controller last wrote or read
// it back; nil while the switch is not programmed or the split is not known.
func (s *switchConn) liveShares(sp *Split) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt == nil {
		return nil
	}
	return slices.Clone(s.shares[sp.Index])
}

func (s *switchConn) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rt != nil
}

func (s *switchConn) status() *pb.SwitchStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &pb.SwitchStatus{Name: s.cfg.Name, Address: s.cfg.Address, Connected: s.conn != nil, Primary: s.rt != nil,
		ElectionId: s.eid.GetLow(), Entries: s.entries, Programmed: s.programmed, LastError: s.lastErr, PathPackets: map[string]uint64{},
		Role: s.cfg.Role, OnLostPrimary: s.cfg.OnLost, PrimaryLost: s.lost,
		PipelinePushes: s.cost.pushes, WriteRpcs: s.cost.writes, Inserts: s.cost.inserts, Modifies: s.cost.modifies, Deletes: s.cost.deletes,
		LastReconcileMs: float64(s.cost.last.Microseconds()) / 1e3}
	if s.holder != nil {
		st.PrimaryElectionId = eidString(s.holder)
	}
	for k, v := range s.paths {
		st.PathPackets[k] = v
	}
	return st
}

func eidString(e *p4v1.Uint128) string {
	if e.GetHigh() == 0 {
		return fmt.Sprint(e.GetLow())
	}
	return fmt.Sprintf("%d:%d", e.GetHigh(), e.GetLow())
}

// above is the election id one past e.
func above(e *p4v1.Uint128) *p4v1.Uint128 {
	if e.GetLow() == math.MaxUint64 {
		return &p4v1.Uint128{High: e.GetHigh() + 1}
	}
	return &p4v1.Uint128{High: e.GetHigh(), Low: e.GetLow() + 1}
}

func less(a, b *p4v1.Uint128) bool {
	return a.GetHigh() < b.GetHigh() || a.GetHigh() == b.GetHigh() && a.GetLow() < b.GetLow()
}

func (s *switchConn) run(ctx context.Context, log *slog.Logger) {
	// A switch that restarts is back within a second or two: retry soon enough that its
	// split is restored within 2 s, and no faster than a busy loop.
	const first, most = 50 * time.Millisecond, 250 * time.Millisecond
	backoff := first
	for ctx.Err() == nil {
		primary, err := s.session(ctx, log)
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
		if primary {
			backoff = first
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, most)
	}
}

// session is one connection: arbitrate, then follow the stream. Each arbitration update
// says whether the controller is primary; on becoming primary it reconciles the switch
// and starts writing, on losing it it stops and applies the policy. It returns whether
// it was ever primary.
func (s *switchConn) session(ctx context.Context, log *slog.Logger) (bool, error) {
	conn, err := sockrpc.Dial(s.cfg.Address, s.cfg.TLS)
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", s.cfg.Address, err)
	}
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	rt := p4v1.NewP4RuntimeClient(conn)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := rt.StreamChannel(sctx)
	if err != nil {
		return false, fmt.Errorf("stream to %s: %s", s.cfg.Address, sockrpc.Explain(err.Error()))
	}
	arbitrate := func(eid *p4v1.Uint128) error {
		s.mu.Lock()
		s.eid = eid
		s.mu.Unlock()
		a := &p4v1.MasterArbitrationUpdate{DeviceId: s.cfg.DeviceID, ElectionId: eid}
		if s.cfg.Role != "" {
			a.Role = &p4v1.Role{Name: s.cfg.Role}
		}
		if err := stream.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: a}}); err != nil {
			return fmt.Errorf("arbitration: %w", err)
		}
		return nil
	}
	if err := arbitrate(&p4v1.Uint128{Low: s.cfg.ElectionID}); err != nil {
		return false, err
	}
	updates := make(chan *p4v1.MasterArbitrationUpdate, 16)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			if a := m.GetArbitration(); a != nil {
				select {
				case updates <- a:
				case <-sctx.Done():
					return
				}
			}
		}
	}()
	counters := time.NewTicker(time.Second)
	defer counters.Stop()
	wasPrimary, everPrimary := false, false
	var reclaimed time.Time    // the last reclaim
	var later <-chan time.Time // a reclaim put off
	for {
		select {
		case <-ctx.Done():
			return everPrimary, nil
		case <-later:
			later = nil
			s.mu.Lock()
			holder := s.holder
			s.mu.Unlock()
			if !wasPrimary && holder != nil {
				reclaimed = time.Now()
				if err := arbitrate(above(holder)); err != nil {
					return everPrimary, err
				}
			}
		case err := <-errc:
			return everPrimary, fmt.Errorf("stream from %s: %s", s.cfg.Address, sockrpc.Explain(err.Error()))
		case <-counters.C:
			if wasPrimary {
				s.readCounters(sctx, rt)
			}
		case a := <-updates:
			primary := codes.Code(a.GetStatus().GetCode()) == codes.OK
			s.mu.Lock()
			s.holder = a.GetElectionId()
			if !primary && a.GetStatus().GetCode() == int32(codes.NotFound) {
				s.holder = nil // there is no primary
			}
			ours, holder := s.eid, s.holder
			s.mu.Unlock()
			switch {
			case primary && !wasPrimary:
				if err := s.reconcile(sctx, rt, log); err != nil {
					return everPrimary, err
				}
				wasPrimary, everPrimary = true, true
				s.kick()
			case !primary:
				// The loss and its reason change together: a status read between them
				// would report the loss without saying who holds the switch.
				s.mu.Lock()
				if wasPrimary {
					s.rt, s.lost = nil, s.lost+1
				}
				s.lastErr = s.notPrimary(a)
				s.mu.Unlock()
				if wasPrimary {
					log.Warn("lost primary", "switch", s.cfg.Name, "holder", eidString(a.GetElectionId()), "ours", eidString(ours), "policy", s.cfg.OnLost)
				}
				wasPrimary = false
				// Reclaim: at once, above the holder, but at most once per reclaimEvery,
				// so that a client that raises its id in turn does not make a busy loop of
				// it. Yield: once there is no primary, with an id the switch takes (no
				// lower than the highest it has seen).
				next := s.nextElectionID(a, ours)
				switch {
				case next == nil:
				case holder != nil && time.Since(reclaimed) < reclaimEvery:
					if later == nil {
						later = time.After(reclaimEvery - time.Since(reclaimed))
					}
				default:
					if holder != nil {
						reclaimed = time.Now()
					}
					if err := arbitrate(next); err != nil {
						return everPrimary, err
					}
				}
			}
		}
	}
}

// reclaimEvery spaces out reclaims under the Reclaim policy.
const reclaimEvery = time.Second

// notPrimary says why the controller cannot write to the switch.
func (s *switchConn) notPrimary(a *p4v1.MasterArbitrationUpdate) string {
	if codes.Code(a.GetStatus().GetCode()) == codes.NotFound {
		return fmt.Sprintf("not primary on %s: the switch has no primary (%s)", s.cfg.Name, a.GetStatus().GetMessage())
	}
	return fmt.Sprintf("not primary on %s: election id %s holds it (ours %s, policy %s)", s.cfg.Name, eidString(a.GetElectionId()), eidString(s.eid), s.cfg.OnLost)
}

// nextElectionID is what to arbitrate with after an update that did not make the
// controller primary, or nil to stay a backup.
func (s *switchConn) nextElectionID(a *p4v1.MasterArbitrationUpdate, ours *p4v1.Uint128) *p4v1.Uint128 {
	highest := a.GetElectionId()
	noPrimary := codes.Code(a.GetStatus().GetCode()) == codes.NotFound
	switch {
	case s.cfg.OnLost == Reclaim && !noPrimary:
		return above(highest)
	case noPrimary && highest != nil && less(ours, highest):
		return highest // the switch remembers the highest id; the one who held it left
	case noPrimary:
		return ours
	}
	return nil
}

// reconcile brings a switch the controller just became primary on to what the network
// file asks, and counts what it took.
func (s *switchConn) reconcile(ctx context.Context, rt p4v1.P4RuntimeClient, log *slog.Logger) error {
	start := time.Now()
	d, err := s.sync(ctx, rt)
	if err != nil {
		return err
	}
	took := time.Since(start)
	s.mu.Lock()
	s.rt = rt
	s.programmed++
	s.lastErr = ""
	s.cost.pushes += d.pushes
	s.cost.writes += d.writes
	s.cost.inserts += d.inserts
	s.cost.modifies += d.modifies
	s.cost.deletes += d.deletes
	s.cost.last = took
	s.mu.Unlock()
	log.Info("switch programmed", "name", s.cfg.Name, "election_id", eidString(s.eid), "took", took,
		"pipeline_pushes", d.pushes, "write_rpcs", d.writes, "inserts", d.inserts, "modifies", d.modifies, "deletes", d.deletes)
	return nil
}

// encapEntries encapsulate a split's packets on each of its paths.
func (s *switchConn) encapEntries(sp *Split) ([]*p4v1.TableEntry, error) {
	var out []*p4v1.TableEntry
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
		s.mu.Lock()
		why := s.lastErr
		s.mu.Unlock()
		if why == "" {
			why = "not connected"
		}
		return fmt.Errorf("switch %s cannot be written: %s", s.cfg.Name, why)
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
	s.mu.Lock()
	eid := s.eid
	s.mu.Unlock()
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

func (s *switchConn) modify(ctx context.Context, rt p4v1.P4RuntimeClient, eid *p4v1.Uint128, entries []*p4v1.TableEntry) error {
	req := &p4v1.WriteRequest{DeviceId: s.cfg.DeviceID, Role: s.cfg.Role, ElectionId: eid, Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR}
	for _, e := range entries {
		req.Updates = append(req.Updates, &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}})
	}
	if _, err := rt.Write(ctx, req); err != nil {
		return fmt.Errorf("switch %s: %w", s.cfg.Name, err)
	}
	return nil
}

// readCounters reads path_counter, the switch's view of each path's packets.
func (s *switchConn) readCounters(ctx context.Context, rt p4v1.P4RuntimeClient) {
	ce, err := s.info.CounterEntry("path_counter", -1)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stream, err := rt.Read(ctx, &p4v1.ReadRequest{DeviceId: s.cfg.DeviceID, Role: s.cfg.Role, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_CounterEntry{CounterEntry: ce}}}})
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
