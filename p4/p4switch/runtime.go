package p4switch

import (
	"context"
	"encoding/json"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/plait/plait/p4/p4info"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// APIVersion is the P4Runtime version the switch implements.
const APIVersion = "1.5.0"

// Capabilities reports the P4Runtime API version.
func (s *Switch) Capabilities(context.Context, *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return &p4v1.CapabilitiesResponse{P4RuntimeApiVersion: APIVersion}, nil
}

func (s *Switch) checkDevice(id uint64) error {
	if id != s.deviceID {
		return status.Errorf(codes.NotFound, "no device %d here (this switch is device %d)", id, s.deviceID)
	}
	return nil
}

// checkPrimary admits writes only from the primary controller of the default role.
func (s *Switch) checkPrimary(role string, eid *p4v1.Uint128) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if role != "" {
		return status.Errorf(codes.PermissionDenied, "role %q has no primary: this switch serves the default role only", role)
	}
	if s.primary == nil {
		return status.Errorf(codes.PermissionDenied, "no primary controller: open a StreamChannel and send a MasterArbitrationUpdate first")
	}
	if eid == nil || newU128(eid) != s.primary.eid {
		return status.Errorf(codes.PermissionDenied, "election id %s is not the primary's (%s)", newU128(eid), s.primary.eid)
	}
	return nil
}

// SetForwardingPipelineConfig accepts only P4Infos of plait.p4 (see bind) and, as device
// config, nothing or BMv2's JSON (which the Go pipeline does not need and keeps only to
// return it). VERIFY_AND_COMMIT resets all forwarding state; RECONCILE_AND_COMMIT keeps
// it, re-bound to the new IDs.
func (s *Switch) SetForwardingPipelineConfig(_ context.Context, req *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkPrimary(req.GetRole(), req.GetElectionId()); err != nil {
		return nil, err
	}
	act := req.GetAction()
	if act == p4v1.SetForwardingPipelineConfigRequest_COMMIT {
		s.mu.Lock()
		saved := s.saved
		s.mu.Unlock()
		if saved == nil {
			return nil, status.Error(codes.FailedPrecondition, "COMMIT without a config saved by VERIFY_AND_SAVE")
		}
		s.commit(saved, true)
		return &p4v1.SetForwardingPipelineConfigResponse{}, nil
	}
	if act == p4v1.SetForwardingPipelineConfigRequest_UNSPECIFIED {
		return nil, invalid("action UNSPECIFIED: use VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT, COMMIT or RECONCILE_AND_COMMIT")
	}
	cfg, err := verifyConfig(req.GetConfig())
	if err != nil {
		return nil, err
	}
	switch act {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY:
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		s.mu.Lock()
		s.saved = cfg
		s.mu.Unlock()
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
		s.commit(cfg, true)
	case p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		s.commit(cfg, false)
	default:
		return nil, invalid("unknown action %v", act)
	}
	return &p4v1.SetForwardingPipelineConfigResponse{}, nil
}

// pipelineConfig is a verified ForwardingPipelineConfig.
type pipelineConfig struct {
	bind         *binding
	deviceConfig []byte
	cookie       uint64
}

func verifyConfig(c *p4v1.ForwardingPipelineConfig) (*pipelineConfig, error) {
	if c.GetP4Info() == nil {
		return nil, invalid("config has no p4info")
	}
	info, err := p4info.New(c.GetP4Info())
	if err != nil {
		return nil, invalid("%v", err)
	}
	b, err := bind(info)
	if err != nil {
		return nil, invalid("this switch runs plait.p4 only, and this p4info is not plait.p4's: %v", err)
	}
	if dc := c.GetP4DeviceConfig(); len(dc) > 0 && !json.Valid(dc) {
		return nil, invalid("p4_device_config must be empty or BMv2 JSON (p4c-bm2-ss output); got %d bytes that are not JSON", len(dc))
	}
	return &pipelineConfig{bind: b, deviceConfig: c.GetP4DeviceConfig(), cookie: c.GetCookie().GetCookie()}, nil
}

func (s *Switch) commit(c *pipelineConfig, reset bool) {
	if reset {
		s.pipe.reset()
	}
	s.mu.Lock()
	s.deviceConfig, s.cookie = c.deviceConfig, c.cookie
	s.mu.Unlock()
	s.bind.Store(c.bind)
}

