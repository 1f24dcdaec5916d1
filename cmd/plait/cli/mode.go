package cli

import (
	"context"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newModeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mode",
		Short: "Set a tunnel's scheduler",
	}
	var (
		tunnel uint32
		from   string
	)
	set := &cobra.Command{
		Use:   "set auto|rr|wrr|edpf",
		Short: "Set the scheduler: rr (round robin), wrr (weighted), edpf (earliest delivery); auto (controller)",
		Long: `Set the scheduler. With --controller, the controller holds the mode until 'mode set auto'
(rr and wrr then take dead paths out only; edpf keeps being fed estimates). Without, the
mode goes straight to the agent's datapath.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"auto", "rr", "wrr", "edpf"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if viaController(cmd) {
				return withController(cmd, func(ctx context.Context, c pb.ControllerClient) error {
					p, err := c.SetMode(ctx, &pb.ControllerModeRequest{TunnelId: tunnel, From: from, Mode: args[0]})
					if err != nil {
						return err
					}
					return showPaths(cmd, p)
				})
			}
			if args[0] == "auto" {
				return usagef(cmd, "auto needs a controller: give --controller SOCKET")
			}
			m, err := parseMode(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				t, err := c.SetMode(ctx, &pb.SetModeRequest{TunnelId: tunnel, Mode: m})
				if err != nil {
					return err
				}
				return printTunnels(cmd, []*pb.Tunnel{t})
			})
		},
	}
	set.Flags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (needed when there are several)")
	set.Flags().StringVar(&from, "from", "", "with --controller: the sending host of the direction")
	cmd.AddCommand(set)
	return cmd
}
