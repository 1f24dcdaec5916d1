package controller

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/protobuf/proto"

	"github.com/plait/plait/p4/p4info"
)

// Reconciling instead of wiping: a controller that (re)connects to a switch reads the
// pipeline's cookie and the entries the switch holds, pushes the pipeline only when the
// cookie is not its own (a fresh or foreign switch), and writes only the difference
// between the entries it wants and those there, batched. A switch that kept its state
// (the controller restarted, or its connection broke) costs no push and no delete, and
// its traffic is not interrupted; a split switch keeps the split it carries, or, when
// the controller knows a newer one (the switch restarted), gets that one back.

// writeBatch bounds the updates of one Write RPC, well inside gRPC's message size.
const writeBatch = 1024

// pipelineCookie identifies a P4Info and device config, so that a switch that runs
// them already is not pushed again.
func pipelineCookie(info proto.Message, deviceConfig []byte) uint64 {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(info)
	h := sha256.New()
	h.Write(b)
	h.Write(deviceConfig)
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// sync brings the switch to the wanted state and says what it took.
func (s *switchConn) sync(ctx context.Context, rt p4v1.P4RuntimeClient) (reconcileCost, error) {
	var d reconcileCost
	s.mu.Lock()
	eid := s.eid
	s.mu.Unlock()
	// A switch without a pipeline may answer with an error (BMv2 started without one
	// does): that is a switch to push to.
	got, err := rt.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{
		DeviceId: s.cfg.DeviceID, ResponseType: p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY})
	if err != nil || got.GetConfig().GetCookie().GetCookie() != s.cookie {
		_, err := rt.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{
			DeviceId: s.cfg.DeviceID, Role: s.cfg.Role, ElectionId: eid, Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT,
			Config: &p4v1.ForwardingPipelineConfig{P4Info: s.info.P4Info, P4DeviceConfig: s.deviceConfig,
				Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: s.cookie}},
		})
		if err != nil {
			return d, fmt.Errorf("push pipeline to %s: %w", s.cfg.Name, err)
		}
		d.pushes++
	}
	have, err := s.readEntries(ctx, rt)
	if err != nil {
		return d, err
	}
	want, gens, shares, err := s.wanted(have)
	if err != nil {
		return d, err
	}
	// Slots and encapsulation first, then the classifiers that point at them, then what
	// is left over: packets never meet a classifier whose slots are not there yet.
	cls, err := s.info.Table("tunnel_split")
	if err != nil {
		return d, err
	}
	var first, then, last []*p4v1.Update
	for k, e := range want {
		u := &p4v1.Update{Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: e}}}
		h, ok := have[k]
		switch {
		case !ok:
			u.Type = p4v1.Update_INSERT
			d.inserts++
		case actionKey(h) != actionKey(e):
			u.Type = p4v1.Update_MODIFY
			d.modifies++
		default:
			continue
		}
		if e.TableId == cls.GetPreamble().GetId() {
			then = append(then, u)
		} else {
			first = append(first, u)
		}
	}
	for k, h := range have {
		if _, ok := want[k]; !ok {
			key := &p4v1.TableEntry{TableId: h.TableId, Match: h.Match, Priority: h.Priority}
			last = append(last, &p4v1.Update{Type: p4v1.Update_DELETE, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: key}}})
			d.deletes++
		}
	}
	for _, batch := range [][]*p4v1.Update{first, then, last} {
		for len(batch) > 0 {
			n := min(len(batch), writeBatch)
			if _, err := rt.Write(ctx, &p4v1.WriteRequest{DeviceId: s.cfg.DeviceID, Role: s.cfg.Role, ElectionId: eid,
				Updates: batch[:n], Atomicity: p4v1.WriteRequest_CONTINUE_ON_ERROR}); err != nil {
				return d, fmt.Errorf("switch %s: write %d updates: %w", s.cfg.Name, n, err)
			}
			d.writes++
			batch = batch[n:]
		}
	}
	s.mu.Lock()
	s.entries = uint32(len(want))
	s.gen, s.shares = gens, shares
	s.mu.Unlock()
	return d, nil
}

// readEntries reads every table entry the switch holds, by key.
func (s *switchConn) readEntries(ctx context.Context, rt p4v1.P4RuntimeClient) (map[string]*p4v1.TableEntry, error) {
	stream, err := rt.Read(ctx, &p4v1.ReadRequest{DeviceId: s.cfg.DeviceID, Role: s.cfg.Role,
		Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}}}})
	if err != nil {
		return nil, fmt.Errorf("read entries of %s: %w", s.cfg.Name, err)
	}
	have := map[string]*p4v1.TableEntry{}
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return have, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read entries of %s: %w", s.cfg.Name, err)
		}
		for _, e := range r.Entities {
			if te := e.GetTableEntry(); te != nil && !te.IsDefaultAction {
				have[entryKey(te)] = te
			}
		}
	}
}

