package p4switch

import (
	"context"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	plaitv1 "github.com/plait/plait/api/plait/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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

// SetLink changes the fields of a port's link that the request sets; an invalid value
// changes nothing.
func (s *Switch) SetLink(_ context.Context, r *plaitv1.SetLinkRequest) (*plaitv1.Link, error) {
	if r.GetPort() > 0xffff || s.ports[uint16(r.GetPort())] == nil {
		return nil, status.Errorf(codes.NotFound, "no port %d (ports: %v)", r.GetPort(), s.portNumbers())
	}
	port := uint16(r.GetPort())
	s.linkMu.Lock()
	defer s.linkMu.Unlock()
	cur, _ := s.ports[port].link.snapshot()
	p := MergeLinkParams(cur, r.GetParams())
	if err := s.SetLinkParams(port, p); err != nil {
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
	return m
}
