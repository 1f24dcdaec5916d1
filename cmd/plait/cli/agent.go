package cli

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/plait/plait/agent"
	pb "github.com/plait/plait/api/plait/v1"
	"github.com/plait/plait/internal/sockrpc"
)

func newAgentCmd() *cobra.Command {
	var (
		socket, pinDir, stateFile, config string
		interval, group, listen           string
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the host agent: load the eBPF datapath and serve its API",
		Long: `Run the host agent in this host (network namespace). It loads the eBPF sender and
receiver, pins them so they outlive it, configures tunnels and serves the agent API on a
Unix socket (mode 0600, or 0660 with --socket-group; callers are checked by their
credentials) and, with --listen, on TCP: mutual TLS with --tls-ca/--tls-cert/--tls-key is
required on anything but loopback. The agent takes a path on which its peer's packets
have stopped arriving out of its split itself, within 200 ms, and puts it back when they
arrive again, with or without a controller. A restarted agent takes over the running datapath
without interrupting it; a second agent refuses to start on a live socket.`,
		Example: `  plait agent
  plait agent --listen 192.0.2.1:9470 --tls-ca ca.pem --tls-cert h1.pem --tls-key h1-key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseDuration(cmd, "sample-interval", interval)
			if err != nil {
				return err
			}
			// The addresses first: a second agent stops here, before it takes over the
			// running datapath.
			se, err := sockrpc.ParseEndpoint(socket)
			if err != nil || !se.Unix {
				return usagef(cmd, "--socket %q: give a path or unix:PATH (TCP goes in --listen)", socket)
			}
			ls := []sockrpc.Listener{{Endpoint: se, Group: group}}
			if listen != "" {
				e, err := sockrpc.ParseEndpoint(listen)
				if err != nil || e.Unix {
					return usagef(cmd, "--listen %q: give HOST:PORT", listen)
				}
				ls = append(ls, sockrpc.Listener{Endpoint: e, TLS: tlsFlags(cmd)})
			}
			var srvs []*sockrpc.Server
			defer func() {
				for _, s := range srvs {
					s.Close()
				}
			}()
			for _, l := range ls {
				s, err := sockrpc.Claim(l)
				if err != nil {
					return err
				}
				srvs = append(srvs, s)
			}
			opts := []agent.Option{agent.WithSampleInterval(d), agent.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil)))}
			if pinDir != "" {
				opts = append(opts, agent.WithPinDir(pinDir))
			}
			if stateFile != "" {
				opts = append(opts, agent.WithStateFile(stateFile))
			}
			a, err := agent.New(opts...)
			if err != nil {
				return err
			}
			defer a.Close()
			if config != "" {
				if err := configureFromFile(cmd, a, config); err != nil {
					return err
				}
			}
			go a.Run(cmd.Context())
			go a.RunLiveness(cmd.Context())
			for _, s := range srvs {
				fmt.Fprintf(cmd.ErrOrStderr(), "plait agent: serving on %s\n", s.Name)
			}
			return agent.Serve(cmd.Context(), a, srvs...)
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "socket", agent.DefaultSocket, "Unix socket to serve the API on")
	f.StringVar(&group, "socket-group", "", "group (name or id) whose members may use the socket too (mode 0660)")
	f.StringVar(&listen, "listen", "", "HOST:PORT to serve the API on TCP as well (mutual TLS required unless loopback: --tls-ca, --tls-cert, --tls-key)")
	f.StringVar(&pinDir, "pin-dir", "", "bpffs directory for pinned maps and links (default: per network namespace under /sys/fs/bpf/plait)")
	f.StringVar(&stateFile, "state-file", "", "where the configuration survives restarts (default: per network namespace under /run/plait)")
	f.StringVar(&config, "config", "", "JSON file with tunnels to configure at start: {\"tunnels\": [TunnelConfig, ...]}")
	f.StringVar(&interval, "sample-interval", "25ms", "how often the datapath's counters are read")
	return cmd
}

// configureFromFile applies {"tunnels": [TunnelConfig, ...]} (protobuf JSON).
func configureFromFile(cmd *cobra.Command, a *agent.Agent, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read --config: %w", err)
	}
	var file struct {
		Tunnels []json.RawMessage `json:"tunnels"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		return fmt.Errorf("--config %s is not JSON of the form {\"tunnels\": [...]}: %w", path, err)
	}
	for i, raw := range file.Tunnels {
		c := &pb.TunnelConfig{}
		if err := protojson.Unmarshal(raw, c); err != nil {
			return fmt.Errorf("--config %s: tunnel %d: %w", path, i+1, err)
		}
		if _, err := a.Configure(cmd.Context(), c); err != nil {
			return fmt.Errorf("--config %s: tunnel %d: %w", path, c.Id, explain(err))
		}
	}
	return nil
}
