package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/plait/plait/controller"
	"github.com/plait/plait/internal/sockrpc"
	"github.com/plait/plait/model"
)

func newControllerCmd() *cobra.Command {
	var network, listen, metrics, cc, trace, group string
	cmd := &cobra.Command{
		Use:   "controller --network FILE",
		Short: "Run the controller: estimate every path and steer the splits",
		Long: `Run the controller. It connects to the agents and switches a network file names,
becomes primary on every switch and programs it over P4Runtime, estimates each path from
the agents' measurements (capacity, base delay, queueing, loss, liveness), and keeps each
tunnel direction's split where packets arrive with the least delay asymmetry: edpf fed
with its estimates, over the set of paths the model predicts best. When it stops, the
datapath keeps the last split.`,
		Example: "  plait controller --network lab.yaml --listen /run/plait/controller.sock",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := controller.LoadNetwork(network)
			if err != nil {
				return err
			}
			e, err := sockrpc.ParseEndpoint(listen)
			if err != nil {
				return usagef(cmd, "--listen: %v", err)
			}
			l := sockrpc.Listener{Endpoint: e, Group: group}
			if !e.Unix {
				l.TLS = tlsFlags(cmd)
			}
			srv, err := sockrpc.Claim(l)
			if err != nil {
				return err
			}
			defer srv.Close()
			var tcp model.TCP
			if tcp.CC, err = model.ParseCC(cc); err != nil {
				return usagef(cmd, "--cc: %v", err)
			}
			opts := []controller.Option{controller.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))), controller.WithTCP(tcp), controller.WithMetricsAddress(metrics)}
			if trace != "" {
				f, err := os.Create(trace)
				if err != nil {
					return usagef(cmd, "--trace: %v (name a file in a writable directory)", err)
				}
				defer f.Close()
				opts = append(opts, controller.WithTrace(f))
			}
			c, err := controller.New(n, opts...)
			if err != nil {
				return err
			}
			// The first of the three to stop (with an error, or on Ctrl-C) stops the others.
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			errc := make(chan error, 3)
			go func() { errc <- c.Run(ctx) }()
			go func() { errc <- controller.Serve(ctx, c, srv) }()
			servers := 2
			if metrics != "" {
				servers++
				go func() { errc <- controller.ServeMetrics(ctx, c, metrics) }()
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "plait controller: %d agents, %d switches, %d tunnels; API on %s, metrics on %s\n",
				len(n.Agents), len(n.Switches), len(n.Tunnels), srv.Name, metrics)
			err = <-errc
			cancel()
			for i := 1; i < servers; i++ {
				<-errc
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&network, "network", "", "network file: agents, switches and tunnels to control (YAML)")
	f.StringVar(&listen, "listen", controller.DefaultSocket, "where to serve the operator API: unix:PATH, a socket path, or HOST:PORT (mutual TLS required unless loopback: --tls-ca, --tls-cert, --tls-key)")
	f.StringVar(&group, "socket-group", "", "with a Unix socket: group (name or id) whose members may use it too (mode 0660)")
	f.StringVar(&metrics, "metrics", controller.DefaultMetrics, "address for Prometheus /metrics (empty: off)")
	f.StringVar(&trace, "trace", "", "write the estimator trace to FILE: every path's measurements and estimate at every agent report (tab-separated)")
	f.StringVar(&cc, "cc", "cubic", "congestion control of the tunnels' flows, for the model: cubic or bbr")
	cmd.MarkFlagRequired("network")
	return cmd
}
