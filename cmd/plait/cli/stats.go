package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	pb "github.com/plait/plait/api/plait/v1"
)

func newStatsCmd() *cobra.Command {
	var (
		tunnel   uint32
		interval string
		watch    bool
	)
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show what each path carried and what the receiver measured",
		Long: `Show per-path statistics of a host's tunnels: bytes and shares sent on each path, and,
for traffic arriving from the peer, delivery rate, one-way delay, jitter, losses, and the
tunnel's reordering (RFC 4737) split into inter-path (delay skew) and intra-path (loss or
jitter within a path). Rates and delays cover the last --interval.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseDuration(cmd, "interval", interval)
			if err != nil {
				return err
			}
			req := &pb.StatsRequest{TunnelId: tunnel, IntervalMs: uint32(d.Milliseconds())}
			if !watch {
				return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
					st, err := c.GetStats(ctx, req)
					if err != nil {
						return err
					}
					return printStats(cmd, st)
				})
			}
			c, done, err := agentClient(cmd)
			if err != nil {
				return err
			}
			defer done()
			stream, err := c.WatchStats(cmd.Context(), req)
			if err != nil {
				return explain(err)
			}
			for {
				st, err := stream.Recv()
				if err != nil {
					if cmd.Context().Err() != nil {
						return nil
					}
					return explain(err)
				}
				if err := printStats(cmd, st); err != nil {
					return err
				}
			}
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&tunnel, "tunnel", 0, "tunnel id (default: all)")
	f.StringVar(&interval, "interval", "1s", "window for rates and delays (at most 10s)")
	f.BoolVar(&watch, "watch", false, "print again every interval until interrupted")
	return cmd
}

func printStats(cmd *cobra.Command, st *pb.Stats) error {
	w := cmd.OutOrStdout()
	if wantJSON(cmd) {
		return printProto(w, st)
	}
	for _, t := range st.Tunnels {
		if err := printTunnelStats(w, t); err != nil {
			return err
		}
	}
	printDrops(w, "sender", st.Sender)
	printDrops(w, "receiver", st.Receiver)
	return nil
}

// printDrops lists a program's drop counters that are not zero, by reason: refused
// packets (an unknown peer, a bad tag, a replay) show here, not only in --json.
func printDrops(w io.Writer, prog string, verdicts map[string]uint64) {
	var reasons []string
	for _, name := range slices.Sorted(maps.Keys(verdicts)) {
		if n := verdicts[name]; n > 0 && strings.HasPrefix(name, "drop_") {
			reasons = append(reasons, fmt.Sprintf("%s %d", strings.TrimPrefix(name, "drop_"), n))
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintf(w, "%s dropped, since the datapath was loaded: %s\n", prog, strings.Join(reasons, ", "))
	}
}

func printTunnelStats(w io.Writer, t *pb.TunnelStats) error {
	r := t.Reorder
	fmt.Fprintf(w, "tunnel %d over %.1fs: received %d, reordered %s (inter-path %d, intra-path %d, 3-reordered %d), late mean %s max %s\n",
		t.TunnelId, t.IntervalS, r.Received, fmtPct(r.ReorderedRatio), r.InterPath, r.IntraPath, r.ThreeReordered,
		fmtUs(r.LateTimeMeanUs), fmtUs(r.LateTimeMaxUs))
	if q := t.Resequencer; q != nil {
		fmt.Fprintf(w, "resequencer, hold %s: released in order %d, at the bound %d, as proven lost %d, skipped %d; late %d, ACKs passed %d, passed in their flow's order %d, holes %d, held %d, dropped %d\n",
			fmtUs(q.HoldUs), q.InOrder, q.Bound, q.Lost, q.Skipped, q.Late, q.Passed, q.Ahead, q.Holes, q.Held, q.Dropped)
	}
	if q := t.Repair; q != nil {
		fmt.Fprintf(w, "repair, wait %s: gaps %d, asked %d, left to TCP as congestion %d, repairs taken %d; kept %d, resent %d, not kept %d\n",
			fmtUs(q.WaitUs), q.Gaps, q.Asked, q.Congested, q.Received, q.Kept, q.Resent, q.Missing)
	}
	var txTotal uint64
	for _, p := range t.Paths {
		txTotal += p.TxBytes
	}
	tb := newTable(w, "PATH", "STATE", "TX SHARE", "TX RATE", "RX RATE", "OWD MIN", "OWD MEAN", "JITTER", "LOST", "LATE", "PAIR RATE", "LAST RX", "PEER PORT")
	for _, p := range t.Paths {
		state := "up"
		if !p.Up {
			state = "down"
		}
		share := 0.0
		if txTotal > 0 {
			share = float64(p.TxBytes) / float64(txTotal)
		}
		tb.row(p.Name, state, fmtPct(share), fmtRate(p.TxBps), fmtRate(p.RxBps), fmtUs(p.OwdMinUs), fmtUs(p.OwdMeanUs),
			fmtUs(p.JitterUs), fmt.Sprint(p.Lost), fmt.Sprint(p.Late), fmtRate(p.DispersionBps), fmtMs(p.LastRxAgeMs), fmtPort(p))
	}
	return tb.flush()
}

func fmtMs(ms float64) string { return fmtUs(ms * 1000) }

// fmtPort is where the path's packets go: the tunnel's port, or one learned from the
// peer's packets (a NAT rewrote it); "-" on a receive-only tunnel, which sends nothing.
func fmtPort(p *pb.PathStats) string {
	if p.PeerPort == 0 {
		return "-"
	}
	if p.PeerPortLearned {
		return fmt.Sprintf("%d learned", p.PeerPort)
	}
	return fmt.Sprint(p.PeerPort)
}
