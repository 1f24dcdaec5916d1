package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/topo/scenario"
)

func newPathCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "path",
		Short: "Take paths up or down, send the ACKs on one, and give edpf their rate and delay",
	}
	var tunnel uint32
	cmd.PersistentFlags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (needed when the host has several)")
	for _, up := range []bool{true, false} {
		verb, short := "up", "Let a path carry packets again"
		if !up {
			verb, short = "down", "Stop sending on a path (it gets no packets until it is up again)"
		}
		cmd.AddCommand(&cobra.Command{
			Use:   verb + " NAME",
			Short: short,
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
					t, err := c.SetPathState(ctx, &pb.SetPathStateRequest{TunnelId: tunnel, Path: args[0], Up: up})
					if err != nil {
						return err
					}
					return printTunnels(cmd, []*pb.Tunnel{t})
				})
			},
		})
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "acks NAME|none",
		Short: "Send every ACK-sized packet on one path (none: by the mode, like the rest)",
		Long: `Send every ACK-sized packet (IPv4 and TCP headers only) on one path, whatever the mode.
For the ACKs of a flow striped the other way over paths of different delays, pick a path
that makes the round trip longer than the delay skew: TCP then takes the reordering for
what it is. The controller picks it on its own for directions under automatic control.`,
		Example: "  plait path acks lte\n  plait path acks none",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if path == "none" {
				path = ""
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				t, err := c.SetAckPath(ctx, &pb.SetAckPathRequest{TunnelId: tunnel, Path: path})
				if err != nil {
					return err
				}
				return printTunnels(cmd, []*pb.Tunnel{t})
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:     "estimate RATE/DELAY ...",
		Short:   "Give edpf each path's capacity and one-way delay, in path order",
		Example: "  plait path estimate 5mbit/100ms 2mbit/10ms 7mbit/50ms",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &pb.SetPathEstimatesRequest{TunnelId: tunnel}
			for _, a := range args {
				rs, ds, ok := strings.Cut(a, "/")
				if !ok {
					return usagef(cmd, "%q is not RATE/DELAY, e.g. 5mbit/100ms", a)
				}
				r, err := scenario.ParseRate(rs)
				if err != nil {
					return usagef(cmd, "%q: %v", a, err)
				}
				d, err := scenario.ParseDuration(ds)
				if err != nil {
					return usagef(cmd, "%q: %v", a, err)
				}
				req.Estimates = append(req.Estimates, &pb.PathEstimate{RateBps: r, DelayUs: float64(d.Microseconds())})
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				t, err := c.SetPathEstimates(ctx, req)
				if err != nil {
					return err
				}
				return printTunnels(cmd, []*pb.Tunnel{t})
			})
		},
	})
	return cmd
}