// GetForwardingPipelineConfig returns the committed config; before any, an empty one.
func (s *Switch) GetForwardingPipelineConfig(_ context.Context, req *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	b := s.bind.Load()
	if b == nil {
		return &p4v1.GetForwardingPipelineConfigResponse{Config: &p4v1.ForwardingPipelineConfig{}}, nil
	}
	s.mu.Lock()
	cfg := &p4v1.ForwardingPipelineConfig{Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: s.cookie}}
	dc := s.deviceConfig
	s.mu.Unlock()
	switch req.GetResponseType() {
	case p4v1.GetForwardingPipelineConfigRequest_ALL:
		cfg.P4Info, cfg.P4DeviceConfig = b.info.P4Info, dc
	case p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE:
		cfg.P4Info = b.info.P4Info
	case p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE:
		cfg.P4DeviceConfig = dc
	case p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY:
	default:
		return nil, invalid("unknown response type %v", req.GetResponseType())
	}
	return &p4v1.GetForwardingPipelineConfigResponse{Config: cfg}, nil
}

func (p *Pipeline) reset() {
	p.mu.Lock()
	for i := range tableSpecs {
		p.tables[i] = newTable(&tableSpecs[i])
	}
	p.mu.Unlock()
	for _, c := range p.counters {
		for i := range c {
			c[i].packets.Store(0)
			c[i].bytes.Store(0)
		}
	}
	for _, r := range p.registers {
		for i := range r {
			r[i].Store(0)
		}
	}
}

// Write applies a batch. Every batch is applied under the pipeline's write lock, so each
// is atomic for the dataplane whatever its atomicity; ROLLBACK_ON_ERROR and
// DATAPLANE_ATOMIC also undo the batch's applied updates when one fails. A failed update
// never changes anything.
func (s *Switch) Write(_ context.Context, req *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, err
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	b := s.bind.Load()
	if b == nil {
		return nil, status.Error(codes.FailedPrecondition, "no forwarding pipeline config: call SetForwardingPipelineConfig first")
	}
	if err := s.checkPrimary(req.GetRole(), req.GetElectionId()); err != nil {
		return nil, err
	}
	all := false
	switch req.GetAtomicity() {
	case p4v1.WriteRequest_CONTINUE_ON_ERROR:
	case p4v1.WriteRequest_ROLLBACK_ON_ERROR, p4v1.WriteRequest_DATAPLANE_ATOMIC:
		all = true
	default:
		return nil, invalid("unknown atomicity %v", req.GetAtomicity())
	}
	errs := make([]error, len(req.GetUpdates()))
	var undo []func()
	failed := false
	s.pipe.mu.Lock()
	for i, u := range req.GetUpdates() {
		if failed && all {
			errs[i] = status.Error(codes.Aborted, "not applied: an earlier update of this batch failed")
			continue
		}
		un, err := s.pipe.apply(b, u)
		if err != nil {
			errs[i], failed = err, true
			continue
		}
		undo = append(undo, un)
	}
	if failed && all {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
		for i, err := range errs {
			if err == nil {
				errs[i] = status.Error(codes.Aborted, "rolled back: another update of this batch failed")
			}
		}
	}
	s.pipe.mu.Unlock()
	if !failed {
		return &p4v1.WriteResponse{}, nil
	}
	return nil, batchError(errs)
}

// batchError is the spec's UNKNOWN status with one p4.v1.Error per update; its message
// repeats the first failure so that clients which print only the message say something.
func batchError(errs []error) error {
	var details []*p4v1.Error
	first := ""
	for i, err := range errs {
		if err == nil {
			details = append(details, &p4v1.Error{CanonicalCode: int32(codes.OK)})
			continue
		}
		es := status.Convert(err)
		if first == "" {
			first = fmt.Sprintf("update %d: %s: %s", i, es.Code(), es.Message())
		}
		details = append(details, &p4v1.Error{CanonicalCode: int32(es.Code()), Message: es.Message()})
	}
	st := status.New(codes.Unknown, "write failure: "+first)
	for _, d := range details {
		if withD, err := st.WithDetails(d); err == nil {
			st = withD
		}
	}
	return st.Err()
}

// apply performs one update and returns how to undo it. Caller holds p.mu.
func (p *Pipeline) apply(b *binding, u *p4v1.Update) (func(), error) {
	typ := u.GetType()
	if typ == p4v1.Update_UNSPECIFIED {
		return nil, invalid("update type UNSPECIFIED: use INSERT, MODIFY or DELETE")
	}
	switch ent := u.GetEntity().GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		return p.applyTable(b, typ, ent.TableEntry)
	case *p4v1.Entity_CounterEntry:
		if typ != p4v1.Update_MODIFY {
			return nil, invalid("counter entries can only be modified, not %v", typ)
		}
		return p.writeCounter(b, ent.CounterEntry)
	case *p4v1.Entity_RegisterEntry:
		if typ != p4v1.Update_MODIFY {
			return nil, invalid("register entries can only be modified, not %v", typ)
		}
		return p.writeRegister(b, ent.RegisterEntry)
	case nil:
		return nil, invalid("update without an entity")
	default:
		return nil, status.Errorf(codes.Unimplemented, "plait.p4 has no %T entities", ent)
	}
}

