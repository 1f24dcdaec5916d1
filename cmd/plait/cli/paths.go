package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newPathsCmd() *cobra.Command {
	var tunnel uint32
	cmd := &cobra.Command{
		Use:   "paths",
		Short: "Show every path as the controller sees it: state, capacity, delay, queue, loss, weight",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withController(cmd, func(ctx context.Context, c pb.ControllerClient) error {
				p, err := c.Paths(ctx, &pb.PathsRequest{TunnelId: tunnel})
				if err != nil {
					return err
				}
				return showPaths(cmd, p)
			})
		},
	}
	cmd.Flags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (default: all)")
	return cmd
}

// showPaths prints the controller's paths as --json asks.
func showPaths(cmd *cobra.Command, p *pb.PathsResponse) error {
	if wantJSON(cmd) {
		return printProto(cmd.OutOrStdout(), p)
	}
	return printPaths(cmd.OutOrStdout(), p)
}

func printPaths(w io.Writer, p *pb.PathsResponse) error {
	for _, d := range p.Directions {
		fmt.Fprintf(w, "tunnel %d %s -> %s: %s (%s), delivering %s, reordered %s (inter-path %s); %s\n",
			d.TunnelId, d.From, d.To, d.Mode, d.Control, fmtRate(d.GoodputBps), fmtPct(d.Reordered), fmtPct(d.InterPath), d.Reason)
		tb := newTable(w, "PATH", "STATE", "IN USE", "CAPACITY", "OWD", "QUEUE", "LOSS", "LATE", "WEIGHT", "RX RATE")
		for _, pv := range d.Paths {
			state := "up"
			if !pv.Up {
				state = "down"
			}
			tb.row(pv.Name, state, yesNo(pv.InUse), fmtRate(pv.CapacityBps), fmtUs(pv.OwdUs), fmtUs(pv.QueueUs),
				fmtPct(pv.Loss), fmtPct(pv.Late), fmt.Sprintf("%.3f", pv.Weight), fmtRate(pv.RxBps))
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	return nil
}
