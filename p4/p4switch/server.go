package p4switch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/mmtrace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Register serves the switch's P4Runtime and LinkEmulation services on g (a link
// element, which has no pipeline, LinkEmulation only).
func (s *Switch) Register(g *grpc.Server) {
	if s.peer == nil {
		p4v1.RegisterP4RuntimeServer(g, p4rtServer{s: s})
	}
	plaitv1.RegisterLinkEmulationServer(g, linkServer{s: s})
}

type p4rtServer struct {
	p4v1.UnimplementedP4RuntimeServer
	s *Switch
}

func (a p4rtServer) Write(ctx context.Context, r *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	return a.s.Write(ctx, r)
}

func (a p4rtServer) Read(r *p4v1.ReadRequest, st p4v1.P4Runtime_ReadServer) error {
	return a.s.Read(r, st.Send)
}

func (a p4rtServer) SetForwardingPipelineConfig(ctx context.Context, r *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	return a.s.SetForwardingPipelineConfig(ctx, r)
}

func (a p4rtServer) GetForwardingPipelineConfig(ctx context.Context, r *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	return a.s.GetForwardingPipelineConfig(ctx, r)
}

func (a p4rtServer) StreamChannel(st p4v1.P4Runtime_StreamChannelServer) error {
	return a.s.StreamChannel(st)
}

func (a p4rtServer) Capabilities(ctx context.Context, r *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return a.s.Capabilities(ctx, r)
}

type linkServer struct {
	plaitv1.UnimplementedLinkEmulationServer
	s *Switch
}

func (a linkServer) SetLink(ctx context.Context, r *plaitv1.SetLinkRequest) (*plaitv1.Link, error) {
	return a.s.SetLink(ctx, r)
}

func (a linkServer) GetLinks(ctx context.Context, r *plaitv1.GetLinksRequest) (*plaitv1.GetLinksResponse, error) {
	return a.s.GetLinks(ctx, r)
}

// ElectionIDKey is the gRPC metadata key a LinkEmulation client puts its P4Runtime
// election id under ("LOW" or "HIGH:LOW", decimal).
const ElectionIDKey = "p4-election-id"

// checkLinkWriter admits a link change as P4Runtime admits a Write: while a controller
// is primary only it may make one, naming its election id (ElectionIDKey). With no
// primary the endpoint's own access control (mutual TLS off loopback) is all.
func (s *Switch) checkLinkWriter(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.primary == nil {
		return nil
	}
	vals := metadata.ValueFromIncomingContext(ctx, ElectionIDKey)
	if len(vals) == 0 {
		return status.Errorf(codes.PermissionDenied, "a controller with election id %s is primary: only it may change links (give its election id, e.g. plait link set --election-id %s)", s.primary.eid, s.primary.eid)
	}
	eid, err := ParseElectionID(vals[0])
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if newU128(eid) != s.primary.eid {
		return status.Errorf(codes.PermissionDenied, "election id %s is not the primary's (%s): only the primary may change links", newU128(eid), s.primary.eid)
	}
	return nil
}

// ParseElectionID reads "LOW" or "HIGH:LOW".
func ParseElectionID(v string) (*p4v1.Uint128, error) {
	hi, lo, two := strings.Cut(v, ":")
	if !two {
		hi, lo = "0", v
	}
	h, err1 := strconv.ParseUint(hi, 10, 64)
	l, err2 := strconv.ParseUint(lo, 10, 64)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("election id %q: give LOW or HIGH:LOW in decimal", v)
	}
	return &p4v1.Uint128{High: h, Low: l}, nil
}

// SetLink changes the fields of a port's link that the request sets; an invalid value
// changes nothing.
func (s *Switch) SetLink(ctx context.Context, r *plaitv1.SetLinkRequest) (*plaitv1.Link, error) {
	if err := s.checkLinkWriter(ctx); err != nil {
		return nil, err
	}
	if r.GetPort() > 0xffff || s.ports[uint16(r.GetPort())] == nil {
		return nil, status.Errorf(codes.NotFound, "no port %d (ports: %v)", r.GetPort(), s.portNumbers())
	}
	port := uint16(r.GetPort())
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	cur, _ := s.ports[port].link.snapshot()
	p := MergeLinkParams(cur, r.GetParams())
	if err := p.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf("port %d: %v", port, err))
	}
	if at := r.GetAtUnixNano(); at != 0 {
		// The fields are merged at the change's time, into the parameters then in force.
		m := r.GetParams()
		s.ScheduleLinkChange(port, s.now()+at-time.Now().UnixNano(), func(p LinkParams) (LinkParams, error) {
			return MergeLinkParams(p, m), nil
		})
	} else if err := s.SetLinkParams(port, p); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	links, _ := s.GetLinks(context.Background(), &plaitv1.GetLinksRequest{Port: r.GetPort()})
	return links.GetLinks()[0], nil
}

