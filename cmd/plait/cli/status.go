package cli

import (
	"cmp"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the controller's agents and switches and whether it reaches them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var st *pb.StatusResponse
			err := withController(cmd, func(ctx context.Context, c pb.ControllerClient) (err error) {
				st, err = c.Status(ctx, &pb.StatusRequest{})
				return err
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if wantJSON(cmd) {
				return printProto(w, st)
			}
			fmt.Fprintf(w, "controller up %.0fs, interval %.0fms, metrics on %s\n", st.UptimeS, st.IntervalS*1000, st.MetricsAddress)
			tb := newTable(w, "AGENT", "SOCKET", "CONNECTED", "RECONNECTS", "LAST ERROR")
			for _, a := range st.Agents {
				tb.row(a.Name, a.Socket, yesNo(a.Connected), fmt.Sprint(a.Reconnects), a.LastError)
			}
			if err := tb.flush(); err != nil {
				return err
			}
			// ELECTION: ours / the primary's; RECONCILE: pipeline pushes / Write RPCs /
			// deletes reprogramming took (a switch that kept its state costs 0/0/0).
			tb = newTable(w, "SWITCH", "ADDRESS", "PRIMARY", "ELECTION", "LOST", "ENTRIES", "PROGRAMMED", "RECONCILE", "LAST ERROR")
			for _, s := range st.Switches {
				tb.row(s.Name, s.Address, yesNo(s.Primary), fmt.Sprintf("%d/%s", s.ElectionId, cmp.Or(s.PrimaryElectionId, "-")), fmt.Sprint(s.PrimaryLost),
					fmt.Sprint(s.Entries), fmt.Sprint(s.Programmed), fmt.Sprintf("%d/%d/%d", s.PipelinePushes, s.WriteRpcs, s.Deletes), s.LastError)
			}
			return tb.flush()
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
