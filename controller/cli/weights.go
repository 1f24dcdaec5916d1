package cli

import (
	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newWeightsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "weights",
		Short: "Set the split weights of a tunnel's paths",
	}
	var tunnel uint32
	set := &cobra.Command{
		Use:     "set W1 W2 ...",
		Short:   "Set wrr weights, one per path in path order (switches the tunnel to wrr)",
		Example: "  plait weights set 1 2 3\n  plait weights set 5,2,7 --tunnel 1",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := parseWeights(args)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			c, done, err := agentClient(cmd)
			if err != nil {
				return err
			}
			defer done()
			ctx, cancel := callCtx(cmd)
			defer cancel()
			t, err := c.SetWeights(ctx, &pb.SetWeightsRequest{TunnelId: tunnel, Weights: w})
			if err != nil {
				return explain(err)
			}
			if t.Config.Mode != pb.Mode_MODE_WRR {
				if t, err = c.SetMode(ctx, &pb.SetModeRequest{TunnelId: tunnel, Mode: pb.Mode_MODE_WRR}); err != nil {
					return explain(err)
				}
			}
			return printTunnels(cmd, []*pb.Tunnel{t})
		},
	}
	set.Flags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (needed when the host has several)")
	cmd.AddCommand(set)
	return cmd
}