// GetLinks describes one port's link (port != 0) or all.
func (s *Switch) GetLinks(_ context.Context, r *plaitv1.GetLinksRequest) (*plaitv1.GetLinksResponse, error) {
	if r.GetPort() != 0 && (r.GetPort() > 0xffff || s.ports[uint16(r.GetPort())] == nil) {
		return nil, status.Errorf(codes.NotFound, "no port %d (ports: %v)", r.GetPort(), s.portNumbers())
	}
	resp := &plaitv1.GetLinksResponse{}
	for _, pi := range s.Ports() {
		if r.GetPort() != 0 && uint32(pi.Port) != r.GetPort() {
			continue
		}
		resp.Links = append(resp.Links, &plaitv1.Link{
			Port: uint32(pi.Port), Interface: pi.Interface, Params: LinkParamsProto(pi.Params),
			Stats: &plaitv1.LinkStats{
				TxPackets: pi.Stats.TxPackets, TxBytes: pi.Stats.TxBytes, QueueDrops: pi.Stats.QueueDrops,
				LossDrops: pi.Stats.LossDrops, DownDrops: pi.Stats.DownDrops, QueueDepth: uint32(pi.Stats.QueueDepth),
				LateOverOneMs: pi.Stats.Late1ms, LateOverFiveMs: pi.Stats.Late5ms, LateMaxUs: uint32(pi.Stats.LateMax.Microseconds()),
				ChangesRefused: pi.Stats.ChangesRefused, LossBursts: pi.Stats.LossBursts,
			},
		})
	}
	return resp, nil
}

// MergeLinkParams applies the fields m sets to p.
func MergeLinkParams(p LinkParams, m *plaitv1.LinkParams) LinkParams {
	if m == nil {
		return p
	}
	if m.RateBps != nil {
		p.RateBps = m.GetRateBps()
	}
	if m.DelayUs != nil {
		p.Delay = time.Duration(m.GetDelayUs()) * time.Microsecond
	}
	if m.JitterUs != nil {
		p.Jitter = time.Duration(m.GetJitterUs()) * time.Microsecond
	}
	if m.Reorder != nil {
		p.Reorder = m.GetReorder()
	}
	if m.LossPercent != nil {
		p.LossPercent = m.GetLossPercent()
		p.GE = nil
	}
	if ge := m.GetGilbertElliott(); ge != nil {
		p.GE = &GilbertElliott{ge.GetPGoodToBad(), ge.GetPBadToGood(), ge.GetLossGood(), ge.GetLossBad()}
	}
	if m.QueuePackets != nil {
		p.QueuePackets = m.GetQueuePackets()
	}
	if m.Down != nil {
		p.Down = m.GetDown()
	}
	if tr := m.GetTrace(); tr != nil {
		p.Trace = nil
		if len(tr.GetOpportunitiesMs()) > 0 {
			p.Trace = &LinkTrace{Trace: &mmtrace.Trace{Name: tr.GetName(), Ms: tr.GetOpportunitiesMs()},
				Offset: time.Duration(tr.GetOffsetUs()) * time.Microsecond}
		}
	}
	return p
}

// LinkParamsProto is p with every field set (queue_packets as the limit in force).
func LinkParamsProto(p LinkParams) *plaitv1.LinkParams {
	q := p.QueuePackets
	if q == 0 {
		q = DefaultQueuePackets
	}
	delay, jitter := uint64(p.Delay/time.Microsecond), uint64(p.Jitter/time.Microsecond)
	m := &plaitv1.LinkParams{
		RateBps: &p.RateBps, DelayUs: &delay, JitterUs: &jitter, Reorder: &p.Reorder,
		LossPercent: &p.LossPercent, QueuePackets: &q, Down: &p.Down,
	}
	if p.GE != nil {
		m.GilbertElliott = &plaitv1.GilbertElliott{PGoodToBad: p.GE.PGoodToBad, PBadToGood: p.GE.PBadToGood, LossGood: p.GE.LossGood, LossBad: p.GE.LossBad}
	}
	if tr := p.Trace; tr != nil { // described, not listed
		m.Trace = &plaitv1.Trace{Name: tr.Name, OffsetUs: uint64(tr.Offset / time.Microsecond),
			Opportunities: uint32(len(tr.Ms)), PeriodMs: uint64(tr.Period() / time.Millisecond)}
	}
	return m
}
