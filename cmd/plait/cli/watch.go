package cli

import (
	"bytes"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newWatchCmd() *cobra.Command {
	var (
		tunnel   uint32
		interval string
	)
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Live view of the controller's paths, refreshed until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseDuration(cmd, "interval", interval)
			if err != nil {
				return err
			}
			c, done, err := controllerClient(cmd)
			if err != nil {
				return err
			}
			defer done()
			stream, err := c.WatchPaths(cmd.Context(), &pb.PathsRequest{TunnelId: tunnel, IntervalMs: uint32(d.Milliseconds())})
			if err != nil {
				return explain(err)
			}
			w := cmd.OutOrStdout()
			for {
				p, err := stream.Recv()
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					return explain(err)
				}
				if wantJSON(cmd) {
					if err := printProto(w, p); err != nil {
						return err
					}
					continue
				}
				// Draw the frame off-screen first so the terminal never shows half of it.
				var frame bytes.Buffer
				fmt.Fprintf(&frame, "\x1b[H\x1b[2Jplait watch  %s  (every %v, Ctrl-C to stop)\n\n", time.Now().Format("15:04:05"), d)
				if err := printPaths(&frame, p); err != nil {
					return err
				}
				w.Write(frame.Bytes())
			}
		},
	}
	cmd.Flags().Uint32Var(&tunnel, "tunnel", 0, "tunnel id (default: all)")
	cmd.Flags().StringVar(&interval, "interval", "1s", "refresh period")
	return cmd
}
