package p4switch

import (
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// u128 is an election ID.
type u128 struct{ hi, lo uint64 }

func newU128(x *p4v1.Uint128) u128 { return u128{x.GetHigh(), x.GetLow()} }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

func (a u128) String() string {
	if a.hi == 0 {
		return fmt.Sprint(a.lo)
	}
	return fmt.Sprintf("%d:%d", a.hi, a.lo)
}

func (a u128) proto() *p4v1.Uint128 { return &p4v1.Uint128{High: a.hi, Low: a.lo} }

// controller is one StreamChannel. Messages to it go through out, drained by one sender
// goroutine so that the dataplane never blocks on a slow client.
type controller struct {
	eid    u128
	hasEID bool
	out    chan *p4v1.StreamMessageResponse
}

// streamQueue bounds what may wait for a slow client; PacketIns beyond it are dropped.
const streamQueue = 1024

// StreamServer is the server side of P4Runtime's StreamChannel.
type StreamServer interface {
	Send(*p4v1.StreamMessageResponse) error
	Recv() (*p4v1.StreamMessageRequest, error)
}

// StreamChannel runs one controller's stream: arbitration per the spec's rules (highest
// election ID ever seen is primary; notifications to all on a change of primary) and
// PacketOut from the primary; PacketIns go to the primary.
func (s *Switch) StreamChannel(stream StreamServer) error {
	c := &controller{out: make(chan *p4v1.StreamMessageResponse, streamQueue)}
	done := make(chan struct{})
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case m := <-c.out:
				if err := stream.Send(m); err != nil {
					sendErr <- err
					return
				}
			case <-done:
				return
			}
		}
	}()
	defer close(done)
	defer s.leave(c)
	joined := false
	for {
		req, err := stream.Recv()
		if err != nil {
			select {
			case err := <-sendErr:
				return err
			default:
			}
			return nil
		}
		switch u := req.GetUpdate().(type) {
		case *p4v1.StreamMessageRequest_Arbitration:
			if err := s.arbitrate(c, u.Arbitration, joined); err != nil {
				return err
			}
			joined = true
		case *p4v1.StreamMessageRequest_Packet:
			if !joined {
				return grpcstatus.Error(codes.FailedPrecondition, "send a MasterArbitrationUpdate before anything else")
			}
			s.packetOut(c, u.Packet)
		default:
			if !joined {
				return grpcstatus.Error(codes.FailedPrecondition, "send a MasterArbitrationUpdate before anything else")
			}
			c.send(streamError(codes.Unimplemented, fmt.Sprintf("%T is not supported by plait.p4", u), nil))
		}
	}
}

func (c *controller) send(m *p4v1.StreamMessageResponse) bool {
	select {
	case c.out <- m:
		return true
	default:
		return false
	}
}

func streamError(code codes.Code, msg string, po *p4v1.PacketOut) *p4v1.StreamMessageResponse {
	se := &p4v1.StreamError{CanonicalCode: int32(code), Message: msg}
	if po != nil {
		se.Details = &p4v1.StreamError_PacketOut{PacketOut: &p4v1.PacketOutError{PacketOut: po}}
	}
	return &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: se}}
}

func (s *Switch) arbitrate(c *controller, a *p4v1.MasterArbitrationUpdate, joined bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.GetDeviceId() != s.deviceID {
		if joined {
			return grpcstatus.Errorf(codes.FailedPrecondition, "device id changed from %d to %d on this stream", s.deviceID, a.GetDeviceId())
		}
		return grpcstatus.Errorf(codes.NotFound, "no device %d here (this switch is device %d)", a.GetDeviceId(), s.deviceID)
	}
	if a.GetRole().GetName() != "" {
		return grpcstatus.Errorf(codes.InvalidArgument, "role %q: this switch serves the default role only", a.GetRole().GetName())
	}
	eid, has := newU128(a.GetElectionId()), a.GetElectionId() != nil
	if has {
		for o := range s.ctrls {
			if o != c && o.hasEID && o.eid == eid {
				return grpcstatus.Errorf(codes.InvalidArgument, "election id %s is already used by another controller", eid)
			}
		}
	}
	wasPrimary := s.primary == c
	c.eid, c.hasEID = eid, has
	s.ctrls[c] = true
	if has && (!s.haveHighest || !eid.less(s.highest)) {
		s.highest, s.haveHighest = eid, true
		s.primary = c
		if !wasPrimary {
			s.notifyAll()
		} else {
			s.notify(c)
		}
		return nil
	}
	if wasPrimary {
		s.primary = nil
		s.notifyAll()
		return nil
	}
	s.notify(c)
	return nil
}

