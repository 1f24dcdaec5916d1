package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	plaitv1 "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/p4/p4switch"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
)

func newLinkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Show or change the links a running switch emulates",
	}
	cmd.AddCommand(newLinkSetCmd(), newLinkShowCmd())
	return cmd
}

// dialSwitch connects to a switch's LinkEmulation service, with TLS when --tls-* name
// files.
func dialSwitch(cmd *cobra.Command, addr string) (plaitv1.LinkEmulationClient, func(), error) {
	conn, err := sockrpc.Dial(addr, tlsFlags(cmd))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to switch %s: %w", addr, err)
	}
	return plaitv1.NewLinkEmulationClient(conn), func() { conn.Close() }, nil
}

func newLinkSetCmd() *cobra.Command {
	var (
		addr       string
		electionID string
		port       uint32
		jsonOut    bool
		setFlags   = []string{"rate", "delay", "jitter", "loss", "queue", "reorder", "down", "ge", "trace", "trace-offset"}
		at         float64
		in         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Change a port's link; flags not given keep their values",
		Example: `  plait link set --switch 127.0.0.1:9559 --port 2 --rate 10mbit --delay 50ms
  plait link set --switch 127.0.0.1:9559 --port 2 --down
  plait link set --switch 127.0.0.1:9559 --port 2 --loss 1 --ge 0.01/0.3/0/0.5
  plait link set --switch 127.0.0.1:9559 --port 2 --trace ../shared/reference/traces/Verizon-LTE-short.down --rate 0bit
  plait link set --switch 127.0.0.1:9559 --port 2 --down --in 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if port == 0 {
				return usagef(cmd, "--port is required")
			}
			p := &plaitv1.LinkParams{}
			changed := 0
			for _, name := range setFlags {
				f := cmd.Flags().Lookup(name)
				if !f.Changed {
					continue
				}
				changed++
				if err := setLinkField(p, name, f.Value.String()); err != nil {
					return usagef(cmd, "--%s: %v", name, err)
				}
			}
			if up, _ := cmd.Flags().GetBool("up"); up {
				down := false
				p.Down = &down
				changed++
			}
			if changed == 0 {
				return usagef(cmd, "nothing to change: give at least one of --rate, --delay, --jitter, --loss, --ge, --queue, --reorder, --down, --up, --trace")
			}
			if err := checkLinkTrace(p); err != nil {
				return usagef(cmd, "--%v", err)
			}
			req := &plaitv1.SetLinkRequest{Port: port, Params: p}
			switch {
			case at > 0 && in > 0:
				return usagef(cmd, "give --at or --in, not both")
			case at > 0:
				req.AtUnixNano = int64(at * 1e9)
			case in > 0:
				req.AtUnixNano = time.Now().Add(in).UnixNano()
			}
			client, closeConn, err := dialSwitch(cmd, addr)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			if electionID != "" {
				if _, err := p4switch.ParseElectionID(electionID); err != nil {
					return usagef(cmd, "--election-id: %v", err)
				}
				ctx = metadata.AppendToOutgoingContext(ctx, p4switch.ElectionIDKey, electionID)
			}
			l, err := client.SetLink(ctx, req)
			if err != nil {
				return fmt.Errorf("set link on %s port %d: %s", addr, port, sockrpc.Explain(err.Error()))
			}
			return printLinks(cmd, []*plaitv1.Link{l}, jsonOut)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "switch", "127.0.0.1:9559", "switch gRPC address")
	f.Uint32Var(&port, "port", 0, "switch port")
	f.StringVar(&electionID, "election-id", "", "while a controller is primary on the switch, only its P4Runtime election id (LOW or HIGH:LOW) may change links")
	f.String("rate", "", "serialisation rate, e.g. 5mbit, 100kbit, 1gbit (0bit: unlimited)")
	f.String("delay", "", "one-way delay, e.g. 45ms")
	f.String("jitter", "", "uniform +- jitter, e.g. 2ms")
	f.String("loss", "", "Bernoulli loss in percent, e.g. 0.5")
	f.String("ge", "", "Gilbert-Elliott loss P_GOOD_TO_BAD/P_BAD_TO_GOOD/LOSS_GOOD/LOSS_BAD")
	f.String("queue", "", "drop-tail queue limit in packets")
	f.String("reorder", "", "let jitter reorder packets (true/false)")
	f.Lookup("reorder").NoOptDefVal = "true"
	f.String("down", "", "take the link down (drops everything)")
	f.Lookup("down").NoOptDefVal = "true"
	f.Bool("up", false, "bring the link up")
	f.String("trace", "", "deliver at a Mahimahi trace's opportunities (a file; none removes it); --rate caps it, --rate 0bit leaves it alone")
	f.String("trace-offset", "", "start the trace this far in, e.g. 30s")
	f.Float64Var(&at, "at", 0, "apply the change at this Unix time in seconds, e.g. 1764150000.25, exactly in the link's time (without --at or --in: now, cancelling the port's scheduled changes)")
	f.DurationVar(&in, "in", 0, "apply the change this long from now, e.g. 5s")
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func newLinkShowCmd() *cobra.Command {
	var (
		addr    string
		port    uint32
		jsonOut bool
	)
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Show a switch's links and their counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, closeConn, err := dialSwitch(cmd, addr)
			if err != nil {
				return err
			}
			defer closeConn()
			ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Second)
			defer cancel()
			resp, err := client.GetLinks(ctx, &plaitv1.GetLinksRequest{Port: port})
			if err != nil {
				return fmt.Errorf("get links from %s: %s", addr, sockrpc.Explain(err.Error()))
			}
			return printLinks(cmd, resp.GetLinks(), jsonOut)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "switch", "127.0.0.1:9559", "switch gRPC address")
	f.Uint32Var(&port, "port", 0, "only this port (0: all)")
	f.BoolVar(&jsonOut, "json", false, "print JSON")
	return cmd
}

func printLinks(cmd *cobra.Command, links []*plaitv1.Link, jsonOut bool) error {
	out := cmd.OutOrStdout()
	if jsonOut {
		var raw []json.RawMessage
		for _, l := range links {
			b, err := protojson.MarshalOptions{EmitUnpopulated: true, UseProtoNames: true}.Marshal(l)
			if err != nil {
				return fmt.Errorf("marshal link: %w", err)
			}
			raw = append(raw, b)
		}
		b, err := json.MarshalIndent(raw, "", "  ")
		if err != nil {
			return fmt.Errorf("marshal links: %w", err)
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PORT\tINTERFACE\tRATE\tDELAY\tJITTER\tLOSS\tQUEUE\tSTATE\tTX PKTS\tTX BYTES\tQ DROPS\tLOSS DROPS\tDEPTH\tLATE >1/>5 MS")
	for _, l := range links {
		p, s := l.GetParams(), l.GetStats()
		rate := formatLinkRate(p.GetRateBps())
		if tr := p.GetTrace(); tr != nil {
			rate = fmt.Sprintf("trace %s (%d per %dms, +%v)", tr.GetName(), tr.GetOpportunities(), tr.GetPeriodMs(), time.Duration(tr.GetOffsetUs())*time.Microsecond)
			if p.GetRateBps() > 0 {
				rate += " under " + formatLinkRate(p.GetRateBps())
			}
		}
		loss := fmt.Sprintf("%g%%", p.GetLossPercent())
		if ge := p.GetGilbertElliott(); ge != nil {
			loss = fmt.Sprintf("ge %g/%g/%g/%g", ge.GetPGoodToBad(), ge.GetPBadToGood(), ge.GetLossGood(), ge.GetLossBad())
		}
		state := "up"
		if p.GetDown() {
			state = "down"
		}
		if p.GetReorder() {
			state += ",reorder"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%v\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\n", l.GetPort(), l.GetInterface(), rate,
			time.Duration(p.GetDelayUs())*time.Microsecond, time.Duration(p.GetJitterUs())*time.Microsecond, loss, p.GetQueuePackets(), state,
			s.GetTxPackets(), s.GetTxBytes(), s.GetQueueDrops(), s.GetLossDrops(), s.GetQueueDepth(), s.GetLateOverOneMs(), s.GetLateOverFiveMs())
	}
	return w.Flush()
}