func (p *Pipeline) applyTable(b *binding, typ p4v1.Update_Type, te *p4v1.TableEntry) (func(), error) {
	ti, e, err := b.toEntry(te, typ != p4v1.Update_DELETE)
	if err != nil {
		return nil, err
	}
	t := p.tables[ti]
	if te.GetIsDefaultAction() {
		if typ != p4v1.Update_MODIFY {
			return nil, invalid("the default entry of table %s can only be modified, not %v", t.spec.name, typ)
		}
		old := t.def
		t.def = *e
		return func() { t.def = old }, nil
	}
	cur, exists := t.entries[e.id()]
	switch typ {
	case p4v1.Update_INSERT:
		if exists {
			return nil, status.Errorf(codes.AlreadyExists, "table %s already has an entry with this key", t.spec.name)
		}
		if len(t.entries) >= t.spec.size {
			return nil, status.Errorf(codes.ResourceExhausted, "table %s is full (%d entries)", t.spec.name, t.spec.size)
		}
		t.insert(e)
		return func() { t.remove(e) }, nil
	case p4v1.Update_MODIFY:
		if !exists {
			return nil, status.Errorf(codes.NotFound, "table %s has no entry with this key", t.spec.name)
		}
		old := *cur
		cur.action, cur.params, cur.metadata, cur.controllerMetadata = e.action, e.params, e.metadata, e.controllerMetadata
		return func() { *cur = old }, nil
	case p4v1.Update_DELETE:
		if !exists {
			return nil, status.Errorf(codes.NotFound, "table %s has no entry with this key", t.spec.name)
		}
		t.remove(cur)
		return func() { t.insert(cur) }, nil
	}
	return nil, invalid("unknown update type %v", typ)
}

// cells resolves a counter or register index; nil means all cells.
func cells(idx *p4v1.Index, size int, name string) (lo, hi int, err error) {
	if idx == nil {
		return 0, size, nil
	}
	i := idx.GetIndex()
	if i < 0 || i >= int64(size) {
		return 0, 0, status.Errorf(codes.OutOfRange, "%s has %d cells, index %d is outside", name, size, i)
	}
	return int(i), int(i) + 1, nil
}

func (p *Pipeline) writeCounter(b *binding, ce *p4v1.CounterEntry) (func(), error) {
	ci, ok := b.counters[ce.GetCounterId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no counter with id %d", ce.GetCounterId())
	}
	c := p.counters[ci]
	lo, hi, err := cells(ce.GetIndex(), len(c), counterSpecs[ci].name)
	if err != nil {
		return nil, err
	}
	if ce.GetData().GetPacketCount() < 0 || ce.GetData().GetByteCount() < 0 {
		return nil, invalid("counter %s: counts cannot be negative", counterSpecs[ci].name)
	}
	type old struct{ pk, by uint64 }
	saved := make([]old, hi-lo)
	for i := lo; i < hi; i++ {
		saved[i-lo] = old{c[i].packets.Swap(uint64(ce.GetData().GetPacketCount())), c[i].bytes.Swap(uint64(ce.GetData().GetByteCount()))}
	}
	return func() {
		for i := lo; i < hi; i++ {
			c[i].packets.Store(saved[i-lo].pk)
			c[i].bytes.Store(saved[i-lo].by)
		}
	}, nil
}

func (p *Pipeline) writeRegister(b *binding, re *p4v1.RegisterEntry) (func(), error) {
	ri, ok := b.registers[re.GetRegisterId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no register with id %d", re.GetRegisterId())
	}
	spec := registerSpecs[ri]
	bs, ok := re.GetData().GetData().(*p4v1.P4Data_Bitstring)
	if !ok {
		return nil, invalid("register %s holds bit<%d>: data must be a bitstring", spec.name, spec.bits)
	}
	v, err := value(bs.Bitstring, spec.bits, "register "+spec.name)
	if err != nil {
		return nil, err
	}
	r := p.registers[ri]
	lo, hi, err := cells(re.GetIndex(), len(r), spec.name)
	if err != nil {
		return nil, err
	}
	saved := make([]uint64, hi-lo)
	for i := lo; i < hi; i++ {
		saved[i-lo] = r[i].Swap(v)
	}
	return func() {
		for i := lo; i < hi; i++ {
			r[i].Store(saved[i-lo])
		}
	}, nil
}

