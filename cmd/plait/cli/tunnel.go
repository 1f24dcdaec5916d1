package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/model"
)

func newTunnelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Add, remove and list the striped tunnels of a host's agent",
	}
	cmd.AddCommand(newTunnelAddCmd(), newTunnelRemoveCmd(), newTunnelListCmd(), newTunnelGenkeyCmd())
	return cmd
}

func newTunnelAddCmd() *cobra.Command {
	var (
		cfg            pb.TunnelConfig
		paths, weights []string
		mode, encap    string
		cc             string
		keyFiles       []string
		noAuth         bool
	)
	cmd := &cobra.Command{
		Use:   "add --id N --device DEV --address CIDR --path name=NAME,dev=IF,remote=IP ...",
		Short: "Create a tunnel, or replace the one with the same id",
		Example: `  plait tunnel genkey /etc/plait/tunnel1.key   # once; copy it to the peer
  plait tunnel add --id 1 --device plait0 --address 10.99.0.1/24 --peer 10.99.0.2 \
    --key-file /etc/plait/tunnel1.key \
    --path name=wifi,dev=eth1,remote=10.0.1.2 --path name=lte,dev=eth2,remote=10.0.2.2 \
    --mode wrr --weights 2,1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(paths) == 0 && !cfg.ReceiveOnly {
				return usagef(cmd, "give at least one --path (or --receive-only)")
			}
			for _, s := range paths {
				p, err := parsePath(s)
				if err != nil {
					return usagef(cmd, "--path %q: %v", s, err)
				}
				cfg.Paths = append(cfg.Paths, p)
			}
			var err error
			if cfg.Weights, err = parseWeights(weights); err != nil {
				return usagef(cmd, "--weights: %v", err)
			}
			if mode != "" {
				if cfg.Mode, err = parseMode(mode); err != nil {
					return usagef(cmd, "--mode: %v", err)
				}
			}
			e, ok := pb.Encap_value["ENCAP_"+strings.ToUpper(encap)]
			if !ok {
				return usagef(cmd, "--encap %q: use udp (passes NAT) or ip (8 bytes less a packet, paths without NAT)", encap)
			}
			cfg.Encap = pb.Encap(e)
			if cc != "" {
				c, err := model.ParseCC(cc)
				if err != nil {
					return usagef(cmd, "--cc: %v", err)
				}
				cfg.WindowKept = c.Beta()
			}
			// Repair is on wherever it can be: it needs the peer's report channel, and a
			// tunnel whose paths lose nothing keeps no copies.
			if !cmd.Flags().Changed("repair") {
				cfg.Repair = cfg.PeerAddress != "" && !cfg.ReceiveOnly
			}
			if len(keyFiles) > 0 || noAuth {
				cfg.Auth = &pb.Auth{Disabled: noAuth}
			}
			for _, path := range keyFiles {
				k, err := agent.ReadKeyFile(path)
				if err != nil {
					return usagef(cmd, "--key-file: %v", err)
				}
				cfg.Auth.Keys = append(cfg.Auth.Keys, k[:])
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				t, err := c.Configure(ctx, &cfg)
				if err != nil {
					return err
				}
				return printTunnels(cmd, []*pb.Tunnel{t})
			})
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&cfg.Id, "id", 0, "tunnel id, 1-65535, the same on both ends")
	f.StringVar(&cfg.Device, "device", "", "tunnel device (created as a veth pair if missing)")
	f.StringVar(&cfg.Address, "address", "", "local tunnel address with prefix length, e.g. 10.99.0.1/24")
	f.StringVar(&cfg.RemotePrefix, "remote-prefix", "", "destinations to stripe (default: the address's prefix)")
	f.Uint32Var(&cfg.Port, "port", 0, "UDP port (default 7733)")
	f.StringVar(&encap, "encap", "udp", "udp, or ip (IPv4 protocol 253, 8 bytes less a packet) where no NAT is on the paths")
	f.StringArrayVar(&paths, "path", nil, "a path: name=NAME,dev=IF,remote=IP[,local=IP][,via=GATEWAY] (repeat, at most 8)")
	f.StringVar(&mode, "mode", "", "scheduler: rr, wrr or edpf (default wrr)")
	f.StringVar(&cfg.AckPath, "ack-path", "", "send every ACK-sized packet on this path (see 'plait path acks')")
	f.StringSliceVar(&weights, "weights", nil, "wrr weights, one per path (default equal)")
	f.BoolVar(&cfg.Telemetry, "telemetry", false, "carry a telemetry block for P4 switches to stamp (8 bytes a packet)")
	f.BoolVar(&cfg.Resequence, "resequence", false, "hand this end's stack the received packets in the sender's order (holds a packet behind a hole up to a bound from the paths' delays)")
	f.BoolVar(&cfg.Repair, "repair", false, "repair losses on the paths: once the peer asks, keep copies of sent packets; ask the peer for lost ones; resend on the lowest-delay path (needs --peer; on both ends; default on with --peer)")
	f.StringVar(&cc, "cc", "", "congestion control of the flows this end receives, cubic or bbr: with repair, a BBR flow, which keeps its window at a loss, is not held for repairs (default cubic; a controller's --cc sets it)")
	f.StringVar(&cfg.PeerAddress, "peer", "", "the other end's tunnel address: TCP between the two goes compact (20 bytes less a packet)")
	f.BoolVar(&cfg.ReceiveOnly, "receive-only", false, "only measure and untag on --device (an existing interface): a split switch encapsulates")
	f.StringArrayVar(&keyFiles, "key-file", nil, "file with the tunnel's key (32 hex digits, mode 0600; the same on both ends): packets are tagged under it; repeat once to roll keys over (the first tags)")
	f.BoolVar(&noAuth, "no-auth", false, "send and take untagged packets: only where nobody else can send on the paths")
	f.StringSliceVar(&cfg.AllowedIps, "allowed-ip", nil, "inner source prefix the peer may send from (repeat, at most 8; default: --peer's address, else --remote-prefix)")
	for _, name := range []string{"id", "device", "address"} {
		cmd.MarkFlagRequired(name)
	}
	return cmd
}

// authState says how the tunnel's packets are authenticated, naming keys by their ids.
func authState(c *pb.TunnelConfig) string {
	switch {
	case c.ReceiveOnly:
		return "untagged (receive-only)"
	case c.Auth.GetDisabled():
		return "authentication off"
	}
	return "keys " + strings.Join(c.Auth.GetKeyIds(), ",")
}

func newTunnelGenkeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "genkey FILE",
		Short: "Write a new random tunnel key to FILE (created mode 0600); give both ends the same",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return agent.WriteKeyFile(args[0])
		},
	}
}

func parsePath(s string) (*pb.PathConfig, error) {
	p := &pb.PathConfig{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		switch k {
		case "name":
			p.Name = v
		case "dev":
			p.Interface = v
		case "remote":
			p.RemoteAddr = v
		case "local":
			p.LocalAddr = v
		case "via":
			p.NextHop = v
		default:
			return nil, fmt.Errorf("unknown key %q: use name, dev, remote, local or via", k)
		}
	}
	if p.Interface == "" || p.RemoteAddr == "" {
		return nil, fmt.Errorf("a path needs at least dev=INTERFACE and remote=PEER_ADDRESS")
	}
	return p, nil
}

// splitList reads list arguments given separately, comma-separated or both.
func splitList(args []string) []string {
	var out []string
	for _, a := range args {
		for _, s := range strings.Split(a, ",") {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func parseWeights(args []string) ([]float64, error) {
	var out []float64
	for _, s := range splitList(args) {
		w, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", s)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseMode(s string) (pb.Mode, error) {
	m, ok := pb.Mode_value["MODE_"+strings.ToUpper(s)]
	if !ok || m == 0 {
		return 0, fmt.Errorf("unknown mode %q: use rr, wrr or edpf", s)
	}
	return pb.Mode(m), nil
}

func modeName(m pb.Mode) string { return strings.ToLower(strings.TrimPrefix(m.String(), "MODE_")) }

func newTunnelRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID",
		Short: "Remove a tunnel (its device's traffic then passes untouched)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseUint(args[0], 10, 16)
			if err != nil {
				return usagef(cmd, "tunnel id %q is not a number from 1 to 65535", args[0])
			}
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				_, err := c.RemoveTunnel(ctx, &pb.TunnelRef{Id: uint32(id)})
				return err
			})
		},
	}
}

func newTunnelListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List tunnels with their paths, weights and state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAgent(cmd, func(ctx context.Context, c pb.AgentClient) error {
				r, err := c.ListTunnels(ctx, &pb.Empty{})
				if err != nil {
					return err
				}
				return printTunnels(cmd, r.Tunnels)
			})
		},
	}
}

func printTunnels(cmd *cobra.Command, ts []*pb.Tunnel) error {
	w := cmd.OutOrStdout()
	if wantJSON(cmd) {
		return printProto(w, &pb.ListTunnelsResponse{Tunnels: ts})
	}
	for _, t := range ts {
		c := t.Config
		mode := modeName(c.Mode)
		if c.AckPath != "" {
			mode += ", ACKs on " + c.AckPath
		}
		encap := fmt.Sprintf("udp port %d", c.Port)
		if c.Encap == pb.Encap_ENCAP_IP {
			encap = "ip"
		}
		fmt.Fprintf(w, "tunnel %d  device %s  %s -> %s  %s  mode %s  mtu %d  %s\n", c.Id, c.Device, c.Address, c.RemotePrefix, encap, mode, t.Mtu, authState(c))
		if g := c.SignalTrigger; g != nil {
			fmt.Fprintf(w, "signal trigger: once within %d ms of a flow's start, at a queue of %s at %s that stood %s\n",
				g.WindowMs, fmtUs(g.QueueUs), fmtRate(g.RateBps), fmtUs(g.StandingUs))
		}
		tb := newTable(w, "PATH", "INTERFACE", "LOCAL", "REMOTE", "NEXT HOP", "STATE", "WEIGHT", "RATE", "DELAY")
		for _, p := range t.Paths {
			state := "up"
			if !p.Up {
				state = "down"
			}
			if p.Pending != "" {
				state = "pending"
			}
			tb.row(p.Config.Name, p.Config.Interface, p.Config.LocalAddr, p.Config.RemoteAddr, p.NextHopMac, state,
				fmt.Sprintf("%.3f", p.Weight), fmtRate(p.Estimate.RateBps), fmtUs(p.Estimate.DelayUs))
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	return nil
}