// wanted is every entry the network file asks for, given what the switch has: a split's
// live slot table is the controller's last split when it knows one, else the switch's
// own when complete (adopted, its shares read from its slots), else even; the other
// generation is kept when complete. It returns the live generations and the shares
// known, by split index.
func (s *switchConn) wanted(have map[string]*p4v1.TableEntry) (map[string]*p4v1.TableEntry, map[uint32]uint32, map[uint32][]float64, error) {
	want := map[string]*p4v1.TableEntry{}
	add := func(es ...*p4v1.TableEntry) {
		for _, e := range es {
			want[entryKey(e)] = e
		}
	}
	for in, out := range s.cfg.Forward {
		e, err := s.info.TableEntry("port_fwd", []p4info.Match{p4info.Exact("standard_metadata.ingress_port", in)}, "forward", p4info.P("port", out))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("switch %s: forward %d -> %d: %w", s.cfg.Name, in, out, err)
		}
		add(e)
	}
	s.mu.Lock()
	known := map[uint32][]float64{}
	gens := map[uint32]uint32{}
	for k, v := range s.shares {
		known[k] = v
	}
	for k, v := range s.gen {
		gens[k] = v
	}
	s.mu.Unlock()
	for _, sp := range s.cfg.Splits {
		encap, err := s.encapEntries(sp)
		if err != nil {
			return nil, nil, nil, err
		}
		add(encap...)
		even := make([]float64, len(sp.Paths))
		for i := range even {
			even[i] = 1
		}
		live, shares := gens[sp.Index], known[sp.Index]
		if shares == nil {
			if g, ok := s.switchGen(sp, have); ok {
				live = g
			}
		}
		for gen := uint32(0); gen < 2; gen++ {
			var slots []*p4v1.TableEntry
			if gen == live && shares != nil {
				if slots, err = s.slotEntries(sp, gen, shares); err != nil {
					return nil, nil, nil, err
				}
			} else if slots = s.switchSlots(sp, gen, have); slots == nil {
				if slots, err = s.slotEntries(sp, gen, even); err != nil {
					return nil, nil, nil, err
				}
				if gen == live {
					known[sp.Index] = even
				}
			} else if gen == live {
				known[sp.Index] = slotShares(sp, slots) // the switch's own, adopted
			}
			add(slots...)
		}
		c, err := s.classifier(sp, live)
		if err != nil {
			return nil, nil, nil, err
		}
		add(c)
		gens[sp.Index] = live
	}
	return want, gens, known, nil
}

// switchGen is the slot-table generation the switch's classifier for sp points at.
func (s *switchConn) switchGen(sp *Split, have map[string]*p4v1.TableEntry) (uint32, bool) {
	c, err := s.classifier(sp, 0)
	if err != nil {
		return 0, false
	}
	h, ok := have[entryKey(c)]
	if !ok {
		return 0, false
	}
	a, err := s.info.Action("split")
	if err != nil {
		return 0, false
	}
	p, err := a.Param("gen")
	if err != nil {
		return 0, false
	}
	for _, hp := range h.GetAction().GetAction().GetParams() {
		if hp.ParamId == p.GetId() {
			g, err := p4info.Uint(hp.Value)
			return uint32(g), err == nil && g < 2
		}
	}
	return 0, false
}

// switchSlots is the switch's slot table for sp's generation gen when it is complete
// and names only sp's paths, else nil.
func (s *switchConn) switchSlots(sp *Split, gen uint32, have map[string]*p4v1.TableEntry) []*p4v1.TableEntry {
	probe, err := s.slotEntries(sp, gen, []float64{1})
	if err != nil {
		return nil
	}
	a, err := s.info.Action("set_path")
	if err != nil {
		return nil
	}
	out := make([]*p4v1.TableEntry, len(probe))
	for i, e := range probe {
		h, ok := have[entryKey(e)]
		if !ok || h.GetAction().GetAction().GetActionId() != a.GetPreamble().GetId() {
			return nil
		}
		ps := h.GetAction().GetAction().GetParams()
		if len(ps) != 1 {
			return nil
		}
		if path, err := p4info.Uint(ps[0].Value); err != nil || path >= uint64(len(sp.Paths)) {
			return nil
		}
		out[i] = h
	}
	return out
}

// slotShares is each of sp's paths' share of a complete slot table (switchSlots).
func slotShares(sp *Split, slots []*p4v1.TableEntry) []float64 {
	shares := make([]float64, len(sp.Paths))
	for _, e := range slots {
		path, _ := p4info.Uint(e.GetAction().GetAction().GetParams()[0].Value)
		shares[path] += 1 / float64(len(slots))
	}
	return shares
}

// entryKey identifies an entry by table, match and priority, whatever the order of its
// match fields and whether a switch answers with canonical byte strings (P4Runtime 1.3)
// or padded ones (older servers).
func entryKey(e *p4v1.TableEntry) string {
	m := make([]*p4v1.FieldMatch, len(e.Match))
	for i, f := range e.Match {
		f = proto.Clone(f).(*p4v1.FieldMatch)
		switch x := f.FieldMatchType.(type) {
		case *p4v1.FieldMatch_Exact_:
			x.Exact.Value = canonical(x.Exact.Value)
		case *p4v1.FieldMatch_Lpm:
			x.Lpm.Value = canonical(x.Lpm.Value)
		case *p4v1.FieldMatch_Ternary_:
			x.Ternary.Value, x.Ternary.Mask = canonical(x.Ternary.Value), canonical(x.Ternary.Mask)
		}
		m[i] = f
	}
	slices.SortFunc(m, func(a, b *p4v1.FieldMatch) int { return int(a.FieldId) - int(b.FieldId) })
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&p4v1.TableEntry{TableId: e.TableId, Match: m, Priority: e.Priority})
	return string(b)
}

// canonical strips leading zero bytes, keeping one.
func canonical(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// actionKey identifies an entry's action and parameters, whatever their order.
func actionKey(e *p4v1.TableEntry) string {
	a := e.GetAction().GetAction()
	if a == nil {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(e.GetAction())
		return string(b)
	}
	ps := make([]*p4v1.Action_Param, len(a.Params))
	for i, p := range a.Params {
		ps[i] = &p4v1.Action_Param{ParamId: p.ParamId, Value: canonical(p.Value)}
	}
	slices.SortFunc(ps, func(x, y *p4v1.Action_Param) int { return int(x.ParamId) - int(y.ParamId) })
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&p4v1.Action{ActionId: a.ActionId, Params: ps})
	return string(b)
}
