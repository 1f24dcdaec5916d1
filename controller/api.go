package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/split"
)

// DefaultSocket is where the controller serves its operator API unless told otherwise.
const DefaultSocket = "/run/plait/controller.sock"

// Status reports the controller's connections.
func (c *Controller) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	out := &pb.StatusResponse{IntervalS: c.net.Interval.Seconds(), UptimeS: time.Since(c.start).Seconds(), MetricsAddress: c.opts.metrics}
	for _, name := range sortedKeys(c.agents) {
		out.Agents = append(out.Agents, c.agents[name].status())
	}
	for _, name := range sortedKeys(c.switches) {
		out.Switches = append(out.Switches, c.switches[name].status())
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Paths reports what the controller believes of every path and what it decided.
func (c *Controller) Paths(_ context.Context, req *pb.PathsRequest) (*pb.PathsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := &pb.PathsResponse{}
	for _, d := range c.dirs {
		if req.TunnelId == 0 || d.tunnel.ID == req.TunnelId {
			v := d.view()
			if _, held := c.adopted[d]; held {
				v.Measuring = true
			}
			out.Directions = append(out.Directions, v)
		}
	}
	if req.TunnelId != 0 && len(out.Directions) == 0 {
		return nil, status.Errorf(codes.NotFound, "the controller steers no tunnel %d", req.TunnelId)
	}
	return out, nil
}

// WatchPaths sends Paths every interval until ctx ends.
func (c *Controller) WatchPaths(ctx context.Context, req *pb.PathsRequest, send func(*pb.PathsResponse) error) error {
	period := time.Duration(req.IntervalMs) * time.Millisecond
	if period == 0 {
		period = time.Second
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		p, err := c.Paths(ctx, req)
		if err != nil {
			return err
		}
		if err := send(p); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// SetWeights fixes a direction's wrr weights, or with none hands it back to automatic
// control. The new split reaches the datapath at once.
func (c *Controller) SetWeights(ctx context.Context, req *pb.ControllerWeightsRequest) (*pb.PathsResponse, error) {
	c.mu.Lock()
	d, err := c.findDirection(req.TunnelId, req.From)
	if err != nil {
		c.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	if len(req.Weights) == 0 {
		d.override, d.manual = "auto", nil
	} else {
		if err := split.Check(req.Weights, len(d.paths)); err != nil {
			c.mu.Unlock()
			return nil, status.Errorf(codes.InvalidArgument, "%v (paths: %v)", err, d.paths)
		}
		d.override, d.manual = "wrr", slices.Clone(req.Weights)
	}
	c.mu.Unlock()
	c.step(ctx, true)
	return c.Paths(ctx, &pb.PathsRequest{TunnelId: d.tunnel.ID})
}

// SetMode fixes a direction's scheduler, or "auto" hands it back to the controller.
func (c *Controller) SetMode(ctx context.Context, req *pb.ControllerModeRequest) (*pb.PathsResponse, error) {
	if !slices.Contains([]string{"auto", "rr", "wrr", "edpf"}, req.Mode) {
		return nil, status.Errorf(codes.InvalidArgument, "unknown mode %q: use auto, rr, wrr or edpf", req.Mode)
	}
	c.mu.Lock()
	d, err := c.findDirection(req.TunnelId, req.From)
	if err != nil {
		c.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	if d.split != nil && (req.Mode == "rr" || req.Mode == "edpf") {
		c.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "%s is split by switch %s, which only does weighted slots: use wrr or auto", d.name(), d.split.sw.cfg.Name)
	}
	d.override = req.Mode
	if req.Mode != "wrr" {
		d.manual = nil
	}
	c.mu.Unlock()
	c.step(ctx, true)
	return c.Paths(ctx, &pb.PathsRequest{TunnelId: d.tunnel.ID})
}

type server struct {
	pb.UnsafeControllerServer
	c *Controller
}

func (s server) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	return s.c.Status(ctx, r)
}
func (s server) Paths(ctx context.Context, r *pb.PathsRequest) (*pb.PathsResponse, error) {
	return s.c.Paths(ctx, r)
}
func (s server) WatchPaths(r *pb.PathsRequest, stream grpc.ServerStreamingServer[pb.PathsResponse]) error {
	return s.c.WatchPaths(stream.Context(), r, stream.Send)
}
func (s server) SetWeights(ctx context.Context, r *pb.ControllerWeightsRequest) (*pb.PathsResponse, error) {
	return s.c.SetWeights(ctx, r)
}
func (s server) SetMode(ctx context.Context, r *pb.ControllerModeRequest) (*pb.PathsResponse, error) {
	return s.c.SetMode(ctx, r)
}

// Serve serves the operator API on a claimed address until ctx ends.
func Serve(ctx context.Context, c *Controller, s *sockrpc.Server) error {
	pb.RegisterControllerServer(s, server{c: c})
	return s.Serve(ctx)
}

// Dial connects to a controller at target (unix:PATH, a path, or HOST:PORT), with TLS
// when t names any file.
func Dial(target string, t sockrpc.TLS) (pb.ControllerClient, *grpc.ClientConn, error) {
	conn, err := sockrpc.Dial(target, t)
	if err != nil {
		return nil, nil, fmt.Errorf("controller: %w", err)
	}
	return pb.NewControllerClient(conn), conn, nil
}
