package cli

import (
	"context"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newWeightsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "weights",
		Short: "Set a tunnel's split weights by hand, or hand them back to the controller",
	}
	var (
		tunnel uint32
		from   string
	)
	cmd.PersistentFlags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (needed when there are several)")
	cmd.PersistentFlags().StringVar(&from, "from", "", "with --controller: the sending host of the direction (default: the tunnel's first host)")
	set := &cobra.Command{
		Use:   "set W1 W2 ...",
		Short: "Set wrr weights, one per path in path order (switches the tunnel to wrr)",
		Long: `Set wrr weights, one per path in path order. With --controller the controller holds them
until 'plait weights auto'; without, they go straight to the agent's datapath.`,
		Example: "  plait weights set 1 2 3\n  plait --controller /run/plait/controller.sock weights set 5,2,7",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := parseWeights(args)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			if viaController(cmd) {
				return controllerWeights(cmd, tunnel, from, w)
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				t, err := c.SetWeights(ctx, &pb.SetWeightsRequest{TunnelId: tunnel, Weights: w})
				if err == nil && t.Config.Mode != pb.Mode_MODE_WRR {
					t, err = c.SetMode(ctx, &pb.SetModeRequest{TunnelId: tunnel, Mode: pb.Mode_MODE_WRR})
				}
				if err != nil {
					return err
				}
				return printTunnels(cmd, []*pb.Tunnel{t})
			})
		},
	}
	auto := &cobra.Command{
		Use:   "auto",
		Short: "Hand a direction's weights back to the controller's automatic control",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return controllerWeights(cmd, tunnel, from, nil)
		},
	}
	cmd.AddCommand(set, auto)
	return cmd
}

func controllerWeights(cmd *cobra.Command, tunnel uint32, from string, w []float64) error {
	return withController(cmd, func(ctx context.Context, c pb.ControllerClient) error {
		p, err := c.SetWeights(ctx, &pb.ControllerWeightsRequest{TunnelId: tunnel, From: from, Weights: w})
		if err != nil {
			return err
		}
		return showPaths(cmd, p)
	})
}
