package cli

import (
	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newModeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mode",
		Short: "Set a tunnel's scheduler",
	}
	var tunnel uint32
	set := &cobra.Command{
		Use:       "set rr|wrr|edpf",
		Short:     "Set the scheduler: rr (round robin), wrr (weighted), edpf (earliest delivery)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"rr", "wrr", "edpf"},
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseMode(args[0])
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
			t, err := c.SetMode(ctx, &pb.SetModeRequest{TunnelId: tunnel, Mode: m})
			if err != nil {
				return explain(err)
			}
			return printTunnels(cmd, []*pb.Tunnel{t})
		},
	}
	set.Flags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (needed when the host has several)")
	cmd.AddCommand(set)
	return cmd
}
