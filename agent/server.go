package agent

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
)

// DefaultSocket is where the agent listens unless told otherwise.
const DefaultSocket = "/run/plait/agent.sock"

// server adapts the Agent to the generated gRPC interface, one line a method. It embeds
// the Unsafe marker rather than the Unimplemented server, so that a method added to the
// service and not here fails to compile instead of answering Unimplemented.
type server struct {
	pb.UnsafeAgentServer
	a *Agent
}

func (s server) Configure(ctx context.Context, r *pb.TunnelConfig) (*pb.Tunnel, error) {
	return s.a.Configure(ctx, r)
}
func (s server) RemoveTunnel(ctx context.Context, r *pb.TunnelRef) (*pb.Empty, error) {
	return s.a.RemoveTunnel(ctx, r)
}
func (s server) ListTunnels(ctx context.Context, r *pb.Empty) (*pb.ListTunnelsResponse, error) {
	return s.a.ListTunnels(ctx, r)
}
func (s server) SetWeights(ctx context.Context, r *pb.SetWeightsRequest) (*pb.Tunnel, error) {
	return s.a.SetWeights(ctx, r)
}
func (s server) SetMode(ctx context.Context, r *pb.SetModeRequest) (*pb.Tunnel, error) {
	return s.a.SetMode(ctx, r)
}
func (s server) SetAckPath(ctx context.Context, r *pb.SetAckPathRequest) (*pb.Tunnel, error) {
	return s.a.SetAckPath(ctx, r)
}
func (s server) SetPathState(ctx context.Context, r *pb.SetPathStateRequest) (*pb.Tunnel, error) {
	return s.a.SetPathState(ctx, r)
}
func (s server) Signal(ctx context.Context, r *pb.TunnelRef) (*pb.Tunnel, error) {
	return s.a.Signal(ctx, r)
}
func (s server) SetSignalTrigger(ctx context.Context, r *pb.SetSignalTriggerRequest) (*pb.Tunnel, error) {
	return s.a.SetSignalTrigger(ctx, r)
}
func (s server) SetWindowKept(ctx context.Context, r *pb.SetWindowKeptRequest) (*pb.Tunnel, error) {
	return s.a.SetWindowKept(ctx, r)
}
func (s server) SetPathEstimates(ctx context.Context, r *pb.SetPathEstimatesRequest) (*pb.Tunnel, error) {
	return s.a.SetPathEstimates(ctx, r)
}
func (s server) SetKeys(ctx context.Context, r *pb.SetKeysRequest) (*pb.Tunnel, error) {
	return s.a.SetKeys(ctx, r)
}
func (s server) GetStats(ctx context.Context, r *pb.StatsRequest) (*pb.Stats, error) {
	return s.a.GetStats(ctx, r)
}
func (s server) WatchStats(r *pb.StatsRequest, stream grpc.ServerStreamingServer[pb.Stats]) error {
	return s.a.WatchStats(stream.Context(), r, stream.Send)
}

// Serve serves the agent's API on every claimed address until ctx ends; the first to
// fail stops the others.
func Serve(ctx context.Context, a *Agent, srvs ...*sockrpc.Server) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(srvs))
	for _, s := range srvs {
		pb.RegisterAgentServer(s, server{a: a})
		go func() { errc <- s.Serve(ctx) }()
	}
	err := <-errc
	cancel()
	for range len(srvs) - 1 {
		err = errors.Join(err, <-errc)
	}
	return err
}

// Dial connects to an agent at target (unix:PATH, a path, or HOST:PORT), with TLS when
// t names any file.
func Dial(target string, t sockrpc.TLS) (pb.AgentClient, *grpc.ClientConn, error) {
	conn, err := sockrpc.Dial(target, t)
	if err != nil {
		return nil, nil, fmt.Errorf("agent: %w", err)
	}
	return pb.NewAgentClient(conn), conn, nil
}