// leave forgets a closed stream; losing the primary is announced to the others.
func (s *Switch) leave(c *controller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ctrls, c)
	if s.primary == c {
		s.primary = nil
		s.notifyAll()
	}
}

func (s *Switch) notifyAll() {
	for c := range s.ctrls {
		s.notify(c)
	}
}

// notify sends c the arbitration state as the spec's advisory message; s.mu is held.
func (s *Switch) notify(c *controller) {
	a := &p4v1.MasterArbitrationUpdate{DeviceId: s.deviceID}
	if s.haveHighest {
		a.ElectionId = s.highest.proto()
	}
	switch {
	case s.primary == c:
		a.Status = &status.Status{Code: int32(codes.OK), Message: "primary"}
	case s.primary != nil:
		a.Status = &status.Status{Code: int32(codes.AlreadyExists), Message: "backup: another controller is primary"}
	default:
		a.Status = &status.Status{Code: int32(codes.NotFound), Message: "backup: there is no primary"}
	}
	c.send(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: a}})
}

// packetOut injects a controller's packet at the CPU port, with the packet_out header
// built from its metadata, so that the pipeline handles it as BMv2 does.
func (s *Switch) packetOut(c *controller, po *p4v1.PacketOut) {
	s.mu.Lock()
	primary := s.primary == c
	s.mu.Unlock()
	if !primary {
		c.send(streamError(codes.PermissionDenied, "only the primary controller may send packets", po))
		return
	}
	b := s.bind.Load()
	if b == nil {
		c.send(streamError(codes.FailedPrecondition, "no forwarding pipeline config", po))
		return
	}
	var port, pad uint64
	seen := 0
	for _, md := range po.GetMetadata() {
		var err error
		switch md.GetMetadataId() {
		case b.packetOut[0]:
			port, err = value(md.GetValue(), packetOutFields[0].bits, "packet_out egress_port")
			seen++
		case b.packetOut[1]:
			pad, err = value(md.GetValue(), packetOutFields[1].bits, "packet_out _pad")
		default:
			err = fmt.Errorf("packet_out has no metadata id %d", md.GetMetadataId())
		}
		if err != nil {
			c.send(streamError(codes.InvalidArgument, err.Error(), po))
			return
		}
	}
	if seen == 0 {
		c.send(streamError(codes.InvalidArgument, "packet_out metadata egress_port missing", po))
		return
	}
	frame := make([]byte, 0, lenCtrlHdr+len(po.GetPayload()))
	frame = append(frame, byte(port>>1), byte(port&1)<<7|byte(pad&0x7f))
	frame = append(frame, po.GetPayload()...)
	s.inject(s.cpuPort, frame)
}

// packetIn hands a frame that reached the CPU port (packet_in header first) to the
// primary; without one, or when it is not reading, the packet is dropped and counted.
func (s *Switch) packetIn(frame []byte) {
	b := s.bind.Load()
	if b == nil || len(frame) < lenCtrlHdr {
		s.stats.packetInDrops.Add(1)
		return
	}
	port := uint64(frame[0])<<1 | uint64(frame[1]>>7)
	pin := &p4v1.PacketIn{
		Payload: append([]byte(nil), frame[lenCtrlHdr:]...),
		Metadata: []*p4v1.PacketMetadata{
			{MetadataId: b.packetIn[0], Value: encodeUint(port)},
			{MetadataId: b.packetIn[1], Value: encodeUint(uint64(frame[1] & 0x7f))},
		},
	}
	s.mu.Lock()
	p := s.primary
	s.mu.Unlock()
	if p == nil || !p.send(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: pin}}) {
		s.stats.packetInDrops.Add(1)
	}
}