// readChunk bounds the entities of one ReadResponse message.
const readChunk = 1000

// Read answers table, counter and register reads, with wildcards: table_id 0 reads all
// tables, an entry without match fields all entries of its table, is_default_action the
// default entry, counter_id / register_id 0 all arrays and an unset index all cells.
func (s *Switch) Read(req *p4v1.ReadRequest, send func(*p4v1.ReadResponse) error) error {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return err
	}
	b := s.bind.Load()
	if b == nil {
		return status.Error(codes.FailedPrecondition, "no forwarding pipeline config: call SetForwardingPipelineConfig first")
	}
	var out []*p4v1.Entity
	for _, ent := range req.GetEntities() {
		got, err := s.pipe.read(b, ent)
		if err != nil {
			return err
		}
		out = append(out, got...)
	}
	for len(out) > 0 {
		n := min(len(out), readChunk)
		if err := send(&p4v1.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

func (p *Pipeline) read(b *binding, ent *p4v1.Entity) ([]*p4v1.Entity, error) {
	var out []*p4v1.Entity
	switch x := ent.GetEntity().(type) {
	case *p4v1.Entity_TableEntry:
		te := x.TableEntry
		tis := []int{}
		if te.GetTableId() == 0 {
			for i := range tableSpecs {
				tis = append(tis, i)
			}
		} else {
			ti, err := b.table(te.GetTableId())
			if err != nil {
				return nil, err
			}
			tis = append(tis, ti)
		}
		p.mu.RLock()
		defer p.mu.RUnlock()
		for _, ti := range tis {
			t := p.tables[ti]
			switch {
			case te.GetIsDefaultAction():
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: b.fromEntry(ti, &t.def, true)}})
			case len(te.GetMatch()) > 0:
				key := &entry{}
				if err := b.matchKey(ti, te.GetMatch(), key); err != nil {
					return nil, err
				}
				if e, ok := t.entries[key.id()]; ok {
					out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: b.fromEntry(ti, e, false)}})
				}
			default:
				for _, e := range t.order {
					out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: b.fromEntry(ti, e, false)}})
				}
			}
		}
	case *p4v1.Entity_CounterEntry:
		ids, err := arrayIDs(x.CounterEntry.GetCounterId(), b.counters, b.counterIDs[:], "counter")
		if err != nil {
			return nil, err
		}
		for _, ci := range ids {
			c := p.counters[ci]
			lo, hi, err := cells(x.CounterEntry.GetIndex(), len(c), counterSpecs[ci].name)
			if err != nil {
				return nil, err
			}
			for i := lo; i < hi; i++ {
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{
					CounterId: b.counterIDs[ci], Index: &p4v1.Index{Index: int64(i)},
					Data: &p4v1.CounterData{PacketCount: int64(c[i].packets.Load()), ByteCount: int64(c[i].bytes.Load())},
				}}})
			}
		}
	case *p4v1.Entity_RegisterEntry:
		ids, err := arrayIDs(x.RegisterEntry.GetRegisterId(), b.registers, b.registerIDs[:], "register")
		if err != nil {
			return nil, err
		}
		for _, ri := range ids {
			r := p.registers[ri]
			lo, hi, err := cells(x.RegisterEntry.GetIndex(), len(r), registerSpecs[ri].name)
			if err != nil {
				return nil, err
			}
			for i := lo; i < hi; i++ {
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{
					RegisterId: b.registerIDs[ri], Index: &p4v1.Index{Index: int64(i)},
					Data: &p4v1.P4Data{Data: &p4v1.P4Data_Bitstring{Bitstring: encodeUint(uint64(uint32(r[i].Load())))}},
				}}})
			}
		}
	case nil:
		return nil, invalid("read request entity has no type set")
	default:
		return nil, status.Errorf(codes.Unimplemented, "plait.p4 has no %T entities", x)
	}
	return out, nil
}

func arrayIDs(id uint32, byID map[uint32]int, ids []uint32, kind string) ([]int, error) {
	if id == 0 {
		all := make([]int, len(ids))
		for i := range ids {
			all[i] = i
		}
		return all, nil
	}
	i, ok := byID[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no %s with id %d", kind, id)
	}
	return []int{i}, nil
}
